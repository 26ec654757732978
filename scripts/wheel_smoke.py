"""One SetPOTrainer step on a tiny CPU model with the offline MiniLM embedder, from an installed setpo.

Run from outside the repository (scripts/check_compat.sh does) so that ``import setpo`` finds the installed wheel,
not the working tree. Prints the versions it ran with; exits non-zero on any failure.
"""

from __future__ import annotations

import math
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import torch
from datasets import Dataset

import setpo
from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.tiny import build_tiny_model, load_tiny

G = 4


def distinct_chars(completions, **kwargs) -> list[float]:
    """A reward with ties and spread: the number of distinct characters of each completion."""
    return [float(len(set(c))) for c in completions]


def main() -> int:
    here = Path(setpo.__file__).resolve()
    if "site-packages" not in here.parts:
        print(f"setpo imported from {here}, not from an installed wheel", file=sys.stderr)
        return 1
    names = ("setpo", "torch", "numpy", "trl", "transformers", "accelerate", "peft", "sentence-transformers")
    print("versions:", ", ".join(f"{n} {version(n)}" for n in names))
    with tempfile.TemporaryDirectory() as tmp:
        model, tok = load_tiny(build_tiny_model(Path(tmp) / "tiny", hidden_size=32, num_layers=1))
        args = SetPOConfig(
            output_dir=str(Path(tmp) / "out"),
            setpo_lambda=0.5,
            setpo_embedder="minilm",
            max_steps=1,
            per_device_train_batch_size=2 * G,
            num_generations=G,
            max_completion_length=8,
            learning_rate=1e-2,
            seed=0,
            report_to="none",
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
        )
        trainer = SetPOTrainer(
            model=model,
            reward_funcs=[distinct_chars],
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["ab", "cd", "ef", "gh"]}),
            processing_class=tok,
        )
        trainer.train()
    last = trainer.method_last
    term = None if last is None else last["term"]
    logged = [h for h in trainer.state.log_history if "setpo/credit_std" in h]
    if term is None or term.shape != (2 * G,) or not torch.isfinite(term).all() or not logged:
        print(f"no SetPO term after one step: {term}, log {trainer.state.log_history}", file=sys.stderr)
        return 1
    std = logged[-1]["setpo/credit_std"]
    if not (math.isfinite(std) and std > 0):
        print(f"credit std {std} after one step: the credit did not reach the advantages", file=sys.stderr)
        return 1
    lam = last["lambda"]
    print(f"one SetPOTrainer step: {term.shape[0]} rows, credit std {std:.4g}, lambda {lam}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
