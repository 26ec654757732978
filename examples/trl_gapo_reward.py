"""GAPO's group-aware frequency reward as a TRL reward function (on a tiny offline model).

    pip install "setpo[trl]"
    python examples/trl_gapo_reward.py

GAPO rewards a valid answer by how rare it is in its group: R_i = 1 - (f_i - 1/L) for an answer in the prompt's
valid set V (f_i: its share of the group's valid answers, L = |V|), -1 otherwise (GAPO eq. 3). A reward that
looks at the whole group is wrapped as a `GroupRewardFunction` (`gapo_reward_func` does that), and `SetPOTrainer`
scores it on whole groups gathered across processes. Here SetPO's credit is off (`setpo_lambda=0`): GAPO alone,
as in its paper.
"""

import tempfile

import torch
from datasets import Dataset

from setpo import gapo_rewards
from setpo.integrations.trl import SetPOConfig, SetPOTrainer, gapo_reward_func
from setpo.tiny import build_tiny_model, load_tiny


def first_letter(text: str) -> str | None:
    """The answer of a completion: its first letter (None when it has none)."""
    letters = [c for c in text if c.isalpha()]
    return letters[0].lower() if letters else None


reward = gapo_reward_func(first_letter, valid_set_key="valid_answers")

# one group of G = 4: "a" twice, "b" once, "z" (not in V = {a, b, c, d}) once
got = reward.score(["p"] * 4, ["apple", "avocado", "banana", "zebra"], 4, valid_answers=[list("abcd")] * 4)
print("GAPO rewards of a, a, b, z with V = {a, b, c, d}:", got.tolist())
# 3 valid answers: f_a = 2/3, f_b = 1/3, 1/L = 1/4; "z" is invalid
torch.testing.assert_close(got, torch.tensor([1 - (2 / 3 - 1 / 4)] * 2 + [1 - (1 / 3 - 1 / 4), -1.0]))
torch.testing.assert_close(got, gapo_rewards(["a", "a", "b", None], [list("abcd")] * 4, 4))

with tempfile.TemporaryDirectory() as tmp:
    model, tokenizer = load_tiny(build_tiny_model(f"{tmp}/tiny", hidden_size=32, num_layers=1))
    data = Dataset.from_dict({"prompt": ["pick:", "name one:"], "valid_answers": [list("abcdefghijklm")] * 2})
    args = SetPOConfig(
        output_dir=f"{tmp}/out",
        setpo_lambda=0.0,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-2,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = SetPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=data, processing_class=tokenizer
    )
    trainer.train()

logged = [h["rewards/gapo/mean"] for h in trainer.state.log_history if "rewards/gapo/mean" in h]
print("mean GAPO reward per step:", logged)
assert len(logged) == 2 and all(-1.0 <= r <= 1.0 + 1.0 / 13 for r in logged)
print("ok")
