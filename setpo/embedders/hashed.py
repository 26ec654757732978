"""A model-free embedder: signed feature hashing of character and word n-grams (stable across processes)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from setpo._validate import check_embeddings, check_int, check_ints, check_texts


def _check_orders(orders, name: str) -> tuple[int, ...]:
    return tuple(sorted(set(check_ints(orders, name, minimum=1, empty=True))))


def text_features(text: str, char_ngrams: Sequence[int], word_ngrams: Sequence[int], lowercase: bool) -> list[str]:
    """The hashed features of one text: "c{n}:" + each character n-gram, "w{n}:" + each n-gram of whitespace words."""
    if lowercase:
        text = text.lower()
    feats = [f"c{n}:{text[i : i + n]}" for n in char_ngrams for i in range(len(text) - n + 1)]
    words = text.split()
    feats += [f"w{n}:" + " ".join(words[i : i + n]) for n in word_ngrams for i in range(len(words) - n + 1)]
    return feats


class HashedNgramEmbedder:
    """Signed feature hashing of character and word n-grams, L2-normalised; (N,) texts -> (N, dim) float32.

    Each feature string is hashed with keyed blake2b (the key is `seed`), never Python's salted ``hash``,
    so vectors are identical across processes and runs. The low bits of the digest pick the bucket, one
    further bit the sign (signed hashing keeps inner products unbiased). A text with no features (the
    empty string) maps to the zero vector, which :func:`setpo.cosine_kernel` treats as a zero-norm row.
    """

    def __init__(
        self,
        dim: int = 512,
        char_ngrams: Sequence[int] = (2, 3, 4),
        word_ngrams: Sequence[int] = (1, 2),
        seed: int = 0,
        lowercase: bool = False,
        device: str | torch.device | None = None,
    ) -> None:
        check_int(dim, "dim", minimum=1)
        check_int(seed, "seed", minimum=0, maximum=2**64 - 1)
        self.dim = dim
        self.char_ngrams = _check_orders(char_ngrams, "char_ngrams")
        self.word_ngrams = _check_orders(word_ngrams, "word_ngrams")
        if not self.char_ngrams and not self.word_ngrams:
            raise ValueError("at least one of char_ngrams / word_ngrams must be non-empty")
        self.seed = seed
        self.lowercase = lowercase
        self.device = device
        self._key = seed.to_bytes(8, "little")
        self._buckets: dict[str, int] = {}  # feature -> signed bucket (+/-(index + 1)), bounded below

    def _signed_bucket(self, feature: str) -> int:
        b = self._buckets.get(feature)
        if b is None:
            h = int.from_bytes(
                hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=self._key).digest(), "little"
            )
            b = (h % self.dim + 1) * (1 if (h >> 63) & 1 else -1)
            if len(self._buckets) >= 1_000_000:
                self._buckets.clear()
            self._buckets[feature] = b
        return b

    def embed_one(self, text: str) -> np.ndarray:
        """The float64 unit (or zero) vector of one text."""
        signed = np.fromiter(
            (self._signed_bucket(f) for f in text_features(text, self.char_ngrams, self.word_ngrams, self.lowercase)),
            dtype=np.int64,
        )
        vec = np.bincount(np.abs(signed) - 1, weights=np.sign(signed).astype(np.float64), minlength=self.dim)
        norm = np.linalg.norm(vec)
        return vec / norm if norm > 0 else vec

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, text in enumerate(texts):
            out[i] = self.embed_one(text)
        emb = torch.from_numpy(out).to(torch.float32)
        if self.device is not None:
            emb = emb.to(self.device)
        return check_embeddings(emb, len(texts), "HashedNgramEmbedder")

    def __repr__(self) -> str:
        return (
            f"HashedNgramEmbedder(dim={self.dim}, char_ngrams={self.char_ngrams}, word_ngrams={self.word_ngrams}, "
            f"seed={self.seed}, lowercase={self.lowercase})"
        )
