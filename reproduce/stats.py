"""Statistics over seeds for paired comparisons: bootstrap CIs, the sign-flip test and a frontier along a trajectory."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def _diffs(diffs: Sequence[float]) -> np.ndarray:
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"need a non-empty 1-d sequence of paired differences, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("paired differences hold NaN or inf")
    return d


def bootstrap_ci(diffs: Sequence[float], level: float = 0.95, n_boot: int = 20_000, seed: int = 0) -> tuple:
    """(mean, lo, hi): the mean of the paired differences and its percentile bootstrap CI over seeds."""
    d = _diffs(diffs)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def sign_flip_pvalue(diffs: Sequence[float], n_mc: int = 100_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip (permutation) test of mean difference 0.

    Exact (all 2^n sign patterns) for n <= 16 seeds, Monte Carlo with ``n_mc`` draws beyond.
    """
    d = _diffs(diffs)
    observed = abs(d.mean())
    if d.size <= 16:
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=d.size)))
    else:
        signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n_mc, d.size))
    null = np.abs((signs * d).mean(axis=1))
    return float(np.mean(null >= observed - 1e-12))


def frontier_at(points: Sequence[tuple[float, float]], x: float) -> float:
    """The most y a trajectory reaches at x' >= x: the piecewise-linear curve through ``points`` (x, y), sorted by x
    and constant beyond the ends, maximised over [x, inf).

    Used as GRPO's frontier: (pass@1, pass@k) of GRPO's checkpoints along one seed's training run. A point lies
    above it only if no checkpoint (nor a point on the segment between two) has at least its x and more y. The plain
    curve at x is not enough: where the run gains both (later checkpoints better in x and y) or turns back (x falls
    as training goes on), it passes below checkpoints that dominate the point.
    """
    pts = sorted((float(a), float(b)) for a, b in points)
    if not pts:
        raise ValueError("frontier needs at least one point")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    if not all(np.isfinite(xs + ys)) or not np.isfinite(x):
        raise ValueError("frontier points and x must be finite")
    # np.interp needs increasing x; equal x (a checkpoint that did not move pass@1) keep the larger y.
    merged: dict[float, float] = {}
    for a, b in zip(xs, ys):
        merged[a] = max(b, merged.get(a, -np.inf))
    curve = float(np.interp(x, list(merged), list(merged.values())))
    # A piecewise-linear curve peaks on [x, inf) at x itself or at one of its vertices beyond x.
    return max([curve] + [b for a, b in merged.items() if a >= x])


def verdict(lo: float, hi: float, untestable: bool = False) -> str:
    """ "confirmed" when the CI lies above 0, "refuted" when it lies at or below 0, "inconclusive" otherwise;
    "untestable (at ceiling)" when ``untestable`` (the reference sits at the metric's maximum on every seed, so no
    difference above 0 was possible)."""
    if untestable:
        return "untestable (at ceiling)"
    if lo > 0:
        return "confirmed"
    if hi <= 0:
        return "refuted"
    return "inconclusive"


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): p_(i) * (m - i + 1), running maximum, capped at 1.

    Controls the family-wise error when several methods are each tested against one baseline.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"need a non-empty 1-d sequence of p-values, got shape {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return out.tolist()
