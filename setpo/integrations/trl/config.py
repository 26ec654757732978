"""``SetPOConfig``: TRL's ``GRPOConfig`` plus the SetPO credit settings (paper Sec. 3, eq. 6)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trl import GRPOConfig, TrlParser

from setpo.core import available_shapings
from setpo.core.advantages import check_lambda
from setpo.embedders import POLICY_EMBEDDER, check_embedder_spec, is_policy_embedder
from setpo.integrations.trl.presets import available_presets, get_preset
from setpo.methods import Method, get_method
from setpo.tasks.list_selection import extract_answer as first_line_answer
from setpo.tasks.math.extract import extract_boxed

EMBED_FIELDS = ("completion", "prompt+completion")
#: Answer extractors a method's ``answers`` input can come from (completion text -> answer or None).
ANSWER_EXTRACTORS: dict[str, Callable[[str], str | None]] = {"boxed": extract_boxed, "first_line": first_line_answer}
#: The SetPO credit's own controls: they act on the SetPO credit only.
_SETPO_ONLY = {"setpo_target_ratio": None, "setpo_lambda_warmup_steps": 0, "setpo_placebo": False}


def check_group_size(G: Any, name: str) -> None:
    """Raise unless G >= 3: the leave-one-out credit needs it (training only; evaluation skips smaller groups)."""
    if G is not None and (isinstance(G, bool) or not isinstance(G, int) or G < 3):
        raise ValueError(
            f"{name}={G!r}: SetPO needs at least 3 completions per prompt, because the leave-one-out "
            "diversity D(Omega \\ {o_i}) is defined only for groups of G >= 3 (the remaining set needs 2 "
            "members for its local mass). Use num_generations >= 3, or setpo_lambda=0 (plain GRPO) for G = 2."
        )


@dataclass
class SetPOConfig(GRPOConfig):
    """GRPOConfig + SetPO: advantages become A_bar + setpo_lambda * s (eq. 6), s the leave-one-out credit (eq. 5).

    ``setpo_lambda=0`` is plain GRPO (no embedding work). Controls: ``setpo_target_ratio`` sets lambda every step so
    that mean|lambda s| / mean|A_bar| equals it; ``setpo_lambda_warmup_steps`` ramps lambda (or the ratio) up
    linearly from 0; ``setpo_placebo`` gives every row the credit of a row of another group (same magnitudes, no
    diversity information). Every base method TRL offers keeps working:
    GSPO (``importance_sampling_level="sequence"``), DAPO (``loss_type="dapo"``, ``epsilon_high``), Dr.GRPO
    (``scale_rewards="none"``, ``loss_type="dr_grpo"``), KL (``beta``), LoRA (``peft_config``) and vLLM.
    Paper settings: ``SetPOConfig.from_preset(name, output_dir=..., **overrides)``, names from ``available_presets()``.
    """

    setpo_lambda: float = field(
        default=0.05,
        metadata={"help": "Weight lambda >= 0 of the SetPO credit added to the base advantage (0 = plain GRPO)."},
    )
    setpo_embedder: str = field(
        default="minilm",
        metadata={
            "help": "Embedder spec for the semantic kernel: 'hashed', 'minilm', a sentence-transformers name or "
            "path, or 'policy' (the policy's mean-pooled last hidden states over the completion tokens)."
        },
    )
    setpo_kernel_clamp: bool = field(
        default=True, metadata={"help": "Clamp the cosine kernel to [0, 1] (the paper's kernel)."}
    )
    setpo_shaping: str = field(
        default="neglog1p", metadata={"help": "Registered shaping function g (paper: neglog1p, g(x) = -log(1+x))."}
    )
    setpo_embed_field: str = field(
        default="completion",
        metadata={"help": "Text that is embedded: 'completion' (the paper) or 'prompt+completion'."},
    )
    setpo_embed_batch_size: int = field(default=64, metadata={"help": "Texts per embedder call."})
    setpo_embed_max_length: int | None = field(
        default=None,
        metadata={
            "help": "Token limit for text embedders (None: the embedder's own); for 'policy', the number of "
            "leading completion tokens pooled (None: all)."
        },
    )
    setpo_policy_chunk_tokens: int = field(
        default=16384,
        metadata={
            "help": "For setpo_embedder='policy': the most tokens (rows x padded length) in one forward pass of the "
            "policy when embedding (at least one row per pass)."
        },
    )
    setpo_target_ratio: float | None = field(
        default=None,
        metadata={
            "help": "If set (> 0): lambda is chosen every training step so that mean|lambda s| / mean|A_bar| over "
            "the rows in the kernel equals this value (setpo_lambda's value is then ignored); logged as "
            "setpo/lambda."
        },
    )
    setpo_lambda_warmup_steps: int = field(
        default=0,
        metadata={"help": "Linear warm-up of lambda (or of the target ratio) from 0 over this many optimizer steps."},
    )
    setpo_placebo: bool = field(
        default=False,
        metadata={
            "help": "Control arm: after the batch's credits are computed, every row gets the credit of a row of "
            "another group (a random cross-group permutation, the same on every process). Same magnitudes, no "
            "diversity information."
        },
    )

    diversity_method: str = field(
        default="setpo",
        metadata={
            "help": "Diversity method (a setpo.methods name): 'setpo' (the credit set by the setpo_* fields), "
            "'gapo', 'dra_grpo', 'darling', 'diver', 'dqo' (rewards before the group normalisation), 'passk' "
            "(advantages after it), 'entropy_bonus' (TRL's own entropy_coef). The setpo_* credit fields act on "
            "'setpo' only; embedding methods use setpo_embedder."
        },
    )
    diversity_method_kwargs: dict | str | None = field(
        default=None,
        metadata={"help": "Parameters of the diversity method (a mapping or a JSON string), e.g. {'k': 4}."},
    )
    diversity_answer_extractor: str = field(
        default="boxed",
        metadata={
            "help": "How a method's answers are read from completions: 'boxed' (last \\boxed{}), 'first_line' "
            "(first non-empty line, normalised); SetPOTrainer(answer_extractor=fn) overrides it."
        },
    )
    diversity_valid_set_column: str = field(
        default="valid_answers", metadata={"help": "Dataset column with each prompt's valid answers (GAPO's V)."}
    )
    diversity_correct_threshold: float = field(
        default=0.0,
        metadata={"help": "A rollout is correct (a method's `correct` input) when its reward > this threshold."},
    )

    def __post_init__(self):
        self._validate_setpo()
        super().__post_init__()

    @property
    def setpo_enabled(self) -> bool:
        """Whether the SetPO credit is added: diversity_method 'setpo' with lambda > 0 or a target ratio."""
        return self.diversity_method == "setpo" and (self.setpo_lambda > 0 or self.setpo_target_ratio is not None)

    @property
    def method(self) -> Method:
        """The registered diversity method named by ``diversity_method``."""
        return get_method(self.diversity_method)

    @property
    def method_params(self) -> dict[str, Any]:
        """The method's parameters: ``diversity_method_kwargs`` with the method's defaults filled in."""
        return self.method.check_params(**(self.diversity_method_kwargs or {}))

    def _validate_method(self) -> None:
        """Check ``diversity_method`` and its kwargs against the registry and this config (clear errors)."""
        name = self.diversity_method
        try:
            method = get_method(name)
        except ValueError as err:
            raise ValueError(f"diversity_method: {err}") from None
        kwargs = self.diversity_method_kwargs
        if isinstance(kwargs, str):
            try:
                kwargs = json.loads(kwargs) if kwargs.strip() else {}
            except json.JSONDecodeError as err:
                raise ValueError(f"diversity_method_kwargs is not valid JSON: {err}") from None
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise ValueError(f"diversity_method_kwargs must map parameter names to values, got {kwargs!r}")
        self.diversity_method_kwargs = dict(kwargs)
        if name == "setpo":
            if kwargs:
                raise ValueError(
                    f"diversity_method='setpo' takes its settings from the setpo_* fields (setpo_lambda, "
                    f"setpo_shaping, setpo_kernel_clamp), not diversity_method_kwargs={dict(kwargs)}"
                )
            return
        try:
            params = method.check_params(**kwargs)
            method.required_inputs(**params)
        except ValueError as err:
            raise ValueError(f"diversity_method_kwargs: {err}") from None
        used = [f for f, off in _SETPO_ONLY.items() if getattr(self, f) != off]
        if used:
            raise ValueError(
                f"{used} control the SetPO credit, which diversity_method={name!r} does not add; unset them"
            )
        if self.diversity_answer_extractor not in ANSWER_EXTRACTORS:
            raise ValueError(
                f"unknown diversity_answer_extractor {self.diversity_answer_extractor!r}; use one of "
                f"{sorted(ANSWER_EXTRACTORS)} or SetPOTrainer(answer_extractor=fn)"
            )
        t = self.diversity_correct_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ValueError(f"diversity_correct_threshold must be a finite number, got {t!r}")
        G = self.num_generations
        if "k" in params and G is not None and not (isinstance(params["k"], int) and 1 <= params["k"] <= G):
            raise ValueError(
                f"diversity_method_kwargs: k={params['k']!r} must be an integer in [1, {G}] (num_generations)"
            )
        if method.entry == "reward" and self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"diversity_method={name!r} changes the summed reward before the group normalisation: it needs "
                f"multi_objective_aggregation='sum_then_normalize', got {self.multi_objective_aggregation!r}"
            )
        if method.entry == "loss":
            self._map_entropy_bonus(params)

    def _map_entropy_bonus(self, params: dict[str, Any]) -> None:
        """entropy_bonus is TRL's own entropy_coef (the same token-mean term): set it, refuse conflicting settings."""
        if self.diversity_method != "entropy_bonus":
            raise ValueError(f"diversity_method={self.diversity_method!r}: TRL has no seam for this loss term")
        if params["aggregation"] != "token-mean":
            raise ValueError(
                f"diversity_method='entropy_bonus' in TRL is TRL's entropy_coef, a token mean over each micro-batch; "
                f"aggregation={params['aggregation']!r} is not available here (use verl's loss_agg_mode)"
            )
        if self.use_adaptive_entropy:
            raise ValueError(
                "diversity_method='entropy_bonus' sets a fixed entropy_coef: turn use_adaptive_entropy off"
            )
        coef = float(params["coef"])
        if self.entropy_coef not in (0.0, coef):
            raise ValueError(
                f"entropy_coef={self.entropy_coef} and diversity_method_kwargs coef={coef} disagree: give the "
                "coefficient once (diversity_method_kwargs={'coef': ...} or TRL's entropy_coef alone)"
            )
        self.entropy_coef = coef

    def _validate_setpo(self) -> None:
        self.setpo_lambda = check_lambda(self.setpo_lambda, "setpo_lambda")
        ratio = self.setpo_target_ratio
        if ratio is not None:
            if (
                isinstance(ratio, bool)
                or not isinstance(ratio, (int, float))
                or not (math.isfinite(ratio) and ratio > 0)
            ):
                raise ValueError(f"setpo_target_ratio must be None or a finite number > 0, got {ratio!r}")
            self.setpo_target_ratio = float(ratio)
        W = self.setpo_lambda_warmup_steps
        if isinstance(W, bool) or not isinstance(W, int) or W < 0:
            raise ValueError(f"setpo_lambda_warmup_steps must be an integer >= 0, got {W!r}")
        if not isinstance(self.setpo_placebo, bool):
            raise ValueError(f"setpo_placebo must be True or False, got {self.setpo_placebo!r}")
        if self.setpo_shaping not in available_shapings():
            raise ValueError(f"unknown setpo_shaping {self.setpo_shaping!r}; available: {available_shapings()}")
        if not isinstance(self.setpo_embedder, str) or not self.setpo_embedder.strip():
            raise ValueError(
                "setpo_embedder must be a non-empty spec string ('hashed', 'minilm', 'policy', a model name or "
                f"path), got {self.setpo_embedder!r}; pass an Embedder object to SetPOTrainer(embedder=...) instead"
            )
        try:
            check_embedder_spec(self.setpo_embedder, extra_names=(POLICY_EMBEDDER,))
        except ValueError as err:
            raise ValueError(f"setpo_embedder: {err}") from None
        if self.setpo_embed_field not in EMBED_FIELDS:
            raise ValueError(f"unknown setpo_embed_field {self.setpo_embed_field!r}; use one of {EMBED_FIELDS}")
        if is_policy_embedder(self.setpo_embedder) and self.setpo_embed_field != "completion":
            raise ValueError(
                "setpo_embedder='policy' pools the policy's hidden states over the completion tokens only; "
                "setpo_embed_field='prompt+completion' needs a text embedder"
            )
        for name in ("setpo_embed_batch_size", "setpo_policy_chunk_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        L = self.setpo_embed_max_length
        if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
            raise ValueError(f"setpo_embed_max_length must be None or an integer >= 1, got {L!r}")
        self._validate_method()
        if self.setpo_enabled:
            check_group_size(self.num_generations, "num_generations")

    @staticmethod
    def available_presets() -> list[str]:
        """Names accepted by ``from_preset``."""
        return available_presets()

    @classmethod
    def from_preset(cls, name: str, output_dir: str | None = None, **overrides: Any) -> SetPOConfig:
        """Config with a paper setting (SetPO Tables 4-8, GAPO) then ``overrides`` applied on top."""
        return cls._from_values(dict(get_preset(name).values), output_dir, overrides)

    @classmethod
    def from_yaml(cls, path: str | Path, output_dir: str | None = None, **overrides: Any) -> SetPOConfig:
        """Config from a YAML file of field values (``python -m reproduce.scale NAME --trl-yaml``), then ``overrides``.

        The file is read as TRL's ``TrlParser --config`` reads it: each value passes through its field's
        command-line type (YAML's ``5e-2`` string becomes the float 0.05), and an ``env`` mapping sets
        environment variables.
        """
        values = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a mapping of config fields, got {type(values).__name__}")
        env = values.pop("env", {})
        if not isinstance(env, dict):
            raise ValueError(f"{path}: `env` must be a mapping of environment variables, got {type(env).__name__}")
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls) if f.init})
        if unknown:
            raise ValueError(f"unknown SetPOConfig field(s) in {path}: {unknown}")
        for key, value in env.items():
            os.environ[key] = str(value)
        return cls._from_values(_typed_like_trl(cls, values, path), output_dir, overrides)

    @classmethod
    def _from_values(cls, values: dict[str, Any], output_dir: str | None, overrides: dict[str, Any]) -> SetPOConfig:
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(values) - known) + sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown SetPOConfig field(s): {unknown}")
        # Batch sizing given through steps_per_generation replaces the preset's generation_batch_size
        # (TRL refuses both at once).
        if overrides.get("steps_per_generation") is not None and "generation_batch_size" not in overrides:
            values.pop("generation_batch_size", None)
        values.update(overrides)
        if output_dir is not None:
            values["output_dir"] = output_dir
        return cls(**values)


def _typed_like_trl(cls: type, values: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """``values`` converted as ``TrlParser`` converts a --config file: set as parser defaults, string defaults pass
    through each field's argparse type (argparse converts string defaults), other values are kept as they are."""
    parser = TrlParser(cls, exit_on_error=False)
    parser.set_defaults_with_config(**values)
    try:
        namespace, _ = parser.parse_known_args([])
    except argparse.ArgumentError as err:
        raise ValueError(f"{source}: {err}") from None
    return {key: getattr(namespace, key) for key in values}
