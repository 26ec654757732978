"""``SetPOConfig``: TRL's ``GRPOConfig`` plus the SetPO credit settings (paper Sec. 3, eq. 6)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trl import GRPOConfig, TrlParser

from setpo.core import available_shapings
from setpo.core.advantages import check_lambda
from setpo.embedders import POLICY_EMBEDDER, check_embedder_spec, is_policy_embedder
from setpo.integrations.trl.presets import available_presets, get_preset

EMBED_FIELDS = ("completion", "prompt+completion")


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

    def __post_init__(self):
        self._validate_setpo()
        super().__post_init__()

    @property
    def setpo_enabled(self) -> bool:
        """Whether the credit is added: lambda > 0 or a target ratio is set."""
        return self.setpo_lambda > 0 or self.setpo_target_ratio is not None

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
