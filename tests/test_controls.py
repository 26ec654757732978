"""setpo.core.controls against brute force: the cross-group placebo permutation, lambda from a target ratio, warm-up."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch

from setpo.core.controls import (
    controlled_advantages,
    credit_noise_floor,
    placebo_permutation,
    ratio_lambda,
    warmup_factor,
)


def valid_placebo_permutations(group_ids: list[int]) -> set[tuple[int, ...]]:
    """Brute force: every permutation of the rows under which no row keeps a credit of its own group."""
    n = len(group_ids)
    return {p for p in itertools.permutations(range(n)) if all(group_ids[p[i]] != group_ids[i] for i in range(n))}


@pytest.mark.parametrize(
    "groups",
    [[0, 0, 1, 1], [0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2], [5, 5, 5, 2, 2, 9], [3, 1, 3, 1, 2, 2, 1]],
)
def test_placebo_permutation_is_one_of_the_valid_ones_and_reaches_all_of_them(groups):
    valid = valid_placebo_permutations(groups)
    assert valid
    seen = Counter()
    draws = 40 * len(valid)
    for seed in range(draws):
        p = placebo_permutation(torch.tensor(groups), torch.Generator().manual_seed(seed))
        assert p.dtype == torch.long and sorted(p.tolist()) == list(range(len(groups)))
        assert tuple(p.tolist()) in valid
        seen[tuple(p.tolist())] += 1
    assert set(seen) == valid  # every allowed permutation is reachable
    # roughly uniform: no allowed permutation is drawn more than 4x its fair share
    assert max(seen.values()) <= 4 * draws / len(valid)


def test_placebo_permutation_is_a_function_of_the_seed():
    ids = torch.arange(64) // 8
    a = placebo_permutation(ids, torch.Generator().manual_seed(3))
    b = placebo_permutation(ids, torch.Generator().manual_seed(3))
    c = placebo_permutation(ids, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert bool((ids[a] != ids).all())


def test_placebo_permutation_with_large_groups():
    ids = torch.arange(2048) // 64  # 32 groups of G = 64: rejection sampling would never finish here
    p = placebo_permutation(ids, torch.Generator().manual_seed(0))
    assert sorted(p.tolist()) == list(range(2048)) and bool((ids[p] != ids).all())


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        (torch.zeros(6, dtype=torch.long), "at least 2 groups"),
        (torch.tensor([0, 0, 0, 1, 2]), "more than half"),
        (torch.tensor([0.0, 1.0]), "integer tensor"),
        (torch.zeros(2, 2, dtype=torch.long), "1-D integer"),
    ],
)
def test_placebo_permutation_refuses_impossible_or_bad_input(ids, match):
    with pytest.raises(ValueError, match=match):
        placebo_permutation(ids)


def test_placebo_permutation_refuses_non_tensor():
    with pytest.raises(TypeError, match="group_ids must be a 1-D integer torch.Tensor"):
        placebo_permutation([0, 1])


def ratio_lambda_reference(s: list[float], a: list[float], target: float) -> float | None:
    """Brute force: lambda with sum|lambda s_i| / n == target * sum|a_i| / n, by explicit sums."""
    total_s = sum(abs(x) for x in s)
    total_a = sum(abs(x) for x in a)
    if total_s == 0 or total_a == 0:
        return None
    return target * total_a / total_s


def test_ratio_lambda_matches_brute_force_and_hits_the_target():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(3, 40, (1,), generator=g))
        s = torch.randn(n, generator=g, dtype=torch.float64) * 0.01
        a = torch.randn(n, generator=g, dtype=torch.float64)
        target = float(torch.rand(1, generator=g)) + 0.01
        lam = ratio_lambda(s, a, target)
        assert lam == pytest.approx(ratio_lambda_reference(s.tolist(), a.tolist(), target), rel=1e-12)
        assert float((lam * s).abs().mean() / a.abs().mean()) == pytest.approx(target, rel=1e-12)


def test_ratio_lambda_undefined_cases_and_bad_input():
    assert ratio_lambda(torch.zeros(4), torch.ones(4), 0.1) is None
    assert ratio_lambda(torch.ones(4), torch.zeros(4), 0.1) is None
    assert ratio_lambda(torch.zeros(0), torch.zeros(0), 0.1) is None
    with pytest.raises(ValueError, match="target ratio must be a finite number > 0"):
        ratio_lambda(torch.ones(2), torch.ones(2), 0.0)
    with pytest.raises(ValueError, match="shape"):
        ratio_lambda(torch.ones(2), torch.ones(3), 0.1)
    with pytest.raises(ValueError, match="credits contains 1 NaN"):
        ratio_lambda(torch.tensor([1.0, float("nan")]), torch.ones(2), 0.1)


def test_ratio_lambda_ignores_credits_at_rounding_level():
    """Groups whose rollouts are all alike have credits 0 up to rounding (2.2e-16 on SmolLM2 primes runs): no lambda
    may be set from them (it was 2.3e14, and the next all-equal-reward step reused it)."""
    a = torch.tensor([0.5, -0.5, 1.0, -1.0], dtype=torch.float64)
    noise = torch.tensor([2.220446049250313e-16] * 4, dtype=torch.float64)
    assert ratio_lambda(noise, a, 0.3) is None
    assert ratio_lambda(noise.float(), a, 0.3) is None
    assert ratio_lambda(torch.full((4,), 1e-6), a, 0.3) is None  # float32: 64 ulps = 7.6e-6
    real = torch.full((4,), 1e-12, dtype=torch.float64)  # small but far above float64 rounding
    assert ratio_lambda(real, a, 0.3) == pytest.approx(0.3 * 0.75 / 1e-12)
    assert credit_noise_floor(torch.float64) == 64 * 2.0**-52 and credit_noise_floor(torch.bfloat16) == 64 * 2.0**-23


def test_warmup_factor_matches_brute_force():
    for T in (0, 1, 3, 10):
        for t in range(15):
            want = 1.0 if T == 0 else (t / T if t < T else 1.0)
            assert warmup_factor(t, T) == pytest.approx(want, abs=0)
    with pytest.raises(ValueError, match="warmup_steps must be an integer >= 0"):
        warmup_factor(0, -1)


def controlled_reference(base, term, acting, lam, target=None, warmup=1.0, placebo=None):
    """Row by row: the term taken from row placebo[i] (0 outside acting), lambda from the means over acting rows."""
    n = len(base)
    if placebo is None:
        u = list(term)
    else:
        u = [term[placebo[i]] if acting[i] else 0.0 for i in range(n)]
    rows = [i for i in range(n) if acting[i]]
    if target is not None and rows:
        mean_u = sum(abs(u[i]) for i in rows) / len(rows)
        mean_a = sum(abs(base[i]) for i in rows) / len(rows)
        if mean_u > 64 * torch.finfo(torch.float64).eps and mean_a > 0:
            lam = target * mean_a / mean_u
    return [base[i] + lam * warmup * u[i] for i in range(n)], lam


@pytest.mark.parametrize("target", [None, 0.3])
@pytest.mark.parametrize("use_placebo", [False, True])
@pytest.mark.parametrize("warmup", [1.0, 0.25])
def test_controlled_advantages_match_the_row_by_row_reference(target, use_placebo, warmup):
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(12, dtype=torch.float64, generator=gen)
    acting = torch.rand(12, generator=gen) > 0.25
    term = torch.randn(12, dtype=torch.float64, generator=gen).masked_fill(~acting, 0.0)
    placebo = placebo_permutation(torch.arange(12) // 4, torch.Generator().manual_seed(1)) if use_placebo else None
    got, lam = controlled_advantages(base, term, acting, 0.05, target_ratio=target, warmup=warmup, placebo=placebo)
    want, want_lam = controlled_reference(
        base.tolist(),
        term.tolist(),
        acting.tolist(),
        0.05,
        target,
        warmup,
        None if placebo is None else placebo.tolist(),
    )
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-12)
    assert lam == pytest.approx(want_lam, rel=1e-12)


def test_controlled_advantages_keep_the_given_lambda_when_the_batch_gives_no_ratio():
    A = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)
    acting = torch.ones(4, dtype=torch.bool)
    out, lam = controlled_advantages(A, torch.zeros(4, dtype=torch.float64), acting, 0.7, target_ratio=0.5)
    assert lam == 0.7 and torch.equal(out, A)  # u = 0: the previous lambda
    s = torch.tensor([0.1, -0.1, 0.1, -0.1], dtype=torch.float64)
    out, lam = controlled_advantages(A, s, acting, 0.0, target_ratio=0.5)
    assert lam == pytest.approx(0.5 * 0.75 / 0.1)
    _, again = controlled_advantages(torch.zeros(4, dtype=torch.float64), s, acting, lam, target_ratio=0.5)
    assert again == lam  # A_bar = 0: the previous lambda
    with pytest.raises(ValueError, match="share one"):
        controlled_advantages(A, s[:3], acting, 0.1)


def test_controlled_advantages_form_the_sum_in_the_base_dtype():
    base = torch.tensor([0.5, -0.5, 0.25], dtype=torch.float32)
    s = torch.tensor([0.1, 0.2, -0.3], dtype=torch.float64)
    out, _ = controlled_advantages(base, s, torch.ones(3, dtype=torch.bool), 0.05)
    assert out.dtype == torch.float32 and torch.equal(out, base + 0.05 * s.to(torch.float32))


def test_rows_outside_acting_get_no_term():
    base = torch.tensor([0.5, -0.5, 0.25, 0.0], dtype=torch.float64)
    term = torch.tensor([0.1, 0.2, -0.3, 0.4], dtype=torch.float64)
    acting = torch.tensor([True, True, True, False])
    out, _ = controlled_advantages(base, term, acting, 2.0)
    assert out[3] == 0.0 and torch.equal(out[:3], base[:3] + 2.0 * term[:3])
