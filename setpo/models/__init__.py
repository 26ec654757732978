"""Pretrained language models by name (offline copies from packages, or the Hub)."""

from setpo.models.pretrained import (
    SMOLLM2_135M_INSTRUCT,
    PretrainedModel,
    available_pretrained,
    load_pretrained,
    offline_file,
    register_pretrained,
)

__all__ = [
    "SMOLLM2_135M_INSTRUCT",
    "PretrainedModel",
    "available_pretrained",
    "load_pretrained",
    "offline_file",
    "register_pretrained",
]
