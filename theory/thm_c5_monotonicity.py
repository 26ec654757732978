"""Thm C.5 ("Theorem 3.5", local monotonicity via curvature).

Statement: under Assumptions C.1 and C.3, if g is C^2 on (0,1] with m g''(m) < -2 g'(m) for all m in (0,1],
fix a in (0,1] and c_a = min_{m in [a,1]} (-phi'(m)) > 0; then for m_P(tau1), m_P(tau2) in [a,1]
    I~(tau1) - I~(tau2) <= -c_a (m_P(tau1) - m_P(tau2)) + |r_tau1| + |r_tau2|,
so whenever m_P(tau1) - m_P(tau2) > (|r_tau1| + |r_tau2|) / c_a the rarer trajectory tau2 scores higher.
Finding: the inequality as printed holds for m_P(tau1) >= m_P(tau2) (the case the conclusion uses); with
m_P(tau1) < m_P(tau2) it fails whenever -phi' is not constant (explicit instance below, exact arithmetic).
"""

from __future__ import annotations

from typing import NamedTuple

import sympy as sp
import torch

from theory import symbolic as S
from theory.instances import DTYPE, EXTRA, KERNELS, SHAPINGS, population_batches, shaping_names
from theory.proxy import curvature_constant, remainder
from theory.records import CheckRecord, count_record, search_record, slack_record, tightness_record

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


class Sweep(NamedTuple):
    """Every ordered pair of points of seeded random P, shared by the inequality, conclusion and tightness checks."""

    instances: int
    slack: torch.Tensor  # per cell: min of bound - gap over admissible pairs
    qualifying: int  # pairs meeting the sufficient condition
    wrong: int  # of those, pairs where the denser point scored >=
    ratios: torch.Tensor  # true advantage / certified advantage on the qualifying pairs
    shapings: tuple


def sweep(total: int, seed: int = 50, sizes: tuple[int, ...] = (2, 3, 5, 8), shapings: tuple = SHAPINGS) -> Sweep:
    """The inequality, the conclusion and its tightness over every ordered pair of a population sweep."""
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
    return Sweep(n, torch.stack(slack), qualifying, wrong, torch.cat(ratios), shapings)


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
    return count_record(
        RESULT,
        "phi' = 2g' + m g''; c_a = -phi'(1) for the registered g",
        "symbolic",
        cases,
        bad,
        metric="failures",
        detail="c_a: " + ", ".join(f"{k} {v}" for k, v in values.items()),
        scope="size-free",
    )


def check_numeric(swept: Sweep) -> CheckRecord:
    """The inequality for every ordered pair with m_P(tau1) >= m_P(tau2) > 0, a = m_P(tau2), r from the core."""
    check = f"inequality for m1 >= m2 in [a,1], kernels {KERNELS}, g in {shaping_names(swept.shapings)}"
    return slack_record(RESULT, check, "numeric", swept.instances, swept.slack, 1e-12)


def check_conclusion(swept: Sweep) -> CheckRecord:
    """Whenever m1 - m2 > (|r1| + |r2|)/c_a, the rarer point scores strictly higher (counted over all pairs)."""
    return count_record(
        RESULT,
        "rarer scores higher when m1 - m2 > (|r1|+|r2|)/c_a",
        "numeric",
        swept.instances,
        swept.wrong,
        "pairs where the denser scored >=",
        f"{swept.qualifying} pairs met the condition",
    )


def check_tightness(swept: Sweep) -> CheckRecord:
    """Ratio of the true advantage I~2 - I~1 to the certified one c_a(m1 - m2) - |r1| - |r2| (>= 1; 1 = tight)."""
    check = "tightness: true advantage / certified advantage"
    return tightness_record(RESULT, check, swept.instances, swept.ratios, "pairs", least=True, digits=2)


def _isolated(weights: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """P with isolated atoms (k = 0 between distinct atoms): every r_tau is exactly 0."""
    n = len(weights)
    return torch.tensor(weights, dtype=DTYPE), torch.eye(n, dtype=DTYPE)


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
    swept = sweep(1_000 if quick else 10_000)
    return [
        check_symbolic(),
        check_numeric(swept),
        check_conclusion(swept),
        check_tightness(swept),
        check_printed_order(),
        check_curvature_violated(),
    ]
