"""The paper's training settings (SetPO Tables 4-8, GAPO Sec. 4) as named presets of ``SetPOConfig`` values.

TRL names: KL coefficient = ``beta``; clip range = ``epsilon`` (low) / ``epsilon_high``; GSPO =
``importance_sampling_level="sequence"``; DAPO = ``loss_type="dapo"`` with ``epsilon_high=0.28``;
Dr.GRPO = ``scale_rewards="none"`` with ``loss_type="dr_grpo"``. ``generation_batch_size`` counts completions
(prompts per step x G); set ``per_device_train_batch_size`` x processes x ``gradient_accumulation_steps`` to the
paper's mini-batch x G for one optimiser update per mini-batch. The baseline of every row is the same preset with
``setpo_lambda=0.0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

# Shared by every SetPO row: Qwen3-Embedding-0.6B on the output text, clamped cosine kernel, g = -log(1+x).
_SETPO_COMMON: dict[str, Any] = {
    "setpo_embedder": "Qwen/Qwen3-Embedding-0.6B",
    "setpo_kernel_clamp": True,
    "setpo_shaping": "neglog1p",
    "setpo_embed_field": "completion",
}
_GSM8K = "GSM8K train; prompt + 'Please reason step by step, and put your final answer within \\boxed{}.'"


@dataclass(frozen=True)
class Preset:
    """A named training setting: where it comes from and the config values it sets."""

    name: str
    source: str
    model: str
    data: str
    values: dict[str, Any]
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # settings with no TRL config field (e.g. LoRA)


def _math_row(name: str, table: str, model: str, lr: float, clip: tuple[float, float | None], lam: float, **kw):
    values = {
        **_SETPO_COMMON,
        "learning_rate": lr,
        "beta": 1e-4,
        "num_train_epochs": 2,
        "num_generations": 6,
        "generation_batch_size": 64 * 6,
        "temperature": 0.9,
        "epsilon": clip[0],
        "max_completion_length": 756,
        "setpo_lambda": lam,
        "scale_rewards": "group",
        **kw,
    }
    if clip[1] is not None:
        values["epsilon_high"] = clip[1]
    return Preset(name, table, model, _GSM8K, values)


def _build() -> dict[str, Preset]:
    presets: list[Preset] = []
    for size in ("1.5b", "7b"):
        model = f"Qwen/Qwen2.5-Math-{size.upper()}"
        presets += [
            _math_row(f"table4_grpo_{size}", "SetPO Table 4", model, 3e-6, (0.2, None), 0.05, loss_type="grpo"),
            _math_row(
                f"table5_gspo_{size}",
                "SetPO Table 5",
                model,
                1e-6,
                (3e-4, 4e-4),
                0.1,
                loss_type="grpo",
                importance_sampling_level="sequence",
            ),
            _math_row(f"table6_dapo_{size}", "SetPO Table 6", model, 1e-6, (0.2, 0.28), 0.2, loss_type="dapo"),
        ]
    presets.append(
        Preset(
            "table7_grpo_32b",
            "SetPO Table 7",
            "Qwen/Qwen2.5-32B",
            "SimpleRL-Zoo 'hard' split (MATH levels 3-5)",
            {
                **_SETPO_COMMON,
                "learning_rate": 1e-6,
                "beta": 1e-3,
                "num_train_epochs": 15,
                "num_generations": 6,
                "generation_batch_size": 1024 * 6,
                "temperature": 1.0,
                "epsilon": 0.2,
                "max_completion_length": 4096,
                "setpo_lambda": 0.1,
                "loss_type": "grpo",
                "scale_rewards": "group",
            },
            notes="Table 7 lists rollout temperature 1.0, the text says 0.1; mini-batch 256 prompts.",
        )
    )
    for G in (3, 7):
        for kl in (1e-3, 5e-3):
            suffix = "" if kl == 1e-3 else "_kl5e-3"
            presets.append(
                Preset(
                    f"table8_countdown_g{G}{suffix}",
                    "SetPO Table 8",
                    "Qwen/Qwen2.5-3B",
                    "Countdown (TinyZero data, 'base' template), rule reward with 0.1 format score",
                    {
                        **_SETPO_COMMON,
                        "learning_rate": 1e-6,
                        "beta": kl,
                        "num_train_epochs": 1,
                        "num_generations": G,
                        "generation_batch_size": 128 * G,
                        "temperature": 1.0,
                        "epsilon": 0.2,
                        "max_completion_length": 2048,
                        "setpo_lambda": 0.5,
                        "loss_type": "grpo",
                        "scale_rewards": "group",
                    },
                    notes="Clip range not given (TRL default 0.2 kept); max prompt length 512 tokens "
                    "(truncate prompts in the dataset: TRL 1.16 has no max_prompt_length).",
                )
            )
    presets.append(
        Preset(
            "gapo_qwen2.5_7b_lora",
            "GAPO Sec. 4 (medium confidence)",
            "Qwen/Qwen2.5-7B-Instruct",
            "synthetic 'pick one item from this list' prompts, 4-12 items; reward = gapo_reward_func",
            {
                "learning_rate": 1e-5,
                "beta": 0.0,
                "num_generations": 32,
                "generation_batch_size": 8 * 32,
                "setpo_lambda": 0.0,
            },
            notes="Plain GRPO with the group-level frequency reward; pass LoRA via peft_config.",
            extra={"lora": {"r": 64, "lora_alpha": 32, "lora_dropout": 0.1}},
        )
    )
    return {p.name: p for p in presets}


PRESETS: dict[str, Preset] = _build()


def available_presets() -> list[str]:
    """Names accepted by ``SetPOConfig.from_preset``."""
    return sorted(PRESETS)


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (ValueError listing the known names otherwise)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; available: {available_presets()}") from None


def preset_to_yaml(name: str) -> str:
    """YAML text of a preset (the files in configs/trl/ are exactly this)."""
    p = get_preset(name)
    header = [f"# {p.name}: {p.source}", f"# model: {p.model}", f"# data: {p.data}"]
    if p.notes:
        header.append(f"# note: {p.notes}")
    if p.extra:
        header.append(f"# not a config field: {p.extra}")
    return "\n".join(header) + "\n" + yaml.safe_dump(p.values, sort_keys=True)
