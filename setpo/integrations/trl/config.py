"""``SetPOConfig``: TRL's ``GRPOConfig`` plus the SetPO credit settings (paper Sec. 3, eq. 6)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl import GRPOConfig, TrlParser

from setpo._validate import check_bool, check_choice, check_int, check_known, check_lambda, check_mapping, check_real
from setpo.core import available_shapings
from setpo.embedders import POLICY_EMBEDDER, check_embedder_spec, is_policy_embedder
from setpo.files import read_yaml
from setpo.integrations.trl.presets import available_presets, get_preset
from setpo.methods import Method, available_methods, get_method
from setpo.tasks.list_selection import extract_answer as first_line_answer
from setpo.tasks.math.extract import extract_boxed

EMBED_FIELDS = ("completion", "prompt+completion")
#: Answer extractors a method's ``answers`` input can come from (completion text -> answer or None).
ANSWER_EXTRACTORS: dict[str, Callable[[str], str | None]] = {"boxed": extract_boxed, "first_line": first_line_answer}
#: Config fields that give one parameter of one method: field -> (method name, parameter). None: the method's default.
METHOD_FIELDS: dict[str, tuple[str, str]] = {
    "setpo_lambda": ("setpo", "lam"),
    "setpo_shaping": ("setpo", "shaping"),
    "setpo_kernel_clamp": ("setpo", "clamp"),
}
#: The experiment controls (they act on any method's term A - A_bar) and their off values.
CONTROLS = {"setpo_target_ratio": None, "setpo_lambda_warmup_steps": 0, "setpo_placebo": False}


def check_num_generations(G: Any, name: str, method: Method) -> None:
    """Raise unless G >= the method's ``min_group`` (SetPO: 3; training only, evaluation gives smaller groups A_bar)."""
    if G is not None and (isinstance(G, bool) or not isinstance(G, int) or G < method.min_group):
        raise ValueError(
            f"{name}={G!r}: diversity_method={method.name!r} acts on groups of at least {method.min_group} "
            "completions per prompt (SetPO's leave-one-out diversity D(Omega \\ {o_i}) needs the remaining set to "
            "hold 2 members). Use a larger num_generations, or setpo_lambda=0 (plain GRPO)."
        )


