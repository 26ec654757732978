"""The decision rule behind every published verdict: paired differences over seeds, the exact sign-flip test with
Holm's step-down over a declared family, a Student-t interval, and a bootstrap that resamples seeds and test
problems together; plus GRPO's frontier along a trajectory.

A claim says that a paired difference (an arm minus its reference, per seed) is above 0. Its verdict:

* **confirmed**: the Holm-adjusted exact p < `ALPHA`, the Student-t 95% CI lies above 0, and the seeds x problems
  bootstrap interval lies above 0 (all three);
* **refuted**: the same standard in the opposite direction; or, for a claim of a useful gain with a declared
  minimum effect, both intervals end below that effect ("refuted (below the minimum effect)");
* **no difference**: every paired difference is exactly 0 (never "refuted");
* **too few seeds**: the exact test cannot reach `ALPHA` with this many seeds in this family, so neither
  "confirmed" nor a test-based "refuted" can be printed;
* **untestable (at ceiling)**: the reference sits at the metric's maximum on every seed;
* **inconclusive** otherwise.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

#: Family-wise error rate of every verdict.
ALPHA = 0.05
#: Seeds up to which the sign-flip test enumerates all 2^n sign patterns (Monte Carlo beyond).
EXACT_MAX_SEEDS = 20
#: Resamples of the seeds x problems bootstrap.
N_BOOT = 4000

CONFIRMED, REFUTED, INCONCLUSIVE = "confirmed", "refuted", "inconclusive"
NO_DIFFERENCE, BELOW_MIN = "no difference", "refuted (below the minimum effect)"
TOO_FEW, CEILING = "too few seeds", "untestable (at ceiling)"


def _diffs(diffs: Sequence[float]) -> np.ndarray:
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"need a non-empty 1-d sequence of paired differences, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("paired differences hold NaN or inf")
    return d


def _sign_sums(d: np.ndarray) -> np.ndarray:
    """The sum of s * d over all 2^n sign vectors s, by meeting in the middle (2^(n/2) x 2^(n/2) outer sum)."""
    half = d.size // 2

    def sums(part: np.ndarray) -> np.ndarray:
        if part.size == 0:
            return np.zeros(1)
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=part.size)))
        return signs @ part

    return (sums(d[:half])[:, None] + sums(d[half:])[None, :]).ravel()


def sign_flip_pvalue(diffs: Sequence[float], n_mc: int = 200_000, seed: int = 0) -> float:
    """Two-sided p of the paired sign-flip (permutation) test of mean 0: P(|sum s d| >= |sum d|), s uniform on {+-1}^n.

    Exact (all 2^n patterns) up to `EXACT_MAX_SEEDS` seeds; beyond, ``n_mc`` random patterns with the (b + 1) / (m + 1)
    correction, which never gives 0.
    """
    d = _diffs(diffs)
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))  # ties in floating point: equal sums count as extreme
    if d.size <= EXACT_MAX_SEEDS:
        return float(np.mean(np.abs(_sign_sums(d)) >= observed - tol))
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n_mc, d.size))
    hits = int(np.sum(np.abs(signs @ d) >= observed - tol))
    return (hits + 1) / (n_mc + 1)


def exact_floor(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give with n seeds: 2 / 2^n (all of one sign)."""
    if n < 1:
        raise ValueError(f"need at least one seed, got {n}")
    return min(1.0, 2.0 / 2**n)


def min_seeds(family_size: int = 1, alpha: float = ALPHA) -> int:
    """The fewest seeds with which a family of ``family_size`` exact tests can reach Holm-adjusted p < ``alpha``."""
    n = 1
    while family_size * exact_floor(n) >= alpha:
        n += 1
    return n


