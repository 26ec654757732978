"""Cor D.5 (weighted gap).

Statement: for any r != c there are mean-value points xi_0, xi_j with w_0 = -g'(xi_0), w_j = -g'(xi_j) and
    s_r - s_c = 1/((G-1)(G-2)) sum_{j not in {r,c}} (w_0 + w_j) (k(o_c,o_j) - k(o_r,o_j)),
xi_0 between m_r^(-c) and m_c^(-r), xi_j between m_j^(-c) and m_j^(-r); w > 0 when g is strictly decreasing.
Here w_0, w_j are the divided differences of g over those intervals (the mean-value slopes); the check
confirms the identity and that each slope lies in -g'([interval]) (for convex g, between the endpoint values).
"""

from __future__ import annotations

from typing import NamedTuple

import sympy as sp
import torch
from hypothesis import strategies as st

from setpo import local_mass, loo_credits
from theory import general as GN
from theory import symbolic as S
from theory.instances import DTYPE, EXTRA, KERNELS, SHAPINGS, kernel_batches, resolve, without
from theory.records import CheckRecord, count_record, error_record, record, search_record, sizes_scope
from theory.strategies import dominance_instances, property_record, shapings

RESULT = "Cor D.5"
TOL = 1e-12
GENERAL_SCOPE = (
    "the identity for every G >= 3 and a generic g, with each weight the divided difference of g over its interval "
    "(a mean-value slope) and, where the interval is a single point, any value: two cases per weight. That a "
    "mean-value slope is -g'(xi) for some xi in the interval (and > 0 for strictly decreasing g) is the mean value "
    "theorem, not machine-checked; the slopes are checked numerically"
)


def divided_difference(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """w = -(g(a) - g(b))/(a - b), the mean-value slope of -g between a and b (a != b)."""
    return -(S.g(a) - S.g(b)) / (a - b)


def general_terms() -> dict[str, sp.Expr]:
    """Symbolic G, r = o_0, c = o_1, j the generic member of R: masses, the kernel gap d_j = k_cj - k_rj, both sides."""
    group, G, j = GN.Group(2), GN.G, GN.J
    t = {
        "a0": group.local_mass(0, {0}),  # m_r^(-c)
        "b0": group.local_mass(1, {1}),  # m_c^(-r)
        "aj": group.local_mass(j, {0}),  # m_j^(-c)
        "bj": group.local_mass(j, {1}),  # m_j^(-r)
        "d": group.k(1, j) - group.k(0, j),
        "gap": group.credit(0) - group.credit(1),
    }
    t["w0"], t["wj"] = divided_difference(t["a0"], t["b0"]), divided_difference(t["aj"], t["bj"])
    t["rhs"] = group.rest_sum((t["w0"] + t["wj"]) * t["d"]) / ((G - 1) * (G - 2))
    return t


def check_general() -> CheckRecord:
    """The weighted gap for symbolic G: the generic case directly, and per weight the two cases (tie or not).

    Per summand j: w_j d_j = (G-2)(g(a_j) - g(b_j)) if a_j != b_j (w_j the divided difference) and if a_j = b_j
    (then k_rj = k_cj, d_j = 0, any w_j). For w_0: w_0 sum_j d_j = (G-2)(g(a_0) - g(b_0)) likewise. Summing
    the per-summand identity over R and adding the w_0 one gives the right-hand side as
    (1/(G-1)) [g(a_0) - g(b_0) + sum_j (g(a_j) - g(b_j))], proven equal to s_r - s_c by the definition.
    """
    group, G, j = GN.Group(2), GN.G, GN.J
    t = general_terms()
    any_w = sp.Symbol("w", real=True)  # a tied interval: any weight
    d_sum = group.rest_sum(t["d"])
    same_row = {group.k(1, j): group.k(0, j)}  # a_j = b_j  <=>  k_cj = k_rj
    sum_r, sum_c = (GN.canonical_form(group.rest_sum(group.k(a, GN.Z), GN.Z)) for a in (0, 1))
    equal_sums = {sum_c: sum_r}  # a_0 = b_0  <=>  sum_j k_cj = sum_j k_rj

    def tied_sums(expr: sp.Expr) -> sp.Expr:
        return GN.canonical_form(expr).xreplace(equal_sums)

    target_j = (G - 2) * (S.g(t["aj"]) - S.g(t["bj"]))
    target_0 = (G - 2) * (S.g(t["a0"]) - S.g(t["b0"]))
    assembled = (target_0 + group.rest_sum(target_j)) / ((G - 1) * (G - 2))
    w0, w = sp.Symbol("w_0", real=True), sp.IndexedBase("w", real=True)  # the weights, whatever their case
    proofs = [
        GN.prove(
            t["gap"],
            t["rhs"],
            "s_r - s_c = weighted gap, every interval non-degenerate",
            nonzero=[t["a0"] - t["b0"], t["aj"] - t["bj"]],
        ),
        GN.prove(
            group.rest_sum((w0 + w[j]) * t["d"]),
            w0 * d_sum + group.rest_sum(w[j] * t["d"]),
            "sum_j (w_0 + w_j) d_j = w_0 sum_j d_j + sum_j w_j d_j",
        ),
        GN.prove(t["wj"] * t["d"], target_j, "summand j, case a_j != b_j", nonzero=[t["aj"] - t["bj"]]),
        GN.prove((any_w * t["d"]).xreplace(same_row), target_j.xreplace(same_row), "summand j, case a_j = b_j"),
        GN.prove(t["w0"] * d_sum, target_0, "w_0 term, case a_0 != b_0", nonzero=[t["a0"] - t["b0"]]),
        GN.prove(tied_sums(any_w * d_sum), tied_sums(target_0), "w_0 term, case a_0 = b_0"),
        GN.prove(t["gap"], assembled, "s_r - s_c = the summed cases"),
    ]
    return GN.proof_record(RESULT, "weighted-gap identity with a case split per weight, symbolic G", proofs)


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5)) -> CheckRecord:
    """The general right-hand side at G = sizes equals the explicit one of check_symbolic (r = 0, c = 1)."""
    t = general_terms()
    pairs = [(t["rhs"], lambda G, _: symbolic_rhs(S.kernel_matrix(G), 0, 1))]
    return GN.expansion_record(RESULT, "general-G weighted gap = explicit expansion", GN.Group(2), pairs, sizes)