@dataclass
class SetPOConfig(GRPOConfig):
    """GRPOConfig + one diversity method: by default SetPO, A_bar + setpo_lambda * s (eq. 6), s the credit (eq. 5).

    Vocabulary: one method (``diversity_method``) with its parameters (``diversity_method_kwargs``; SetPO's also as
    ``setpo_lambda``, ``setpo_shaping``, ``setpo_kernel_clamp``, refused under another method), the embedder
    (``setpo_embed*``), and the controls, which act on any method's term u = A - A_bar: ``setpo_target_ratio``
    sets its weight every step so that mean|lambda u| / mean|A_bar| equals it; ``setpo_lambda_warmup_steps`` ramps
    the weight up linearly from 0; ``setpo_placebo`` gives every row the term of a row of another group (same
    magnitudes, no diversity information). ``setpo_lambda=0`` is plain GRPO (no embedding work).
    Every base method TRL offers keeps working:
    GSPO (``importance_sampling_level="sequence"``), DAPO (``loss_type="dapo"``, ``epsilon_high``), Dr.GRPO
    (``scale_rewards="none"``, ``loss_type="dr_grpo"``), KL (``beta``), LoRA (``peft_config``) and vLLM.
    Paper settings: ``SetPOConfig.from_preset(name, output_dir=..., **overrides)``, names from ``available_presets()``.
    """

    setpo_lambda: float | None = field(
        default=None,
        metadata={
            "help": "SetPO's lambda >= 0, the weight of the credit added to the base advantage (0 = plain GRPO; "
            "None: the method's default, 0.05). A parameter of diversity_method='setpo' only."
        },
    )
    setpo_embedder: str = field(
        default="minilm",
        metadata={
            "help": "Embedder spec for the semantic kernel: 'hashed', 'minilm', a sentence-transformers name or "
            "path, or 'policy' (the policy's mean-pooled last hidden states over the completion tokens)."
        },
    )
    setpo_kernel_clamp: bool | None = field(
        default=None,
        metadata={"help": "SetPO: clamp the cosine kernel to [0, 1] (None: the method's default, True, the paper's)."},
    )
    setpo_shaping: str | None = field(
        default=None,
        metadata={"help": "SetPO: registered shaping function g (None: the default, neglog1p, g(x) = -log(1+x))."},
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
            "help": "Control, any method: if set (> 0), the weight lambda of the method's term u = A - A_bar is "
            "chosen every training step so that mean|lambda u| / mean|A_bar| over the rows it acts on equals this "
            "value (the method's own weight, e.g. setpo_lambda, is then ignored); logged as setpo/lambda."
        },
    )
    setpo_lambda_warmup_steps: int = field(
        default=0,
        metadata={"help": "Control, any method: linear warm-up of the term's weight from 0 over this many steps."},
    )
    setpo_placebo: bool = field(
        default=False,
        metadata={
            "help": "Control arm, any method: every row gets the method's term A - A_bar of a row of another group "
            "(a random cross-group permutation, the same on every process). Same magnitudes, no diversity "
            "information."
        },
    )

    diversity_method: str = field(
        default="setpo",
        metadata={
            "help": "Diversity method (a setpo.methods name): 'setpo' (the credit; its parameters also as "
            "setpo_lambda, setpo_shaping, setpo_kernel_clamp), 'gapo', 'dra_grpo', 'darling', 'diver', 'dqo' "
            "(rewards before the group normalisation), 'passk' (advantages after it), 'entropy_bonus' (TRL's own "
            "entropy_coef). Embedding methods use setpo_embedder."
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
    def method(self) -> Method:
        """The registered diversity method named by ``diversity_method``."""
        return get_method(self.diversity_method)

    @property
    def method_params(self) -> dict[str, Any]:
        """The method's parameters: ``diversity_method_kwargs`` and its ``METHOD_FIELDS``, defaults filled in."""
        fields_given = {p: getattr(self, f) for f, (m, p) in METHOD_FIELDS.items() if m == self.diversity_method}
        given = {p: v for p, v in fields_given.items() if v is not None}
        return self.method.check_params(**{**(self.diversity_method_kwargs or {}), **given})

    @property
    def method_enabled(self) -> bool:
        """Whether the method changes anything: not a loss term, and its weight (``scale``) is > 0 or a target
        ratio sets it. False means plain GRPO, bit for bit."""
        method = self.method
        if method.entry == "loss":
            return False
        if method.scale is None or self.setpo_target_ratio is not None:
            return True
        return self.method_params[method.scale] > 0

    def _method_kwargs(self) -> dict[str, Any]:
        """``diversity_method_kwargs`` as a dict (a JSON string is parsed, None is empty)."""
        kwargs = self.diversity_method_kwargs
        if isinstance(kwargs, str):
            try:
                kwargs = json.loads(kwargs) if kwargs.strip() else {}
            except json.JSONDecodeError as err:
                raise ValueError(f"diversity_method_kwargs is not valid JSON: {err}") from None
        if kwargs is None:
            kwargs = {}
        return dict(check_mapping(kwargs, "diversity_method_kwargs", keys=str))

    def _check_method_fields(self, name: str, kwargs: Mapping[str, Any]) -> None:
        """Each set ``METHOD_FIELDS`` field belongs to the method run and is not also in its kwargs."""
        for f, (owner, param) in METHOD_FIELDS.items():
            if getattr(self, f) is None:
                continue
            if owner != name:
                raise ValueError(
                    f"{f}={getattr(self, f)!r} is a parameter of diversity_method={owner!r}, which "
                    f"diversity_method={name!r} does not run: unset {f} (one method per run)"
                )
            if param in kwargs:
                raise ValueError(
                    f"{f} and diversity_method_kwargs[{param!r}] give the same parameter of {name!r}: give it once"
                )

    def _validate_method(self) -> None:
        """Check ``diversity_method``, its kwargs and fields against the registry and this config (clear errors)."""
        name = self.diversity_method
        method = get_method(check_choice(name, "diversity_method", available_methods()))
        self.diversity_method_kwargs = self._method_kwargs()
        self._check_method_fields(name, self.diversity_method_kwargs)
        try:
            params = self.method_params
            method.required_inputs(**params)
        except ValueError as err:
            raise ValueError(f"diversity_method_kwargs: {err}") from None
        if method.scale is not None:
            params[method.scale] = check_lambda(params[method.scale], f"{name}'s {method.scale}")
        if method.entry == "loss":
            used = [f for f, off in CONTROLS.items() if getattr(self, f) != off]
            if used:
                raise ValueError(
                    f"{used} act on the advantage term A - A_bar, which diversity_method={name!r} (a loss term) "
                    "does not change; unset them"
                )
        check_choice(
            self.diversity_answer_extractor,
            "diversity_answer_extractor",
            sorted(ANSWER_EXTRACTORS),
            " or SetPOTrainer(answer_extractor=fn)",
        )
        check_real(self.diversity_correct_threshold, "diversity_correct_threshold")
        G = self.num_generations
        if "k" in params and G is not None:
            check_int(params["k"], "diversity_method_kwargs k (at most num_generations)", minimum=1, maximum=G)
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
        if self.setpo_lambda is not None:
            self.setpo_lambda = check_lambda(self.setpo_lambda, "setpo_lambda")
        ratio = check_real(self.setpo_target_ratio, "setpo_target_ratio", minimum=0, strict=True, none=True)
        self.setpo_target_ratio = ratio
        check_int(self.setpo_lambda_warmup_steps, "setpo_lambda_warmup_steps", minimum=0)
        check_bool(self.setpo_placebo, "setpo_placebo")
        if self.setpo_shaping is not None:
            check_choice(self.setpo_shaping, "setpo_shaping", available_shapings())
        check_bool(self.setpo_kernel_clamp, "setpo_kernel_clamp", none=True)
        self._validate_embedding()
        self._validate_method()
        if self.method_enabled:
            check_num_generations(self.num_generations, "num_generations", self.method)

    def _validate_embedding(self) -> None:
        try:
            check_embedder_spec(self.setpo_embedder, extra_names=(POLICY_EMBEDDER,))
        except ValueError as err:
            raise ValueError(f"setpo_embedder: {err}") from None
        check_choice(self.setpo_embed_field, "setpo_embed_field", EMBED_FIELDS)
        if is_policy_embedder(self.setpo_embedder) and self.setpo_embed_field != "completion":
            raise ValueError(
                "setpo_embedder='policy' pools the policy's hidden states over the completion tokens only; "
                "setpo_embed_field='prompt+completion' needs a text embedder"
            )
        check_int(self.setpo_embed_batch_size, "setpo_embed_batch_size", minimum=1)
        check_int(self.setpo_policy_chunk_tokens, "setpo_policy_chunk_tokens", minimum=1)
        check_int(self.setpo_embed_max_length, "setpo_embed_max_length", minimum=1, none=True)

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
        environment variables, only once the config is valid. A key given twice is refused.
        """
        values = read_yaml(path) or {}
        values = dict(check_mapping(values, f"{path} (SetPOConfig fields)"))
        env = check_mapping(values.pop("env", {}), f"{path}: `env` (environment variables)")
        check_known(
            values, {f.name for f in dataclasses.fields(cls) if f.init}, f"SetPOConfig field(s) in {path}", False
        )
        typed = _typed_like_trl(cls, values, path)
        cls._from_values(dict(typed), output_dir, dict(overrides))  # validated before the environment is touched
        for key, value in env.items():
            os.environ[key] = str(value)
        return cls._from_values(typed, output_dir, overrides)  # built again: fields may read the environment

    @classmethod
    def _from_values(cls, values: dict[str, Any], output_dir: str | None, overrides: dict[str, Any]) -> SetPOConfig:
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        check_known([*values, *overrides], known, "SetPOConfig field(s)", listed=False)
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
