"""One way to embed a batch of texts: each distinct text once, in chunks, checked, scattered back to every row."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from setpo._validate import check_embeddings, check_int, check_len, check_texts
from setpo.embedders.base import Embedder


def embed_texts(embedder: Embedder, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
    """(N, d) float32 CPU embeddings of ``texts``; every distinct text is embedded once, ``batch_size`` per call.

    Groups that collapsed onto one answer repeat it G times (the case the credit exists for), so the embedder sees
    only the distinct texts and equal texts get bit-identical rows.
    """
    texts = check_len(check_texts(texts), "texts")
    check_int(batch_size, "batch_size", minimum=1)
    index: dict[str, int] = {}
    rows = [index.setdefault(t, len(index)) for t in texts]
    distinct = list(index)
    chunks = []
    for start in range(0, len(distinct), batch_size):
        part = distinct[start : start + batch_size]
        emb = check_embeddings(torch.as_tensor(embedder(part)), len(part), f"embedder {type(embedder).__name__}")
        chunks.append(emb.detach().float().cpu())
    return torch.cat(chunks)[torch.tensor(rows)]
