"""The ``setpo`` section of a verl config (``+setpo.lambda=...``) as a dataclass, with the paper's values as presets."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from setpo.core.advantages import check_lambda
from setpo.core.credits import SmallGroupPolicy, check_small_group_policy
from setpo.core.shaping import get_shaping
from setpo.methods import Method, get_method
from setpo.paper_runs import PAPER_EMBEDDER, PAPER_LAMBDA  # re-exported: the paper's embedder and lambdas
from setpo.tasks.list_selection import extract_answer as first_line_answer
from setpo.tasks.math.extract import extract_boxed

EmbedDevice = Literal["cpu", "cuda"]
#: Answer extractors a method's ``answers`` input can come from (response text -> answer or None).
ANSWER_EXTRACTORS: dict[str, Callable[[str], str | None]] = {"boxed": extract_boxed, "first_line": first_line_answer}
#: Methods the verl hook refuses, and what to use instead.
REFUSED_METHODS = {
    "gapo": "GAPO's reward needs each prompt's valid answers, which verl's advantage step does not carry; score "
    "GAPO in the reward function instead (or use the TRL adapter's diversity_method='gapo')",
    "entropy_bonus": "verl has its own token entropy bonus: set actor_rollout_ref.actor.entropy_coeff=COEF "
    "(aggregated by actor_rollout_ref.actor.loss_agg_mode) and leave setpo.method unset",
}


@dataclass(frozen=True)
class SetPOVerlConfig:
    """Settings of the SetPO credit inside verl; read from the top-level ``setpo`` section of the hydra config.

    lam: lambda in A_hat = A_bar + lambda * s (paper eq. 6); 0 leaves verl's advantages untouched.
    embedder: a ``setpo.embedders.build_embedder`` spec ("hashed", "minilm", a sentence-transformers id/folder).
    embed_device: "cpu" runs the embedder on the trainer (driver) process's CPU; "cuda" on that process's GPU 0.
    embedder_kwargs: extra keyword arguments for the embedder factory (e.g. ``batch_size``, ``max_length``).
    shaping: the g of D(S) (``setpo.get_shaping`` name); the paper uses neglog1p, g(x) = -log(1+x).
    small_group: groups of fewer than 3 rollouts have no leave-one-out credit (D of a singleton is undefined):
        "zero" gives them s = 0 (their base advantage is kept), "raise" stops with a ValueError.
    skip_special_tokens: passed to ``tokenizer.batch_decode`` when turning response ids into text.
    target_ratio: when set (> 0), lambda is set every step so that mean|lambda s| / mean|A_bar| over the scored rows
        equals it (the last value is kept when a batch gives no ratio); ``lam`` then only switches SetPO on.
    placebo: every scored row gets the credit of a row from another uid group (same magnitudes, no diversity
        information), drawn from a generator seeded by ``seed`` and the training step.
    seed: seed of the placebo permutation.
    method: the diversity method (a ``setpo.methods`` name). "setpo" is the credit set by the fields above; "dra_grpo",
        "darling", "diver", "dqo" change the sequence scores before verl's GRPO normalisation; "passk" replaces the
        advantages after it. "gapo" and "entropy_bonus" are refused (see ``REFUSED_METHODS``).
    method_kwargs: the method's parameters (``+setpo.method_kwargs.k=4``).
    answer_extractor: how a method's answers are read from the decoded responses ("boxed", "first_line").
    correct_threshold: a rollout is correct (a method's ``correct`` input) when its score > this threshold.
    """

    lam: float = PAPER_LAMBDA["grpo"]
    embedder: str = PAPER_EMBEDDER
    embed_device: EmbedDevice = "cpu"
    embedder_kwargs: dict[str, Any] = field(default_factory=dict)
    shaping: str = "neglog1p"
    small_group: SmallGroupPolicy = "zero"
    skip_special_tokens: bool = True
    target_ratio: float | None = None
    placebo: bool = False
    seed: int = 0
    method: str = "setpo"
    method_kwargs: dict[str, Any] = field(default_factory=dict)
    answer_extractor: str = "boxed"
    correct_threshold: float = 0.0

    def __post_init__(self) -> None:
        self._check_method()
        check_lambda(self.lam, "setpo.lambda")
        if not isinstance(self.embedder, str) or not self.embedder.strip():
            raise ValueError(f"setpo.embedder must be a non-empty string, got {self.embedder!r}")
        if self.embed_device not in ("cpu", "cuda"):
            raise ValueError(f"setpo.embed_device must be 'cpu' or 'cuda', got {self.embed_device!r}")
        if not isinstance(self.embedder_kwargs, Mapping):
            raise ValueError(f"setpo.embedder_kwargs must be a mapping, got {type(self.embedder_kwargs).__name__}")
        get_shaping(self.shaping)  # raises ValueError on an unknown name
        check_small_group_policy(self.small_group, "setpo.small_group")
        if not isinstance(self.skip_special_tokens, bool):
            raise ValueError(f"setpo.skip_special_tokens must be a bool, got {self.skip_special_tokens!r}")
        r = self.target_ratio
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0):
            raise ValueError(f"setpo.target_ratio must be None or a finite number > 0, got {r!r}")
        if not isinstance(self.placebo, bool):
            raise ValueError(f"setpo.placebo must be a bool, got {self.placebo!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"setpo.seed must be an integer, got {self.seed!r}")

    def _check_method(self) -> None:
        try:
            method = get_method(self.method)
        except ValueError as err:
            raise ValueError(f"setpo.method: {err}") from None
        if not isinstance(self.method_kwargs, Mapping) or not all(isinstance(k, str) for k in self.method_kwargs):
            raise ValueError(f"setpo.method_kwargs must map parameter names to values, got {self.method_kwargs!r}")
        if self.method == "setpo":
            if self.method_kwargs:
                raise ValueError(
                    "setpo.method=setpo takes its settings from setpo.lambda, setpo.shaping and setpo.small_group, "
                    f"not setpo.method_kwargs={dict(self.method_kwargs)}"
                )
            return
        if self.method in REFUSED_METHODS:
            raise ValueError(f"setpo.method={self.method} is not run by the verl hook: {REFUSED_METHODS[self.method]}")
        try:
            method.required_inputs(**self.method_kwargs)
        except ValueError as err:
            raise ValueError(f"setpo.method_kwargs: {err}") from None
        used = [k for k in ("target_ratio", "placebo") if getattr(self, k) != _CONTROLS[k]]
        if used:
            raise ValueError(f"setpo.{used} control the SetPO credit, which setpo.method={self.method} does not add")
        if self.answer_extractor not in ANSWER_EXTRACTORS:
            raise ValueError(
                f"unknown setpo.answer_extractor {self.answer_extractor!r}; use one of {sorted(ANSWER_EXTRACTORS)}"
            )
        t = self.correct_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ValueError(f"setpo.correct_threshold must be a finite number, got {t!r}")

    @property
    def enabled(self) -> bool:
        """True when the SetPO credit is added (method "setpo" with lambda > 0 or a target ratio)."""
        return self.method == "setpo" and (self.lam > 0 or self.target_ratio is not None)

    @property
    def needs_embedder(self) -> bool:
        """True when the hook embeds responses: the SetPO credit is on, or the chosen method reads embeddings."""
        m = self.diversity_method
        return self.enabled or (m is not None and "embeddings" in m.required_inputs(**self.method_kwargs))

    @property
    def diversity_method(self) -> Method | None:
        """The registered method when ``method`` is not "setpo" (it then replaces the credit), else None."""
        return None if self.method == "setpo" else get_method(self.method)

    @property
    def method_params(self) -> dict[str, Any]:
        """``method_kwargs`` with the method's defaults filled in."""
        return get_method(self.method).check_params(**self.method_kwargs)

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any] | None) -> SetPOVerlConfig:
        """Build from the hydra ``setpo`` section; its key ``lambda`` maps to ``lam``. Unknown keys raise ValueError."""
        if section is None:
            return cls()
        if not isinstance(section, Mapping):
            raise ValueError(f"the setpo config section must be a mapping, got {type(section).__name__}")
        data = dict(section)
        if "lambda" in data:
            if "lam" in data:
                raise ValueError("give setpo.lambda or setpo.lam, not both")
            data["lam"] = data.pop("lambda")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            allowed = sorted((known - {"lam"}) | {"lambda"})
            raise ValueError(f"unknown key(s) in the setpo config section: {unknown}; allowed: {allowed}")
        for key in ("embedder_kwargs", "method_kwargs"):
            if key in data:
                data[key] = {} if data[key] is None else dict(data[key])
        if "lam" in data and isinstance(data["lam"], int) and not isinstance(data["lam"], bool):
            data["lam"] = float(data["lam"])
        return cls(**data)

    def as_overrides(self) -> list[str]:
        """The hydra command-line overrides that reproduce this config (``+setpo.lambda=...`` and friends)."""
        out = []
        for key, value in asdict(self).items():
            if key in _CONTROLS and value == _CONTROLS[key]:
                continue  # experiment controls appear only when used
            name = "lambda" if key == "lam" else key
            if key in ("embedder_kwargs", "method_kwargs"):
                for k, v in value.items():
                    out.append(f"+setpo.{key}.{k}={_hydra_value(v)}")
                continue
            out.append(f"+setpo.{name}={_hydra_value(value)}")
        return out


#: Experiment controls and their off values (not part of the paper's settings).
_CONTROLS: dict[str, Any] = {
    "target_ratio": None,
    "placebo": False,
    "seed": 0,
    "method": "setpo",
    "answer_extractor": "boxed",
    "correct_threshold": 0.0,
}


def _hydra_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and any(c in value for c in " ,=[]{}()'\""):
        return repr(value)
    return str(value)


def preset(name: str, **changes: Any) -> SetPOVerlConfig:
    """The paper's SetPO settings for one of ``PAPER_LAMBDA``'s keys, with optional field changes."""
    if name not in PAPER_LAMBDA:
        raise ValueError(f"unknown SetPO preset {name!r}; known: {sorted(PAPER_LAMBDA)}")
    return SetPOVerlConfig(lam=PAPER_LAMBDA[name], **changes)
