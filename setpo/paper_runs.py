"""Every training run of the paper (SetPO Tables 4-8) and of GAPO Sec. 4, as one table of its stated settings.

Pure data: the TRL presets (``setpo.integrations.trl.presets``) and the verl launch settings
(``reproduce.scale.settings``) are translations of these rows. A field the paper does not state is None and
neither translation sets it from here (each engine keeps its own default or this project's documented choice).
Values: spec section 4 table (../shared/spec/setpo-paper.md) and the GAPO summary (gapo-and-related.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from setpo._validate import check_choice, check_int, check_real

Base = Literal["grpo", "gspo", "dapo"]
BASES: tuple[str, ...] = ("grpo", "gspo", "dapo")

#: The embedding model of the paper's kernel (Sec. 5 setup): rollout text -> embedding -> clamped cosine kernel.
PAPER_EMBEDDER = "Qwen/Qwen3-Embedding-0.6B"

#: What each dataset key means (for verl it is also the folder ``setpo.data.prepare`` writes under DATA_DIR).
DATASETS: Mapping[str, str] = MappingProxyType(
    {
        "gsm8k": "GSM8K train; prompt + 'Please reason step by step, and put your final answer within \\boxed{}.'",
        "simplerl_hard": "SimpleRL-Zoo 'hard' split (MATH levels 3-5)",
        "countdown": "Countdown (TinyZero data, 'base' template), rule reward with 0.1 format score",
        "gapo_lists": "synthetic 'pick one item from this list' prompts, 4-12 items; reward: GAPO's (method 'gapo')",
    }
)


@dataclass(frozen=True, kw_only=True)
class PaperRun:
    """One run as the paper states it; None = not stated.

    base: the base method SetPO is added to; None = plain GRPO left at the engine's defaults (GAPO names no
    loss variant). method: the diversity method (a ``setpo.methods`` name) the run trains with. lam: SetPO's lambda
    (A_hat = A_bar + lambda s, eq. 6); 0 = no SetPO (the baseline of a SetPO row). group_size: rollouts
    per prompt G. clip_high: None = the same as clip_low. val_*: the evaluation sampling. lora: LoRA settings
    when the run trains adapters.
    """

    name: str
    source: str
    model: str
    dataset: str
    base: Base | None
    method: str = "setpo"
    lam: float
    lr: float
    kl: float
    epochs: int | None = None
    group_size: int
    prompts_per_step: int
    mini_batch: int | None = None
    temperature: float | None = None
    clip_low: float | None = None
    clip_high: float | None = None
    max_prompt: int | None = None
    max_response: int | None = None
    val_temperature: float | None = None
    val_top_p: float | None = None
    train_max_samples: int | None = None
    lora: Mapping[str, float] | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        check_choice(self.dataset, f"{self.name}: dataset", sorted(DATASETS))
        check_choice(self.base, f"{self.name}: base", (*BASES, None))
        for key in ("lam", "lr", "kl", "temperature", "clip_low", "clip_high", "val_temperature", "val_top_p"):
            check_real(getattr(self, key), f"{self.name}: {key}", minimum=0, none=True)
        for key in ("epochs", "group_size", "prompts_per_step", "mini_batch", "max_prompt", "max_response"):
            check_int(getattr(self, key), f"{self.name}: {key}", minimum=1, none=True)
        if self.clip_high is not None and self.clip_low is None:
            raise ValueError(f"{self.name}: clip_high is set but clip_low is not")
        if self.lora is not None:
            object.__setattr__(self, "lora", MappingProxyType(dict(self.lora)))

    @property
    def table(self) -> int | None:
        """The SetPO paper's table number of this run (None for runs from other papers)."""
        m = re.fullmatch(r"SetPO Table (\d+)", self.source)
        return int(m.group(1)) if m else None


#: The paper's evaluation sampling (Sec. 5): temperature 0.5, top-p 0.9.
_EVAL = dict(val_temperature=0.5, val_top_p=0.9)