def t_interval(diffs: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The Student-t CI of the mean paired difference (scipy's ``ttest_1samp(...).confidence_interval``).

    No spread (all differences equal) gives the degenerate interval at the mean; one seed gives (-inf, inf).
    """
    from scipy import stats

    d = _diffs(diffs)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if d.size < 2:
        return -np.inf, np.inf
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(level)
    return float(ci.low), float(ci.high)


def bootstrap_ci(diffs: Sequence[float], level: float = 0.95, n_boot: int = 20_000, seed: int = 0) -> tuple:
    """(mean, lo, hi): the mean of the paired differences and its percentile bootstrap CI over seeds alone.

    Descriptive (the error bars of the figures); verdicts use `decide`.
    """
    d = _diffs(diffs)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def problem_weights(n_problems: int, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """(1 + n_boot, P) weights over test problems: row 0 uniform (the data), then multinomial resamples / P."""
    if n_problems < 1:
        raise ValueError(f"need at least one test problem, got {n_problems}")
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_problems, np.full(n_problems, 1.0 / n_problems), size=n_boot) / n_problems
    return np.vstack([np.full((1, n_problems), 1.0 / n_problems), w])


def seeds_problems_ci(per_seed: Callable[[np.ndarray], np.ndarray], n_seeds: int, n_problems: int,
                      level: float = 0.95, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile CI of the mean paired difference when seeds and test problems are both resampled.

    ``per_seed(W)`` maps problem weights ``W`` (B, P) (each row sums to 1; a metric is ``W @ per-problem values``) to
    the paired differences (B, S). Every arm, seed and checkpoint of one resample shares its problem weights, and the
    seeds are drawn once per resample as pairs, so pairing is kept. The same ``seed`` gives the same resamples to
    every contrast.
    """
    w = problem_weights(n_problems, n_boot, seed)[1:]
    d = np.asarray(per_seed(w), dtype=np.float64)
    if d.shape != (n_boot, n_seeds):
        raise ValueError(f"per_seed returned shape {d.shape}, expected {(n_boot, n_seeds)}")
    idx = np.random.default_rng(seed + 1).integers(0, n_seeds, size=(n_boot, n_seeds))
    means = np.take_along_axis(d, idx, axis=1).mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


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


def frontier_batch(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`frontier_at` for B trajectories at once: ``xs``, ``ys`` (B, P) points, ``x`` (B,) -> (B,)."""
    xs, ys, x = (np.asarray(a, dtype=np.float64) for a in (xs, ys, x))
    if xs.ndim != 2 or xs.shape != ys.shape or x.shape != xs.shape[:1] or xs.shape[1] == 0:
        raise ValueError(f"need xs, ys of one shape (B, P >= 1) and x of shape (B,), got {xs.shape}, {ys.shape}, "
                         f"{x.shape}")  # fmt: skip
    # points of equal x count with their largest y (as in `frontier_at`), then sorted by x
    ys = np.where(xs[:, :, None] == xs[:, None, :], ys[:, None, :], -np.inf).max(axis=2)
    order = np.argsort(xs, axis=-1, kind="stable")
    xs, ys = np.take_along_axis(xs, order, -1), np.take_along_axis(ys, order, -1)
    xc = x[:, None]
    beyond = np.where(xs >= xc, ys, -np.inf).max(axis=1)  # vertices at x' >= x
    # the curve at x: the segment [x_j, x_j+1) holding x, flat beyond the ends
    left, right = xs[:, :-1], xs[:, 1:]
    inside = (left <= xc) & (xc < right)
    with np.errstate(invalid="ignore", divide="ignore"):
        seg = ys[:, :-1] + (ys[:, 1:] - ys[:, :-1]) * (xc - left) / (right - left)
    curve = np.where(inside, seg, -np.inf).max(axis=1) if xs.shape[1] > 1 else np.full(x.shape, -np.inf)
    curve = np.where(x < xs[:, 0], ys[:, 0], curve)
    curve = np.where(x >= xs[:, -1], ys[:, -1], curve)
    return np.maximum(curve, beyond)


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): p_(i) * (m - i + 1), running maximum, capped at 1.

    Controls the family-wise error over the claims of one declared family.
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


def decide(n: int, p_holm: float, t_ci: tuple[float, float], boot_ci: tuple[float, float], family_size: int,
           min_effect: float | None = None, at_ceiling: bool = False, all_zero: bool = False) -> str:  # fmt: skip
    """The verdict on "the paired difference is above 0" over n seeds (module docstring), from the Holm-adjusted exact
    p, the t-CI and the seeds x problems interval; ``min_effect`` is the smallest gain the claim calls useful;
    ``all_zero``: every paired difference is exactly 0."""
    if n < 1 or family_size < 1:
        raise ValueError(f"need n >= 1 seeds and a family of >= 1 claims, got n = {n}, family size {family_size}")
    if at_ceiling:
        return CEILING
    if all_zero:
        return NO_DIFFERENCE
    (t_lo, t_hi), (b_lo, b_hi) = t_ci, boot_ci
    testable = family_size * exact_floor(n) < ALPHA
    if testable and p_holm < ALPHA and t_lo > 0 and b_lo > 0:
        return CONFIRMED
    if testable and p_holm < ALPHA and t_hi < 0 and b_hi < 0:
        return REFUTED
    if min_effect is not None and t_hi < min_effect and b_hi < min_effect:
        return BELOW_MIN
    if not testable:
        return TOO_FEW
    return INCONCLUSIVE


def why(verdict: str, n: int, family_size: int) -> str:
    """A short reason printed beside a verdict that is not a test outcome."""
    if verdict == TOO_FEW:
        floor = min(1.0, family_size * exact_floor(n))
        return (f"{n} seeds in a family of {family_size}: the exact test's smallest Holm p is {floor:.4f} >= {ALPHA}; "
                f"{min_seeds(family_size)} seeds needed")  # fmt: skip
    if verdict == NO_DIFFERENCE:
        return "every paired difference is exactly 0"
    if verdict == CEILING:
        return "the reference is at the metric's maximum on every seed"
    return ""
