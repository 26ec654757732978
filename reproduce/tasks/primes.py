"""The primes task of the SmolLM2 experiments: "Name a prime number between lo and hi." and its reward.

The first integer of the completion is the answer; reward 1 when it is a prime strictly between lo and hi, else 0.
Train prompts: widths 20 and 40 at every lo in 0..95. Test windows are sets of (lo, hi) that are not train prompts.
"""

from __future__ import annotations

import re

PROMPT = "Name a prime number between {lo} and {hi}.\nThe prime number is "
TEST_LOS = (5, 13, 22, 31, 40, 49, 57, 64, 72, 81, 88, 95)
TEST_WIDTH = 30
TRAIN_WIDTHS = (20, 40)


def first_integer(text: str) -> int | None:
    """The first integer written in ``text`` (the answer), or None."""
    m = re.search(r"\d+", text)
    return int(m[0]) if m else None


def is_prime(x: int) -> bool:
    """Trial division (the numbers here are below a few hundred)."""
    return x >= 2 and all(x % d for d in range(2, int(x**0.5) + 1))


def valid_answer(text: str, lo: int, hi: int) -> int | None:
    """The answer when it is a prime strictly between lo and hi, else None."""
    x = first_integer(text)
    return x if x is not None and lo < x < hi and is_prime(x) else None


def primes_reward(completions, lo, hi, **_) -> list[float]:
    """TRL reward: 1.0 when the first integer of the completion is a prime in (lo, hi), else 0.0."""
    return [float(valid_answer(c, a, b) is not None) for c, a, b in zip(completions, lo, hi)]


class AnswerOneHot:
    """Embeds the answer (first integer; the whole text when there is none) as a one-hot hashed vector."""

    def __init__(self):
        from setpo.embedders import HashedNgramEmbedder

        self.base = HashedNgramEmbedder(char_ngrams=(), word_ngrams=(1,))

    def __call__(self, texts):
        return self.base([str(x) if (x := first_integer(t)) is not None else (t.strip() or "<empty>") for t in texts])


def windows(split: str, n_test: int) -> list[tuple[int, int]]:
    """(lo, hi) of the train prompts, or of the first ``n_test`` published test windows (width 30)."""
    if split == "test":
        return [(lo, lo + TEST_WIDTH) for lo in TEST_LOS[:n_test]]
    return [(lo, lo + w) for w in TRAIN_WIDTHS for lo in range(0, 96)]


def train_rows() -> list[dict]:
    """The train prompts as dataset rows (prompt, lo, hi)."""
    return [{"prompt": PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi} for lo, hi in windows("train", 0)]
