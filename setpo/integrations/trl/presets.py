"""The paper's training settings (``setpo.paper_runs.PAPER_RUNS``) as named presets of ``SetPOConfig`` values.

TRL names: KL coefficient = ``beta``; clip range = ``epsilon`` (low) / ``epsilon_high``; GSPO =
``importance_sampling_level="sequence"``; DAPO = ``loss_type="dapo"`` with ``epsilon_high=0.28``;
Dr.GRPO = ``scale_rewards="none"`` with ``loss_type="dr_grpo"``. ``generation_batch_size`` counts completions
(prompts per step x G); set ``per_device_train_batch_size`` x processes x ``gradient_accumulation_steps`` to the
paper's mini-batch x G for one optimiser update per mini-batch. The baseline of every SetPO row is the same preset
with ``setpo_lambda=0.0``; GAPO's row sets ``diversity_method="gapo"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from setpo._validate import check_choice
from setpo.paper_runs import DATASETS, PAPER_EMBEDDER, PAPER_RUNS, PaperRun

# Shared by every SetPO row: the paper's embedder on the output text, clamped cosine kernel, g = -log(1+x).
_SETPO_COMMON: dict[str, Any] = {
    "setpo_embedder": PAPER_EMBEDDER,
    "setpo_kernel_clamp": True,
    "setpo_shaping": "neglog1p",
    "setpo_embed_field": "completion",
}
#: The base methods in TRL: loss aggregation and importance-sampling level.
_BASE: dict[str, dict[str, Any]] = {
    "grpo": {"loss_type": "grpo"},
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence"},
    "dapo": {"loss_type": "dapo"},
}
_TRL_DEFAULT_EPSILON = 0.2  # written out for a base method whose paper table gives no clip range (Table 8)
#: PaperRun field -> SetPOConfig field, for the fields that carry over as they are (None ones are left out).
_FIELDS = {"lr": "learning_rate", "kl": "beta", "epochs": "num_train_epochs", "group_size": "num_generations"}
_FIELDS |= {"temperature": "temperature", "max_response": "max_completion_length"}


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


def trl_values(run: PaperRun) -> dict[str, Any]:
    """``SetPOConfig`` field values of a paper run; fields the paper does not state keep TRL's defaults."""
    values = {key: getattr(run, attr) for attr, key in _FIELDS.items() if getattr(run, attr) is not None}
    values["generation_batch_size"] = run.prompts_per_step * run.group_size
    if run.method != "setpo":  # another method (GAPO) with its own defaults; SetPO's fields would be refused
        values["diversity_method"] = run.method
    else:
        values["setpo_lambda"] = float(run.lam)
        if run.lam > 0:
            values |= _SETPO_COMMON
    if run.base is not None:
        values |= {**_BASE[run.base], "scale_rewards": "group"}
        values["epsilon"] = run.clip_low if run.clip_low is not None else _TRL_DEFAULT_EPSILON
        if run.clip_high is not None:
            values["epsilon_high"] = run.clip_high
    return values


def _trl_notes(run: PaperRun) -> str:
    """The run's notes plus what TRL cannot take from it (no max_prompt_length, no mini-batch, LoRA elsewhere)."""
    parts = [run.notes] if run.notes else []
    if run.base is not None and run.clip_low is None:
        parts.append(f"Clip range not given (TRL default {_TRL_DEFAULT_EPSILON:g} kept)")
    if run.max_prompt is not None:
        parts.append(
            f"max prompt length {run.max_prompt} tokens (truncate prompts in the dataset: TRL 1.16 has no "
            "max_prompt_length)"
        )
    if run.mini_batch is not None and run.mini_batch != run.prompts_per_step:
        parts.append(f"mini-batch {run.mini_batch} prompts")
    if run.lora is not None:
        parts.append("pass LoRA via peft_config")
    return "; ".join(parts) + "." if parts else ""


def to_preset(run: PaperRun) -> Preset:
    """The TRL preset of a paper run."""
    extra = {"lora": dict(run.lora)} if run.lora is not None else {}
    return Preset(run.name, run.source, run.model, DATASETS[run.dataset], trl_values(run), _trl_notes(run), extra)


PRESETS: dict[str, Preset] = {name: to_preset(run) for name, run in PAPER_RUNS.items()}


def available_presets() -> list[str]:
    """Names accepted by ``SetPOConfig.from_preset``."""
    return sorted(PRESETS)


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (ValueError listing the known names otherwise)."""
    return PRESETS[check_choice(name, "preset", available_presets())]


def preset_to_yaml(name: str) -> str:
    """YAML text of a preset, for ``SetPOConfig.from_yaml`` or ``TrlParser --config``."""
    p = get_preset(name)
    header = [f"# {p.name}: {p.source}", f"# model: {p.model}", f"# data: {p.data}"]
    if p.notes:
        header.append(f"# note: {p.notes}")
    if p.extra:
        header.append(f"# not a config field: {p.extra}")
    return "\n".join(header) + "\n" + yaml.safe_dump(p.values, sort_keys=True)