def _runs() -> list[PaperRun]:
    runs: list[PaperRun] = []
    for size in ("1.5B", "7B"):  # Tables 4-6: Qwen2.5-Math on GSM8K train, one row per base method
        tag = size.lower()
        math_row = dict(model=f"Qwen/Qwen2.5-Math-{size}", dataset="gsm8k", kl=1e-4, epochs=2, group_size=6)
        math_row |= dict(prompts_per_step=64, temperature=0.9, max_response=756, **_EVAL)
        runs += [
            PaperRun(name=f"table4_grpo_{tag}", source="SetPO Table 4", base="grpo", lam=0.05, lr=3e-6,
                     clip_low=0.2, **math_row),
            PaperRun(name=f"table5_gspo_{tag}", source="SetPO Table 5", base="gspo", lam=0.1, lr=1e-6,
                     clip_low=3e-4, clip_high=4e-4, mini_batch=64, **math_row),
            PaperRun(name=f"table6_dapo_{tag}", source="SetPO Table 6", base="dapo", lam=0.2, lr=1e-6,
                     clip_low=0.2, clip_high=0.28, mini_batch=64, **math_row),
        ]  # fmt: skip
    runs.append(
        PaperRun(
            name="table7_grpo_32b", source="SetPO Table 7", model="Qwen/Qwen2.5-32B", dataset="simplerl_hard",
            base="grpo", lam=0.1, lr=1e-6, kl=1e-3, epochs=15, group_size=6, prompts_per_step=1024, mini_batch=256,
            temperature=1.0, clip_low=0.2, max_response=4096, **_EVAL,
            notes="Table 7 lists rollout temperature 1.0, the text says 0.1",
        )
    )  # fmt: skip
    for g in (3, 7):  # Table 8: Countdown, Qwen2.5-3B, G in {3, 7}, KL in {1e-3, 5e-3}; no clip range stated
        for kl, suffix in ((1e-3, ""), (5e-3, "_kl5e-3")):
            # Evaluated at temperature 1.0 as in Table 3 (the paper also plots T = 0.5); top-p not stated there.
            runs.append(
                PaperRun(
                    name=f"table8_countdown_g{g}{suffix}", source="SetPO Table 8", model="Qwen/Qwen2.5-3B",
                    dataset="countdown", base="grpo", lam=0.5, lr=1e-6, kl=kl, epochs=1, group_size=g,
                    prompts_per_step=128, temperature=1.0, max_prompt=512, max_response=2048, val_temperature=1.0,
                    val_top_p=1.0, train_max_samples=86_400,
                )
            )  # fmt: skip
    runs.append(
        PaperRun(
            name="gapo_qwen2.5_7b_lora", source="GAPO Sec. 4 (medium confidence)", model="Qwen/Qwen2.5-7B-Instruct",
            dataset="gapo_lists", base=None, method="gapo", lam=0.0, lr=1e-5, kl=0.0, group_size=32, prompts_per_step=8,
            lora={"r": 64, "lora_alpha": 32, "lora_dropout": 0.1},
            notes="Plain GRPO with GAPO's group-level frequency reward in place of the task reward",
        )
    )  # fmt: skip
    return runs


PAPER_RUNS: Mapping[str, PaperRun] = MappingProxyType({r.name: r for r in _runs()})

#: Which paper table sets each SetPO family's lambda.
_FAMILY_TABLE = {"grpo": 4, "gspo": 5, "dapo": 6, "grpo_32b": 7, "countdown": 8}


def _family_lambda(table: int) -> float:
    """The one lambda shared by every run of a paper table."""
    lams = {r.lam for r in PAPER_RUNS.values() if r.table == table}
    if len(lams) != 1:
        raise ValueError(f"SetPO Table {table} must have exactly one lambda in PAPER_RUNS, found {sorted(lams)}")
    return lams.pop()


#: lambda of each paper setting family (Tables 4-8), read from PAPER_RUNS.
PAPER_LAMBDA: dict[str, float] = {family: _family_lambda(t) for family, t in _FAMILY_TABLE.items()}


def get_run(name: str) -> PaperRun:
    """The run called ``name`` (ValueError listing the known names otherwise)."""
    return PAPER_RUNS[check_choice(name, "paper run", sorted(PAPER_RUNS))]
