"""Thm C.5 ("Theorem 3.5", local monotonicity via curvature).

Statement: under Assumptions C.1 and C.3, if g is C^2 on (0,1] with m g''(m) < -2 g'(m) for all m in (0,1],
fix a in (0,1] and c_a = min_{m in [a,1]} (-phi'(m)) > 0; then for m_P(tau1), m_P(tau2) in [a,1]
    I~(tau1) - I~(tau2) <= -c_a (m_P(tau1) - m_P(tau2)) + |r_tau1| + |r_tau2|,
so whenever m_P(tau1) - m_P(tau2) > (|r_tau1| + |r_tau2|) / c_a the rarer trajectory tau2 scores higher.
Finding: the inequality as printed holds for m_P(tau1) >= m_P(tau2) (the case the conclusion uses); with
m_P(tau1) < m_P(tau2) it fails whenever -phi' is not constant (explicit instance below, exact arithmetic).
"""

from __future__ import annotations

import functools

import sympy as sp
import torch

from theory import symbolic as S
from theory.instances import DTYPE, EXTRA, KERNELS, SHAPINGS, population_batches
from theory.proxy import curvature_constant, remainder
from theory.records import CheckRecord, Verdict, error_record, search_record, slack_record, timed

RESULT = "Thm C.5 (3.5)"
NO_GENERAL_PROOF = (
    "a statement about a distribution P: phi' and c_a symbolic (no size involved), the inequality numerically"
)


def pair_terms(p: torch.Tensor, K: torch.Tensor, g):
    """For all ordered pairs (t1, t2): (m1, m2, I~1 - I~2, |r1| + |r2|, c_{m2}); each (B, n, n)."""
    m, score, r = remainder(p, K, g)
    m1, m2 = m.unsqueeze(-1), m.unsqueeze(-2)
    gap = score.unsqueeze(-1) - score.unsqueeze(-2)
    rr = r.abs().unsqueeze(-1) + r.abs().unsqueeze(-2)
    c = curvature_constant(g, m2.expand_as(gap))
    return m1.expand_as(gap), m2.expand_as(gap), gap, rr, c


@functools.lru_cache(maxsize=4)
def _sweep(total: int, seed: int, sizes: tuple[int, ...], shapings: tuple):
    """(instances, min slack, qualifying pairs, violations of the conclusion, gap/bound ratios)."""
    slack, ratios, n, qualifying, wrong = [], [], 0, 0, 0
    for cell, K, p in population_batches(total, sizes, seed, shapings=shapings):
        m1, m2, gap, rr, c = pair_terms(p, K, cell.shaping)
        valid = (m1 >= m2) & (m2 > 0)  # a = m2, the best admissible a for this pair
        bound = -c * (m1 - m2) + rr
        slack.append(torch.where(valid, bound - gap, torch.full_like(gap, float("inf"))).min())
        sure = valid & (m1 - m2 > rr / c)  # the theorem's sufficient condition: tau2 must score higher
        qualifying += int(sure.sum())
        wrong += int((sure & (gap >= 0)).sum())
        ratios.append((-gap[sure]) / (c * (m1 - m2) - rr)[sure])
        n += cell.batch
    return n, torch.stack(slack), qualifying, wrong, torch.cat(ratios)


@timed
def check_symbolic() -> CheckRecord:
    """phi' = 2g' + m g'' (generic g), so the curvature condition is phi' < 0; exact c_a for the registered g:
    -phi' is non-increasing on [0,1], hence c_a = -phi'(1) for every a; the grid constant matches it."""
    m = sp.Symbol("m", real=True)
    cases, bad, values = 1, [], {}
    phi = S.g(m) + m * sp.diff(S.g(m), m)
    if not S.is_identity(sp.diff(phi, m), 2 * S.gp(m) + m * S.gpp(m)):
        bad.append("phi'")
    for name in SHAPINGS:
        cases += 1
        gx = S.SYMPY_SHAPINGS[name](m)
        neg_phi_prime = sp.simplify(-sp.diff(gx + m * sp.diff(gx, m), m))
        rising = sp.solveset(sp.diff(neg_phi_prime, m) > 0, m, sp.Interval(0, 1))
        c = neg_phi_prime.subs(m, 1)
        values[name] = c
        grid = float(curvature_constant(name, torch.tensor([0.0, 0.5], dtype=DTYPE)).min())
        if rising != sp.EmptySet or not c > 0 or abs(grid - float(c)) > 1e-12:
            bad.append(name)
    return error_record(
        RESULT,
        "phi' = 2g' + m g''; c_a = -phi'(1) for the registered g",
        "symbolic",
        cases,
        [float(len(bad))],
        0,
        metric="failures",
        detail=f"failed: {bad}" if bad else "c_a: " + ", ".join(f"{k} {v}" for k, v in values.items()),
        scope="size-free",
    )


