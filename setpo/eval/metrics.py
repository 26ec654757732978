"""Avg@n and unbiased pass@k over a benchmark, from per-sample correctness (the paper's Sec. 5 protocol)."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from setpo._validate import check_int, check_len
from setpo.metrics.pass_at_k import pass_at_k

MAX_K = 256  # the paper's largest k (AIME24, Fig. 8)


def ks_for(n: int, max_k: int = MAX_K) -> list[int]:
    """k in {1, 2, 4, ...} up to min(n, max_k), the powers of two the paper reports."""
    check_int(n, "n (samples per problem)", minimum=1)
    ks, k = [], 1
    while k <= min(n, max_k):
        ks.append(k)
        k *= 2
    return ks


def _counts(correct: Sequence[Sequence[bool]]) -> tuple[int, np.ndarray]:
    check_len(correct, "correct (the samples' correctness, one list per problem)")
    ns = {len(c) for c in correct}
    if len(ns) != 1:
        raise ValueError(f"every problem needs the same number of samples, got {sorted(ns)}")
    n = ns.pop()
    if n == 0:
        raise ValueError("problems have zero samples")
    return n, np.array([sum(bool(x) for x in c) for c in correct], dtype=np.int64)


def summarize(correct: Sequence[Sequence[bool]], ks: Sequence[int] | None = None) -> dict:
    """{"problems", "n", "avg@n" (mean accuracy = Pass@1), "pass@k": {k: mean unbiased pass@k}} in [0, 1]."""
    n, c = _counts(correct)
    ks = ks_for(n) if ks is None else list(ks)  # pass_at_k refuses a k outside 1..n
    return {
        "problems": int(len(c)),
        "n": int(n),
        "avg@n": float(c.mean() / n),
        "pass@k": {int(k): float(np.mean(pass_at_k(n, c, k))) for k in ks},
    }


def pass_at_k_bruteforce(correct_row: Sequence[bool], k: int) -> float:
    """Reference: the share of all k-subsets of the n samples holding at least one correct one (Chen et al. eq. 1)."""
    n = len(correct_row)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(correct_row[i] for i in s) for s in subsets) / len(subsets)
