"""The ``setpo`` section of a verl config (``+setpo.lambda=...``) as a dataclass, with the paper's values as presets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from setpo._validate import (
    check_bool,
    check_choice,
    check_int,
    check_known,
    check_lambda,
    check_mapping,
    check_real,
    check_str,
)
from setpo.core.credits import SmallGroupPolicy, check_small_group_policy
from setpo.core.shaping import get_shaping
from setpo.methods import Method, available_methods, get_method
from setpo.paper_runs import PAPER_EMBEDDER
from setpo.tasks.list_selection import extract_answer as first_line_answer
from setpo.tasks.math.extract import extract_boxed

EmbedDevice = Literal["cpu", "cuda"]
EmbedDtype = Literal["float32", "bfloat16", "float16"]
#: Section keys that give one parameter of one method: key -> (method name, parameter). None: the method's default.
METHOD_KEYS: dict[str, tuple[str, str]] = {"lam": ("setpo", "lam"), "shaping": ("setpo", "shaping")}
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
    """Settings of the diversity method inside verl; read from the top-level ``setpo`` section of the hydra config.

    method: the diversity method (a ``setpo.methods`` name), by default "setpo" (A_hat = A_bar + lambda s, eq. 6);
        "dra_grpo", "darling", "diver", "dqo" change the sequence scores before verl's GRPO normalisation; "passk"
        replaces the advantages after it. "gapo" and "entropy_bonus" are refused (see ``REFUSED_METHODS``).
    method_kwargs: the method's parameters (``+setpo.method_kwargs.k=4``).
    lam: SetPO's lambda (hydra key ``lambda``; None: the method's default, 0.05); 0 leaves verl's advantages untouched.
    shaping: SetPO's g of D(S) (``setpo.get_shaping`` name; None: neglog1p, g(x) = -log(1+x)). ``lam`` and
        ``shaping`` are refused under another method.
    embedder: a ``setpo.embedders.build_embedder`` spec ("hashed", "minilm", a sentence-transformers id/folder).
    embed_device: "cpu" runs the embedder on the trainer (driver) process's CPU; "cuda" on that process's GPU 0.
    embed_dtype: the embedder's weights and activations on "cuda", pinned: "float32" (default; unpinned, transformers
        >= 5 would load the model's config dtype, bfloat16 for Qwen3-Embedding, whose 3 significant digits are of the
        order of the credits' differences) or "bfloat16" / "float16" (half the memory on GPU 0 beside the training
        workers); the CPU embedder always runs float32.
    embedder_kwargs: extra keyword arguments for the embedder factory (e.g. ``batch_size``, ``max_length``).
    small_group: a uid group with fewer rows than the method's ``min_group`` (SetPO: 3) is left out of the method:
        "zero" keeps its A_bar, "raise" stops with a ValueError.
    skip_special_tokens: passed to ``tokenizer.batch_decode`` when turning response ids into text.
    target_ratio (control, any method): when set (> 0), the weight of the method's term u = A - A_bar is set every
        step so that mean|lambda u| / mean|A_bar| over the rows it acts on equals it (the last value is kept when a
        batch gives no ratio).
    placebo (control, any method): every acting row gets the term of a row from another uid group (same
        magnitudes, no diversity information), drawn from a generator seeded by ``seed`` and the training step.
    seed: seed of the placebo permutation.
    answer_extractor: how a method's answers are read from the decoded responses ("boxed", "first_line").
    correct_threshold: a rollout is correct (a method's ``correct`` input) when its score > this threshold.
    """

    method: str = "setpo"
    method_kwargs: dict[str, Any] = field(default_factory=dict)
    lam: float | None = None
    shaping: str | None = None
    embedder: str = PAPER_EMBEDDER
    embed_device: EmbedDevice = "cpu"
    embed_dtype: EmbedDtype = "float32"
    embedder_kwargs: dict[str, Any] = field(default_factory=dict)
    small_group: SmallGroupPolicy = "zero"
    skip_special_tokens: bool = True
    target_ratio: float | None = None
    placebo: bool = False
    seed: int = 0
    answer_extractor: str = "boxed"
    correct_threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.lam is not None:
            check_lambda(self.lam, "setpo.lambda")
        if self.shaping is not None:
            get_shaping(self.shaping)  # raises ValueError on an unknown name
        self._check_method()
        check_str(self.embedder, "setpo.embedder")
        check_choice(self.embed_device, "setpo.embed_device", ("cpu", "cuda"))
        check_choice(self.embed_dtype, "setpo.embed_dtype", ("float32", "bfloat16", "float16"))
        check_mapping(self.embedder_kwargs, "setpo.embedder_kwargs")
        check_small_group_policy(self.small_group, "setpo.small_group")
        check_bool(self.skip_special_tokens, "setpo.skip_special_tokens")
        check_real(self.target_ratio, "setpo.target_ratio", minimum=0, strict=True, none=True)
        check_bool(self.placebo, "setpo.placebo")
        check_int(self.seed, "setpo.seed")

    def _check_method_keys(self) -> None:
        """Each set ``METHOD_KEYS`` key belongs to the method run and is not also in its kwargs."""
        for key, (owner, param) in METHOD_KEYS.items():
            if getattr(self, key) is None:
                continue
            name = "lambda" if key == "lam" else key
            if owner != self.method:
                raise ValueError(
                    f"setpo.{name}={getattr(self, key)!r} is a parameter of setpo.method={owner}, which "
                    f"setpo.method={self.method} does not run: unset setpo.{name} (one method per run)"
                )
            if param in self.method_kwargs:
                raise ValueError(f"setpo.{name} and setpo.method_kwargs.{param} give the same parameter: give it once")

    def _check_method(self) -> None:
        method = get_method(check_choice(self.method, "setpo.method", available_methods()))
        check_mapping(self.method_kwargs, "setpo.method_kwargs", keys=str)
        if self.method in REFUSED_METHODS:
            raise ValueError(f"setpo.method={self.method} is not run by the verl hook: {REFUSED_METHODS[self.method]}")
        self._check_method_keys()
        try:
            method.required_inputs(**self.method_params)
        except ValueError as err:
            raise ValueError(f"setpo.method_kwargs: {err}") from None
        if method.scale is not None:
            check_lambda(self.method_params[method.scale], f"setpo.method_kwargs.{method.scale}")
        used = [k for k in ("target_ratio", "placebo") if getattr(self, k) != _CONTROLS[k]]
        if used and method.entry == "reward":
            raise ValueError(
                f"setpo.{used} act on the method's term A - A_bar after verl's advantage step; setpo.method="
                f"{self.method} changes the scores before it, where the hook has no A_bar to compare with"
            )
        check_choice(self.answer_extractor, "setpo.answer_extractor", sorted(ANSWER_EXTRACTORS))
        check_real(self.correct_threshold, "setpo.correct_threshold")

    @property
    def diversity_method(self) -> Method:
        """The registered method named by ``method``."""
        return get_method(self.method)

    @property
    def method_params(self) -> dict[str, Any]:
        """``method_kwargs`` and the method's section keys (``lambda``, ``shaping``), defaults filled in."""
        given = {p: getattr(self, k) for k, (m, p) in METHOD_KEYS.items() if m == self.method}
        given = {p: v for p, v in given.items() if v is not None}
        return self.diversity_method.check_params(**{**self.method_kwargs, **given})

    @property
    def enabled(self) -> bool:
        """True when the method changes anything: its weight (``scale``) > 0 or a target ratio, or it has none."""
        method = self.diversity_method
        if method.scale is None or self.target_ratio is not None:
            return True
        return self.method_params[method.scale] > 0

    @property
    def needs_embedder(self) -> bool:
        """True when the hook embeds responses: the method is on and reads embeddings."""
        return self.enabled and "embeddings" in self.diversity_method.required_inputs(**self.method_params)

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any] | None) -> SetPOVerlConfig:
        """Build from the hydra ``setpo`` section; its key ``lambda`` maps to ``lam``. Unknown keys raise ValueError."""
        if section is None:
            return cls()
        data = dict(check_mapping(section, "the setpo config section"))
        if "lambda" in data:
            if "lam" in data:
                raise ValueError("give setpo.lambda or setpo.lam, not both")
            data["lam"] = data.pop("lambda")
        check_known(data, {f.name for f in fields(cls)} | {"lambda"}, "key(s) in the setpo config section")
        for key in ("embedder_kwargs", "method_kwargs"):
            if key in data:
                data[key] = {} if data[key] is None else dict(data[key])
        if isinstance(data.get("lam"), int) and not isinstance(data["lam"], bool):
            data["lam"] = float(data["lam"])
        return cls(**data)

    def as_overrides(self) -> list[str]:
        """The hydra command-line overrides that reproduce this config (``+setpo.lambda=...`` and friends)."""
        out = []
        for key, value in asdict(self).items():
            if (key in _CONTROLS and value == _CONTROLS[key]) or (key in METHOD_KEYS and value is None):
                continue  # experiment controls and unset method parameters appear only when used
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
    "embed_dtype": "float32",
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
