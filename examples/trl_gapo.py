"""GAPO's group-aware frequency reward in TRL: the method `diversity_method="gapo"` (on a tiny offline model).

    pip install "setpo[trl]"
    python examples/trl_gapo.py

GAPO rewards a valid answer by how rare it is in its group: R_i = 1 - (f_i - 1/L) for an answer in the prompt's
valid set V (f_i: its share of the group's valid answers, L = |V|), -1 otherwise (GAPO eq. 3). With
`diversity_method="gapo"`, `SetPOTrainer` reads each completion's answer (`answer_extractor`) and each prompt's V
(the dataset column `diversity_valid_set_column`) on whole groups gathered across processes, and GAPO's reward
replaces the task reward before GRPO's group normalisation: GAPO alone, as in its paper.
"""

import tempfile

import torch
from datasets import Dataset

from setpo import gapo_rewards
from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.tiny import build_tiny_model, load_tiny


def first_letter(text: str) -> str | None:
    """The answer of a completion: its first letter (None when it has none)."""
    letters = [c for c in text if c.isalpha()]
    return letters[0].lower() if letters else None


def valid(completions, valid_answers, **kwargs) -> list[float]:
    """The task reward (1 for a valid answer), which GAPO's reward replaces; TRL still logs it."""
    return [float(first_letter(c) in v) for c, v in zip(completions, valid_answers)]


# one group of G = 4: "a" twice, "b" once, "z" (not in V = {a, b, c, d}) once
got = gapo_rewards(["a", "a", "b", "z"], [list("abcd")], 4)
print("GAPO rewards of a, a, b, z with V = {a, b, c, d}:", got.tolist())
# 3 valid answers: f_a = 2/3, f_b = 1/3, 1/L = 1/4; "z" is invalid
torch.testing.assert_close(got, torch.tensor([1 - (2 / 3 - 1 / 4)] * 2 + [1 - (1 / 3 - 1 / 4), -1.0]))

with tempfile.TemporaryDirectory() as tmp:
    model, tokenizer = load_tiny(build_tiny_model(f"{tmp}/tiny", hidden_size=32, num_layers=1))
    data = Dataset.from_dict({"prompt": ["pick:", "name one:"], "valid_answers": [list("abcdefghijklm")] * 2})
    args = SetPOConfig(
        output_dir=f"{tmp}/out",
        diversity_method="gapo",  # its options: diversity_method_kwargs={"form": ..., "count": ...}
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
        model=model,
        reward_funcs=[valid],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        answer_extractor=first_letter,
    )
    trainer.train()

logged = [h["method/gapo/reward"] for h in trainer.state.log_history if "method/gapo/reward" in h]
print("mean GAPO reward per step:", logged)
assert len(logged) == 2 and all(-1.0 <= r <= 1.0 + 1.0 / 13 for r in logged)
print("ok")