def symbolic_rhs(K: sp.Matrix, r: int, c: int) -> sp.Expr:
    """Cor D.5's right-hand side on an explicit symbolic kernel, weights as divided differences of a generic g."""
    G = K.shape[0]
    everyone = list(range(G))
    others = [j for j in everyone if j not in (r, c)]
    no_c, no_r = [j for j in everyone if j != c], [j for j in everyone if j != r]
    w0 = divided_difference(S.set_local_mass(K, r, no_c), S.set_local_mass(K, c, no_r))
    terms = [
        (w0 + divided_difference(S.set_local_mass(K, j, no_c), S.set_local_mass(K, j, no_r))) * (K[c, j] - K[r, j])
        for j in others
    ]
    return sp.Add(*terms) / ((G - 1) * (G - 2))


def slope(g, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """w = -(g(a) - g(b)) / (a - b), the mean-value slope; -g' at the midpoint where |a - b| < 1e-6.

    Below that gap the divided difference loses digits (rounding of g over |a - b|); the midpoint slope
    is itself a mean-value point, and the identity only uses w times (a - b).
    """
    shaping = resolve(g)
    close = (a - b).abs() < 1e-6
    safe = torch.where(close, torch.ones_like(a), a - b)
    return torch.where(close, -shaping.dg((a + b) / 2), -(shaping(a) - shaping(b)) / safe)


def weighted_gap(K: torch.Tensor, r: int, c: int, g) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(right-hand side of Cor D.5, w_0, w_j, interval endpoints) for the pair (r, c); K of shape (B, G, G).

    The reduced-set masses come from the core's local_mass on Omega minus o_c and Omega minus o_r.
    """
    G = K.shape[-1]
    others = [j for j in range(G) if j not in (r, c)]
    m_no_c, m_no_r = local_mass(without(K, c)), local_mass(without(K, r))
    pos_no_c = {j: idx for idx, j in enumerate(j for j in range(G) if j != c)}
    pos_no_r = {j: idx for idx, j in enumerate(j for j in range(G) if j != r)}
    a0, b0 = m_no_c[:, pos_no_c[r]], m_no_r[:, pos_no_r[c]]  # m_r^(-c), m_c^(-r)
    aj = torch.stack([m_no_c[:, pos_no_c[j]] for j in others], -1)  # m_j^(-c)
    bj = torch.stack([m_no_r[:, pos_no_r[j]] for j in others], -1)  # m_j^(-r)
    w0, wj = slope(g, a0, b0), slope(g, aj, bj)
    diff = K[:, c, others] - K[:, r, others]
    rhs = ((w0.unsqueeze(-1) + wj) * diff).sum(-1) / ((G - 1) * (G - 2))
    return rhs, w0, wj, (a0, b0, aj, bj)


def mean_value_violation(g, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How far w lies outside [-g'(max(a,b)), -g'(min(a,b))] (zero when inside); valid for convex g."""
    dg = resolve(g).dg
    lo, hi = -dg(torch.maximum(a, b)), -dg(torch.minimum(a, b))
    return torch.clamp(lo - w, min=0) + torch.clamp(w - hi, min=0)


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5)) -> CheckRecord:
    """With w as divided differences of a generic g, the right-hand side equals s_r - s_c from the definition."""
    cases, bad = 0, []
    for G in sizes:
        K = S.kernel_matrix(G)
        r, c = 0, 1
        rhs = symbolic_rhs(K, r, c)
        cases += 1
        diff = S.canonical(sp.cancel(sp.together(S.credit(K, r) - S.credit(K, c) - rhs)))
        if sp.simplify(diff) != 0:
            bad.append(G)
    return count_record(
        RESULT,
        f"identity with divided-difference weights, generic g, G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


class Sweep(NamedTuple):
    """One pass over every ordered pair (r, c) of seeded random kernels, shared by the identity and weight checks."""

    instances: int
    error: float  # largest |s_r - s_c - right-hand side|
    smallest_weight: float
    outside: float  # largest distance of a weight outside its mean-value range
    sizes: tuple[int, ...]


def sweep(total: int, seed: int = 12, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS) -> Sweep:
    """Identity error, smallest weight and mean-value violation over every ordered pair (r, c) of a kernel sweep."""
    worst, smallest, outside, n = 0.0, float("inf"), 0.0, 0
    for cell, K in kernel_batches(total, sizes, seed, shapings):
        s = loo_credits(K, cell.shaping)
        for r in range(cell.size):
            for c in range(cell.size):
                if r == c:
                    continue
                rhs, w0, wj, (a0, b0, aj, bj) = weighted_gap(K, r, c, cell.shaping)
                worst = max(worst, float((s[:, r] - s[:, c] - rhs).abs().max()))
                smallest = min(smallest, float(w0.min()), float(wj.min()))
                outside = max(
                    outside,
                    float(mean_value_violation(cell.shaping, w0, a0, b0).max()),
                    float(mean_value_violation(cell.shaping, wj, aj, bj).max()),
                )
        n += cell.batch
    return Sweep(n, worst, smallest, outside, sizes)


def check_numeric(swept: Sweep) -> CheckRecord:
    """Identity vs loo_credits for every ordered pair (r, c) (no dominance needed for the identity)."""
    check = f"weighted-gap identity vs loo_credits, all pairs, kernels {KERNELS}, G={list(swept.sizes)}"
    return error_record(RESULT, check, "numeric", swept.instances, [swept.error], TOL)


def check_weights(swept: Sweep) -> CheckRecord:
    """Every weight is a genuine mean-value slope (inside -g' of its interval; the four g are convex) and > 0."""
    return record(
        RESULT,
        "weights w_0, w_j inside -g'([interval]) and > 0, all pairs",
        "numeric",
        swept.instances,
        "min weight (must be > 0)",
        swept.smallest_weight,
        swept.smallest_weight > 0 and swept.outside <= 1e-9,
        f"largest distance outside the mean-value range {swept.outside:.1e}",
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: dominance instances on 1/16-grid kernels: the identity, weights > 0, and a positive gap."""

    def prop(case) -> None:
        inst, g = case
        K = inst.K.unsqueeze(0)
        s = loo_credits(K, g)
        rhs, w0, wj, _ = weighted_gap(K, inst.r, inst.c, g)
        err = float((s[:, inst.r] - s[:, inst.c] - rhs).abs().max())
        assert err <= TOL and float(w0.min()) > 0 and float(wj.min()) > 0 and float(rhs.min()) > 0, (
            f"error {err}, w0 {w0.tolist()}, wj {wj.tolist()}, g={g}, K={inst.K.tolist()}"
        )

    check = "hypothesis: identity and positive weights under dominance, 1/16-grid kernels"
    return property_record(RESULT, check, st.tuples(dominance_instances(), shapings), prop, examples)


def check_flat_g() -> CheckRecord:
    """g flat on [1/2, 1]: weights can be exactly 0, so the gap carries no sign information."""
    K = torch.tensor([[[1.0, 0.8, 0.6], [0.8, 1.0, 0.9], [0.6, 0.9, 1.0]]], dtype=DTYPE)
    _, w0, wj, _ = weighted_gap(K, 0, 1, EXTRA["flat"])
    smallest = min(float(w0.min()), float(wj.min()))
    return search_record(
        RESULT,
        "g = max(0, 1/2 - x)^2: explicit instance",
        1,
        smallest <= 0,
        smallest,
        "all masses >= 1/2, so w_0 = w_j = 0: positivity needs g strictly decreasing",
        expect_found=True,
        metric="min weight",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Cor D.5."""
    total = 1_000 if quick else 10_000
    swept = sweep(total, sizes=(3, 4, 5) if quick else (3, 4, 6, 8))  # every ordered pair: G^2 work per instance
    return [
        check_general(),
        check_symbolic((3, 4) if quick else (3, 4, 5)),
        check_general_vs_expansion((3, 4) if quick else (3, 4, 5)),
        check_numeric(swept),
        check_weights(swept),
        check_property(50 if quick else 300),
        check_flat_g(),
    ]
