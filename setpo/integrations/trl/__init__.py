"""SetPO on TRL: ``SetPOConfig`` (GRPOConfig + credit settings + paper presets) and ``SetPOTrainer``.

from setpo.integrations.trl import SetPOConfig, SetPOTrainer
args = SetPOConfig.from_preset("table4_grpo_1.5b", output_dir="runs/x", setpo_embedder="minilm")
trainer = SetPOTrainer(model, reward_funcs=[my_reward], args=args, train_dataset=ds)
"""

from setpo.integrations.trl.config import SetPOConfig
from setpo.integrations.trl.embedding import build_text_embedder
from setpo.integrations.trl.group_rewards import GroupRewardFunction, completion_text
from setpo.integrations.trl.presets import PRESETS, Preset, available_presets, get_preset, preset_to_yaml
from setpo.integrations.trl.trainer import SetPOTrainer

__all__ = [
    "PRESETS",
    "GroupRewardFunction",
    "Preset",
    "SetPOConfig",
    "SetPOTrainer",
    "available_presets",
    "build_text_embedder",
    "completion_text",
    "get_preset",
    "preset_to_yaml",
]
