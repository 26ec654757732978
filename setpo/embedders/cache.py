"""A bounded least-recently-used cache of embeddings keyed by text, and a wrapper adding it to any embedder."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch

from setpo._validate import check_callable, check_embeddings, check_int, check_len, check_texts


class EmbeddingCache:
    """Text -> embedding row (CPU float32), holding at most `max_size` entries (0 disables caching)."""

    def __init__(self, max_size: int = 4096) -> None:
        check_int(max_size, "cache max_size", minimum=0)
        self.max_size = max_size
        self._rows: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, text: str) -> bool:
        return text in self._rows

    def clear(self) -> None:
        self._rows.clear()
        self.hits = self.misses = 0

    def get(self, text: str) -> torch.Tensor | None:
        row = self._rows.get(text)
        if row is None:
            self.misses += 1
            return None
        self._rows.move_to_end(text)
        self.hits += 1
        return row

    def put(self, text: str, row: torch.Tensor) -> None:
        if self.max_size == 0:
            return
        self._rows[text] = row.detach().to("cpu", torch.float32).clone()
        self._rows.move_to_end(text)
        while len(self._rows) > self.max_size:
            self._rows.popitem(last=False)

    def embed(self, texts: list[str], encode: Callable[[list[str]], torch.Tensor]) -> torch.Tensor:
        """Embed `texts`, calling `encode` once on the distinct texts not cached yet; returns (N, d) CPU float32."""
        check_len(texts, "texts")
        found: dict[str, torch.Tensor] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):  # distinct, first-seen order
            row = self.get(text)
            if row is None:
                missing.append(text)
            else:
                found[text] = row
        if missing:
            new = check_embeddings(encode(missing), len(missing)).detach().to("cpu", torch.float32)
            for text, row in zip(missing, new):
                found[text] = row
                self.put(text, row)
        return torch.stack([found[t] for t in texts])


class CachedEmbedder:
    """Wrap any embedder with an :class:`EmbeddingCache` (only for embedders whose output never changes)."""

    def __init__(self, embedder: Callable[[Sequence[str]], torch.Tensor], max_size: int = 4096) -> None:
        check_callable(embedder, "embedder")
        self.embedder = embedder
        self.cache = EmbeddingCache(max_size)

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        texts = check_texts(texts)
        if not texts:
            return self.embedder(texts)
        return self.cache.embed(texts, self.embedder)
