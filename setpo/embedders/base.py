"""The embedder protocol: a list of texts in, an (N, d) float tensor out."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import torch


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps N texts to an (N, d) floating tensor of embeddings (rows may be unnormalised)."""

    def __call__(self, texts: Sequence[str]) -> torch.Tensor: ...
