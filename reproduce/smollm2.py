"""The SmolLM2 helpers' former import path, kept for `smollm2_lists` and `benchmarks/bench_smollm2.py`; the code
is in `reproduce.tasks.smollm2`."""

from reproduce.tasks.smollm2 import LORA_TARGETS, MODEL, load_policy, lora_config, sample, train_arm

__all__ = ["LORA_TARGETS", "MODEL", "load_policy", "lora_config", "sample", "train_arm"]
