"""reproduce.stats against brute-force references: the bootstrap CI, the sign-flip test and the frontier."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reproduce.stats import bootstrap_ci, frontier_at, sign_flip_pvalue, verdict


def test_sign_flip_matches_enumeration_by_hand():
    d = [0.3, -0.1, 0.2, 0.25, 0.05]
    observed = abs(np.mean(d))
    count = 0
    for signs in itertools.product((-1, 1), repeat=len(d)):
        count += abs(np.mean([s * x for s, x in zip(signs, d)])) >= observed - 1e-12
    assert sign_flip_pvalue(d) == pytest.approx(count / 2 ** len(d), abs=1e-15)


def test_sign_flip_extremes():
    assert sign_flip_pvalue([1.0] * 10) == pytest.approx(2 / 2**10)  # only all-plus and all-minus are as extreme
    assert sign_flip_pvalue([0.0, 0.0, 0.0]) == 1.0
    mc = sign_flip_pvalue(list(np.linspace(-0.2, 1.0, 20)), n_mc=50_000)  # Monte Carlo beyond 16 seeds
    assert 0 < mc < 0.01


def test_bootstrap_ci_covers_mean_and_shrinks_with_seeds(rng):
    small = rng.normal(0.1, 0.2, size=5)
    large = rng.normal(0.1, 0.2, size=200)
    m, lo, hi = bootstrap_ci(small)
    assert lo <= m <= hi and m == pytest.approx(small.mean())
    _, lo2, hi2 = bootstrap_ci(large)
    assert hi2 - lo2 < hi - lo
    assert lo2 < 0.1 < hi2
    assert bootstrap_ci([0.5, 0.5, 0.5])[1:] == (0.5, 0.5)


def test_frontier_is_the_best_the_path_reaches_at_no_less_x():
    pts = [(0.1, 0.5), (0.3, 0.4), (0.2, 0.6)]  # unsorted on purpose
    assert frontier_at(pts, 0.25) == pytest.approx(0.5)  # on the falling segment: the curve itself
    assert frontier_at(pts, 0.15) == pytest.approx(0.6)  # the curve gives 0.55; the checkpoint (0.2, 0.6) dominates
    assert frontier_at(pts, 0.0) == 0.6 and frontier_at(pts, 0.9) == 0.4  # flat beyond the right end
    assert frontier_at([(0.2, 0.3), (0.2, 0.7), (0.4, 0.5)], 0.2) == 0.7  # tied x: the better point


def test_frontier_never_passes_below_a_dominating_checkpoint():
    # A run that gains in both metrics (SmolLM2 primes, seed 4, T 1.0): GRPO's end has more pass@1 and the same
    # pass@32 as a method at (0.086, 0.833), so that method is not above the frontier (the plain curve said +0.077).
    rising = [(0.060, 0.667), (0.076, 0.667), (0.083, 0.75), (0.122, 0.833)]
    assert frontier_at(rising, 0.086) == pytest.approx(0.833)
    # A run that turns back (pass@1 falls again): the start at (0.081, 0.583) dominates (0.07, 0.3).
    back = [(0.081, 0.583), (0.104, 0.417), (0.083, 0.083)]
    assert frontier_at(back, 0.07) == pytest.approx(0.583) and frontier_at(back, 0.09) == pytest.approx(0.417)
    rng = np.random.default_rng(0)
    for _ in range(200):  # brute force: the max of the densely sampled curve over [x, right end]
        p = rng.random((4, 2))
        x = float(rng.random())
        grid = np.linspace(x, max(x, p[:, 0].max()), 2001)
        brute = max(frontier_curve(p, g) for g in grid)
        assert frontier_at(p, x) == pytest.approx(brute, abs=2e-3)


def frontier_curve(points, x: float) -> float:
    """The plain piecewise-linear curve through the points (flat beyond the ends), by np.interp."""
    pts = sorted(map(tuple, points))
    return float(np.interp(x, [a for a, _ in pts], [b for _, b in pts]))


def test_verdicts():
    assert verdict(0.01, 0.2) == "confirmed"
    assert verdict(-0.2, 0.0) == "refuted"
    assert verdict(-0.1, 0.1) == "inconclusive"
    assert verdict(0.0, 0.0, untestable=True) == "untestable (at ceiling)"


@pytest.mark.parametrize("bad", [[], [[0.1, 0.2]], [0.1, float("nan")]])
def test_bad_input(bad):
    with pytest.raises(ValueError):
        bootstrap_ci(bad)
    with pytest.raises(ValueError):
        sign_flip_pvalue(bad)
    with pytest.raises(ValueError, match="at least one point|finite"):
        frontier_at([] if not bad else [(0.0, x) for x in np.ravel(bad)], float("nan"))
