"""reproduce.stats against hand-computed values, brute-force references and scipy: the exact sign-flip test, Holm,
the Student-t CI, the seeds x problems bootstrap, the frontier, and the decision rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from reproduce import stats
from reproduce.stats import bootstrap_ci, frontier_at, sign_flip_pvalue


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
    mc = sign_flip_pvalue(list(np.linspace(-0.2, 1.0, 24)), n_mc=50_000)  # Monte Carlo beyond 20 seeds
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


def test_sign_flip_hand_values():
    assert sign_flip_pvalue([0.1, 0.2, 0.3, 0.4, 0.5]) == 2 / 32 == 0.0625  # 5 seeds all up: the floor
    assert sign_flip_pvalue([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]) == 2 / 64 == 0.03125  # 6 seeds all up
    assert sign_flip_pvalue([1.0, -1.0]) == 1.0  # ties: |sum| >= 0 for every pattern
    assert sign_flip_pvalue([2.0, 1.0, 1.0]) == 0.25  # sums 4, 2, 2, 0, 0, -2, -2, -4: two as extreme as 4
    assert stats.exact_floor(5) == 0.0625 and stats.min_seeds(1) == 6 and stats.min_seeds(8) == 9


@pytest.mark.parametrize("n", [3, 8, 13, 20])
def test_sign_flip_is_exact_against_scipy_and_brute_force(rng, n):
    d = rng.normal(0.05, 0.1, size=n)
    want = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
    assert sign_flip_pvalue(d) == pytest.approx(want, abs=1e-12)
    if n <= 13:
        brute = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product((-1, 1), repeat=n)])
        assert sign_flip_pvalue(d) == pytest.approx(brute, abs=1e-15)


def test_holm_on_a_known_vector():
    # sorted 0.01, 0.02, 0.03, 0.04 x (4, 3, 2, 1) = 0.04, 0.06, 0.06, 0.04 -> running max 0.04, 0.06, 0.06, 0.06
    assert stats.holm_adjust([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert stats.holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_t_interval_equals_scipy(rng):
    d = rng.normal(0.1, 0.3, size=7)
    ci = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert stats.t_interval(d) == pytest.approx((ci.low, ci.high), abs=1e-14)
    assert stats.t_interval([0.2, 0.2, 0.2]) == (0.2, 0.2)  # no spread: the degenerate interval
    assert stats.t_interval([0.2]) == (-np.inf, np.inf)


def test_seeds_problems_bootstrap_keeps_pairs_and_widens_with_problem_noise(rng):
    P, S = 40, 10
    a = rng.random((S, P))
    b = a + 0.05  # b beats a by exactly 0.05 on every problem of every seed: no resample can change that
    lo, hi = stats.seeds_problems_ci(lambda w: w @ (b - a).T, S, P)
    assert lo == pytest.approx(0.05) and hi == pytest.approx(0.05)
    noisy = a + 0.05 + rng.normal(0, 0.3, size=(S, P))  # problem noise around the same mean
    lo2, hi2 = stats.seeds_problems_ci(lambda w: w @ (noisy - a).T, S, P)
    seeds_only = bootstrap_ci((noisy - a).mean(axis=1))
    assert lo2 < 0.05 < hi2 and hi2 - lo2 > 0.5 * (seeds_only[2] - seeds_only[1])
    w = stats.problem_weights(P, 100)
    assert w.shape == (101, P) and np.allclose(w.sum(axis=1), 1) and np.all(w[0] == 1 / P)


def test_frontier_batch_equals_frontier_at(rng):
    for _ in range(300):
        P = int(rng.integers(1, 6))
        pts = np.round(rng.random((P, 2)), 1)  # rounding makes tied x and equal points common
        x = float(np.round(rng.random(), 1))
        got = stats.frontier_batch(pts[None, :, 0], pts[None, :, 1], np.array([x]))[0]
        assert got == pytest.approx(frontier_at(pts, x), abs=1e-12)


def test_decide():
    ok = {"p_holm": 0.01, "t_ci": (0.01, 0.2), "boot_ci": (0.02, 0.1), "family_size": 1}
    assert stats.decide(10, **ok) == "confirmed"
    assert stats.decide(10, **(ok | {"boot_ci": (-0.01, 0.1)})) == "inconclusive"  # one interval is not enough
    assert stats.decide(10, **(ok | {"p_holm": 0.06})) == "inconclusive"
    assert stats.decide(10, 0.01, (-0.2, -0.01), (-0.1, -0.02), 1) == "refuted"
    assert stats.decide(10, 0.5, (-0.05, 0.015), (-0.04, 0.01), 1, min_effect=0.02) == stats.BELOW_MIN
    assert stats.decide(10, 0.5, (-0.05, 0.015), (-0.04, 0.03), 1, min_effect=0.02) == "inconclusive"
    # all-zero gaps are never refuted, whatever the intervals say
    assert stats.decide(5, 1.0, (0.0, 0.0), (0.0, 0.0), 1, min_effect=0.02, all_zero=True) == "no difference"
    # below the exact test's floor no "confirmed": 5 seeds (p >= 0.0625), or 6 seeds in a family of 2 (2 x 0.03125)
    assert stats.decide(5, 0.0, (0.1, 0.2), (0.1, 0.2), 1) == "too few seeds"
    assert stats.decide(2, 0.0, (0.1, 0.2), (0.1, 0.2), 1) == "too few seeds"
    assert stats.decide(6, 0.03125, (0.1, 0.2), (0.1, 0.2), 2) == "too few seeds"
    assert stats.decide(6, 0.03125, (0.1, 0.2), (0.1, 0.2), 1) == "confirmed"
    assert stats.decide(5, 0.0, (0.1, 0.2), (0.1, 0.2), 1, at_ceiling=True) == "untestable (at ceiling)"
    assert "6 seeds needed" in stats.why("too few seeds", 5, 1)


@pytest.mark.parametrize("bad", [[], [[0.1, 0.2]], [0.1, float("nan")]])
def test_bad_input(bad):
    with pytest.raises(ValueError):
        bootstrap_ci(bad)
    with pytest.raises(ValueError):
        sign_flip_pvalue(bad)
    with pytest.raises(ValueError, match="at least one point|finite"):
        frontier_at([] if not bad else [(0.0, x) for x in np.ravel(bad)], float("nan"))
