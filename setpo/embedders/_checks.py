"""Input and output checks shared by the embedders: clear errors instead of silent wrong vectors."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_texts(texts: Sequence[str]) -> list[str]:
    """Return `texts` as a list, raising ValueError unless it is a sequence (not a single string) of str."""
    if isinstance(texts, (str, bytes)):
        raise ValueError("texts must be a sequence of strings, not a single string; wrap it in a list")
    if not isinstance(texts, Sequence):
        raise ValueError(f"texts must be a sequence of strings, got {type(texts).__name__}")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] is {type(text).__name__}, not str")
    return out


def check_embeddings(emb: torch.Tensor, n: int, name: str = "embedder") -> torch.Tensor:
    """Check an embedder's output is an (n, d) finite floating tensor and return it."""
    if not isinstance(emb, torch.Tensor):
        raise ValueError(f"{name} returned {type(emb).__name__}, expected a torch.Tensor")
    if emb.dim() != 2 or emb.shape[0] != n:
        raise ValueError(f"{name} returned shape {tuple(emb.shape)} for {n} texts, expected ({n}, d)")
    if not torch.is_floating_point(emb):
        raise ValueError(f"{name} returned dtype {emb.dtype}, expected a floating tensor")
    bad = ~torch.isfinite(emb)
    if bool(bad.any()):
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()
        raise ValueError(f"{name} returned NaN/inf embeddings for text(s) at index {rows[:10]}")
    return emb
