"""Unbiased pass@k against an exact rational reference, broadcasting, and input errors."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpo import pass_at_k


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """1 - C(n - c, k) / C(n, k) in exact rational arithmetic (math.comb is 0 when n - c < k)."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def grid() -> list[tuple[int, int, int]]:
    """(n, c, k) over n up to 1024 with every edge case: c = 0, c = n, n - c < k, n - c = k, k = n."""
    cases = set()
    for n in (1, 2, 3, 5, 8, 16, 64, 100, 257, 1000, 1023, 1024):
        ks = {1, 2, n - 1, n} | {2**j for j in range(11) if 2**j <= n}
        for k in {k for k in ks if 1 <= k <= n}:
            cs = {0, 1, 2, n // 3, n // 2, n - k - 1, n - k, n - k + 1, n - 1, n}
            cases |= {(n, c, k) for c in cs if 0 <= c <= n}
    return sorted(cases)


GRID = grid()


def test_grid_against_exact_reference():
    assert len(GRID) > 500 and (1024, 0, 1024) in GRID and (1024, 1024, 1) in GRID
    worst = 0.0
    for n, c, k in GRID:
        exact = exact_pass_at_k(n, c, k)
        got = pass_at_k(n, c, k)
        assert isinstance(got, float)
        if exact == 0:
            assert got == 0.0, (n, c, k, got)
        else:
            worst = max(worst, abs(Fraction(got) - exact) / exact)
    assert worst < 1e-12, worst


def test_vectorised_grid_equals_scalar_calls():
    n, c, k = (np.array(col) for col in zip(*GRID))
    out = pass_at_k(n, c, k)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == n.shape
    np.testing.assert_array_equal(out, [pass_at_k(*case) for case in GRID])


@given(n=st.integers(1, 1024), data=st.data())
def test_random_cases_against_exact_reference(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    exact = exact_pass_at_k(n, c, k)
    got = pass_at_k(n, c, k)
    if exact == 0:
        assert got == 0.0
    else:
        assert abs(Fraction(got) - exact) / exact < 1e-12


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 0, 1, 0.0),
        (10, 10, 1, 1.0),
        (10, 10, 10, 1.0),
        (10, 8, 3, 1.0),  # n - c = 2 < k: every k-subset holds a correct sample
        (10, 7, 3, 1 - 1 / 120),  # n - c = k: exactly one all-wrong subset out of C(10, 3) = 120
        (10, 1, 1, 0.1),
        (4, 2, 2, 1 - 1 / 6),
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
    ],
)
def test_edge_cases_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-15, abs=0)


def test_pass_at_1_is_the_fraction_correct():
    c = np.arange(0, 65)
    np.testing.assert_allclose(pass_at_k(64, c, 1), c / 64, rtol=1e-15, atol=0)


def test_broadcasting_shapes():
    n = np.array([[16], [64], [1024]])  # (3, 1)
    c = np.array([0, 3, 9, 16])  # (4,)
    out = pass_at_k(n, c, 4)
    assert out.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert out[i, j] == pass_at_k(int(n[i, 0]), int(c[j]), 4)
    ks = 2 ** np.arange(7)
    curve = pass_at_k(64, 5, ks)
    assert curve.shape == (7,) and bool(np.all(np.diff(curve) > 0))


def test_integral_floats_and_numpy_scalars_accepted():
    assert pass_at_k(10.0, 3.0, 2.0) == pass_at_k(10, 3, 2)
    assert pass_at_k(np.int32(10), np.uint8(3), np.int64(2)) == pass_at_k(10, 3, 2)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        (5, 1, 6, "k must satisfy"),
        (5, 6, 1, "c .correct samples"),
        (5, -1, 1, "c .correct samples"),
        (5, 1, 0, "k must satisfy"),
        (5, 1, -2, "k must satisfy"),
        (0, 0, 1, "n .samples"),
        (-3, 0, 1, "n .samples"),
        (5.5, 1, 1, "n must hold integers"),
        (5, 1.5, 1, "c must hold integers"),
        (5, 1, 2.5, "k must hold integers"),
        (float("nan"), 1, 1, "n must hold integers"),
        (float("inf"), 1, 1, "n must hold integers"),
        (True, 1, 1, "n must hold integers"),
        ("5", 1, 1, "n must hold integers"),
        (np.array([5, 6]), np.array([1, 7]), 1, "c .correct samples"),
        (np.array([5, 6]), 1, np.array([1, 7]), "k must satisfy"),
    ],
)
def test_bad_input_raises(n, c, k, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k(n, c, k)


def test_mismatched_shapes_raise():
    with pytest.raises(ValueError):
        pass_at_k(np.array([5, 6, 7]), np.array([1, 2]), 1)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(10**8, 5 * 10**7, 10), (2**62, 3, 7), (2**62, 2**61, 5), (10**20, 5, 3), (10**20, 10**19, 10**4)],
    ids=["1e8-half-correct", "2^62", "2^62-huge-c", "1e20", "1e20-huge-c"],
)
def test_huge_n_and_c_are_exact_and_fast(n, c, k):
    """A product of min(c, k) factors: no array of c terms, Python ints beyond int64, exact vs Fraction."""
    t0 = time.perf_counter()
    got = pass_at_k(n, c, k)
    assert time.perf_counter() - t0 < 2.0  # was ~3 s for n = 1e8, c = 5e7; a failure for 2^62 and 1e20
    exact = 1 - Fraction(math.prod(range(n - c - k + 1, n - c + 1)), math.prod(range(n - k + 1, n + 1)))
    assert abs(Fraction(got) - exact) / exact < 1e-12


def test_large_c_and_k_together_are_fast():
    """min(c, k) = 5e7 factors: the partial product falls below float64 resolution early, pass@k is exactly 1."""
    t0 = time.perf_counter()
    assert pass_at_k(10**8, 5 * 10**7, 5 * 10**7 - 1) == 1.0
    assert time.perf_counter() - t0 < 2.0


def test_huge_inputs_broadcast_with_object_arrays():
    out = pass_at_k(np.array([10**20, 2**62], dtype=object), 5, 1)
    np.testing.assert_allclose(out, [5 / 10**20, 5 / 2**62], rtol=1e-14, atol=0)
    assert pass_at_k(1e20, 5.0, 1) == pytest.approx(5e-20, rel=1e-14)