@timed
def check_numeric(
    total: int = 10_000, seed: int = 50, sizes: tuple[int, ...] = (2, 3, 5, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """The inequality for every ordered pair with m_P(tau1) >= m_P(tau2) > 0, a = m_P(tau2), r from the core."""
    n, slack, *_ = _sweep(total, seed, sizes, tuple(shapings))
    names = [s if isinstance(s, str) else s.name for s in shapings]
    return slack_record(
        RESULT, f"inequality for m1 >= m2 in [a,1], kernels {KERNELS}, g in {names}", "numeric", n, slack, 1e-12
    )


@timed
def check_conclusion(total: int = 10_000, seed: int = 50, sizes: tuple[int, ...] = (2, 3, 5, 8)) -> CheckRecord:
    """Whenever m1 - m2 > (|r1| + |r2|)/c_a, the rarer point scores strictly higher (counted over all pairs)."""
    n, _, qualifying, wrong, _ = _sweep(total, seed, sizes, SHAPINGS)
    return CheckRecord(
        RESULT,
        "rarer scores higher when m1 - m2 > (|r1|+|r2|)/c_a",
        "numeric",
        n,
        "pairs where the denser scored >=",
        float(wrong),
        Verdict.PASS if wrong == 0 else Verdict.FAIL,
        detail=f"{qualifying} pairs met the condition",
    )


@timed
def check_tightness(total: int = 10_000, seed: int = 50, sizes: tuple[int, ...] = (2, 3, 5, 8)) -> CheckRecord:
    """Ratio of the true advantage I~2 - I~1 to the certified one c_a(m1 - m2) - |r1| - |r2| (>= 1; 1 = tight)."""
    n, _, _, _, ratios = _sweep(total, seed, sizes, SHAPINGS)
    q = torch.quantile(ratios, torch.tensor([0.5, 0.9], dtype=DTYPE))
    return CheckRecord(
        RESULT,
        "tightness: true advantage / certified advantage",
        "tightness",
        n,
        "min ratio",
        float(ratios.min()),
        Verdict.INFO,
        detail=f"median {float(q[0]):.2f}, 90th percentile {float(q[1]):.2f} over {ratios.numel()} pairs",
    )


def _isolated(weights: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """P with isolated atoms (k = 0 between distinct atoms): every r_tau is exactly 0."""
    n = len(weights)
    return torch.tensor(weights, dtype=DTYPE), torch.eye(n, dtype=DTYPE)


@timed
def check_printed_order() -> CheckRecord:
    """As printed (no order on m1, m2): P = 0.3 delta_a + 0.7 delta_b, k(a,b) = 0, g = -log(1+x), tau1 = a."""
    p, K = _isolated([0.3, 0.7])
    m1, m2, gap, rr, c = (x[0, 0, 1] for x in pair_terms(p.unsqueeze(0), K.unsqueeze(0), "neglog1p"))
    rhs = -c * (m1 - m2) + rr
    x = sp.Symbol("x")
    phi = -sp.log(1 + x) - x / (1 + x)
    exact_gap = phi.subs(x, sp.Rational(3, 10)) - phi.subs(x, sp.Rational(7, 10))
    exact_rhs = sp.Rational(3, 4) * sp.Rational(2, 5)
    found = bool(exact_gap > exact_rhs) and float(gap) > float(rhs)
    return search_record(
        RESULT,
        "printed form with m1 < m2: explicit instance (exact)",
        1,
        found,
        float(gap - rhs),
        f"m1 = 0.3 < m2 = 0.7, r = 0: I~1 - I~2 = log(17/13) + 10/13 - 10/17 = {float(exact_gap):.4f} "
        f"> -c_a (m1 - m2) = 3/4 * 2/5 = 0.3 (core: {float(gap):.4f} vs {float(rhs):.4f}); the bound "
        "needs m1 >= m2",
        expect_found=True,
        metric="LHS - RHS",
    )


@timed
def check_curvature_violated() -> CheckRecord:
    """g = exp(-5x) is strictly decreasing but m g'' < -2 g' fails for m > 2/5: a denser point can score higher."""
    p, K = _isolated([0.45, 0.55])
    m, score, r = remainder(p.unsqueeze(0), K.unsqueeze(0), EXTRA["steep_exp"])
    found = float(score[0, 1]) > float(score[0, 0]) and float(r.abs().max()) < 1e-15
    return search_record(
        RESULT,
        "g = exp(-5x) (curvature condition fails on (2/5, 1]): explicit instance",
        1,
        found,
        float(score[0, 1] - score[0, 0]),
        f"isolated atoms, m = 0.45 and 0.55, r = 0: I~ = {float(score[0, 0]):.4f} (rarer) < "
        f"{float(score[0, 1]):.4f} (denser); phi = e^(-5m)(1-5m) increases on (2/5, 1]",
        expect_found=True,
        metric="I~(denser) - I~(rarer)",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Thm C.5."""
    total = 1_000 if quick else 10_000
    return [
        check_symbolic(),
        check_numeric(total),
        check_conclusion(total),
        check_tightness(total),
        check_printed_order(),
        check_curvature_violated(),
    ]
