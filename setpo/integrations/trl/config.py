"""``SetPOConfig``: TRL's ``GRPOConfig`` plus the SetPO credit settings (paper Sec. 3, eq. 6)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trl import GRPOConfig

from setpo.core import available_shapings
from setpo.integrations.trl.presets import available_presets, get_preset

EMBED_FIELDS = ("completion", "prompt+completion")


@dataclass
class SetPOConfig(GRPOConfig):
    """GRPOConfig + SetPO: advantages become A_bar + setpo_lambda * s (eq. 6), s the leave-one-out credit (eq. 5).

    ``setpo_lambda=0`` is plain GRPO (no embedding work). Every base method TRL offers keeps working:
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

    def __post_init__(self):
        self._validate_setpo()
        super().__post_init__()

    def _validate_setpo(self) -> None:
        lam = self.setpo_lambda
        if isinstance(lam, bool) or not isinstance(lam, (int, float)):
            raise ValueError(f"setpo_lambda must be a number >= 0, got {lam!r}")
        if not (math.isfinite(lam) and lam >= 0):
            raise ValueError(f"setpo_lambda must be finite and >= 0, got {lam}")
        self.setpo_lambda = float(lam)
        if self.setpo_shaping not in available_shapings():
            raise ValueError(f"unknown setpo_shaping {self.setpo_shaping!r}; available: {available_shapings()}")
        if not isinstance(self.setpo_embedder, str) or not self.setpo_embedder.strip():
            raise ValueError(
                "setpo_embedder must be a non-empty spec string ('hashed', 'minilm', 'policy', a model name or "
                f"path), got {self.setpo_embedder!r}; pass an Embedder object to SetPOTrainer(embedder=...) instead"
            )
        if self.setpo_embed_field not in EMBED_FIELDS:
            raise ValueError(f"unknown setpo_embed_field {self.setpo_embed_field!r}; use one of {EMBED_FIELDS}")
        if self.setpo_embedder.strip().lower() == "policy" and self.setpo_embed_field != "completion":
            raise ValueError(
                "setpo_embedder='policy' pools the policy's hidden states over the completion tokens only; "
                "setpo_embed_field='prompt+completion' needs a text embedder"
            )
        if isinstance(self.setpo_embed_batch_size, bool) or not (
            isinstance(self.setpo_embed_batch_size, int) and self.setpo_embed_batch_size >= 1
        ):
            raise ValueError(f"setpo_embed_batch_size must be an integer >= 1, got {self.setpo_embed_batch_size!r}")
        L = self.setpo_embed_max_length
        if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
            raise ValueError(f"setpo_embed_max_length must be None or an integer >= 1, got {L!r}")
        for name in ("num_generations", "num_generations_eval"):
            G = getattr(self, name)
            if G is not None and (not isinstance(G, int) or G < 3):
                raise ValueError(
                    f"{name}={G!r}: SetPO needs at least 3 completions per prompt, because the leave-one-out "
                    "diversity D(Omega \\ {o_i}) is defined only for groups of G >= 3 (the remaining set needs 2 "
                    "members for its local mass). Use num_generations >= 3, or GRPOConfig/GRPOTrainer for G = 2."
                )

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
        """Config from a YAML file of field values (e.g. configs/trl/table4_grpo_1.5b.yaml), then ``overrides``."""
        values = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a mapping of config fields, got {type(values).__name__}")
        return cls._from_values(values, output_dir, overrides)

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
