"""Thm 4.3 = D.2 (exact decomposition of the SetPO credit).

Statement: for |Omega| = G >= 3 and m_j = m_hat(o_j; Omega),
    s_i = (1/G) g(m_i)                                     (self term)
        + (1/G - 1/(G-1)) sum_{j != i} g(m_j)              (normalisation term)
        + 1/(G-1) sum_{j != i} [g(m_j) - g(m_j^(-i))]       (interaction term),
with m_j^(-i) from Lemma D.1; each interaction summand depends on o_i only through k(o_j, o_i).
Assumptions: k symmetric with unit diagonal, any g defined at the local masses (no monotonicity needed).
"""

from __future__ import annotations

import sympy as sp
import torch
from hypothesis import strategies as st

from setpo import local_mass, loo_credits, loo_credits_reference
from theory import general as GN
from theory import symbolic as S
from theory.instances import (
    KERNELS,
    SHAPINGS,
    drop_entry,
    generator,
    kernel_batches,
    random_kernel,
    resolve,
    shaping_names,
    without,
)
from theory.records import CheckRecord, count_record, error_record, sizes_scope
from theory.strategies import kernels, property_record, shapings

RESULT = "Thm 4.3 = D.2"
TOL = 1e-12
GENERAL_SCOPE = "the decomposition for every G >= 3, every i and a generic g; the locality of each interaction summand"


def decomposition_terms(K: torch.Tensor, g) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(self, normalisation, interaction) terms of Thm 4.3 for every i, each (..., G).

    m_j^(-i) is taken from the core's local_mass on the reduced kernel, independently of Lemma D.1.
    """
    shaping = resolve(g)
    G = K.shape[-1]
    m = local_mass(K)
    g_m = shaping(m)
    self_term = g_m / G
    others = g_m.sum(-1, keepdim=True) - g_m  # sum_{j != i} g(m_j)
    norm_term = (1.0 / G - 1.0 / (G - 1)) * others
    inter = [(drop_entry(g_m, i) - shaping(local_mass(without(K, i)))).sum(-1) / (G - 1) for i in range(G)]
    return self_term, norm_term, torch.stack(inter, -1)


def symbolic_decomposition(K: sp.Matrix, i: int) -> sp.Expr:
    """The right-hand side of Thm 4.3 with m_j^(-i) written by Lemma D.1, generic g."""
    G = K.shape[0]
    everyone = list(range(G))
    m = [S.set_local_mass(K, j, everyone) for j in everyone]
    rest = [j for j in everyone if j != i]
    self_term = S.g(m[i]) / G
    norm_term = (sp.Rational(1, G) - sp.Rational(1, G - 1)) * sp.Add(*[S.g(m[j]) for j in rest])
    inter = sp.Add(*[S.g(m[j]) - S.g(m[j] + (m[j] - K[j, i]) / (G - 2)) for j in rest]) / (G - 1)
    return self_term + norm_term + inter


def general_decomposition() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(s_i by the definition, the decomposition with m_j^(-i) from Lemma D.1, one interaction summand).

    Symbolic G, i = o_0; the sums over j != i are sympy Sums over the rest R = {o_1, ..., o_{G-1}}.
    """
    group, G, j = GN.Group(1), GN.G, GN.J
    m_i, m_j = group.local_mass(0, {0}), group.local_mass(j, {0})
    summand = S.g(m_j) - S.g(m_j + (m_j - group.k(0, j)) / (G - 2))
    rhs = (
        S.g(m_i) / G
        + (sp.Integer(1) / G - sp.Integer(1) / (G - 1)) * group.rest_sum(S.g(m_j))
        + group.rest_sum(summand) / (G - 1)
    )
    return group.credit(0), rhs, summand


def check_general() -> CheckRecord:
    """Definition = decomposition for a symbolic G >= 3, and summand j involves o_i only through k(o_j, o_i)."""
    credit, rhs, summand = general_decomposition()
    group = GN.Group(1)
    k_i = group.k(0, GN.J).base  # the IndexedBase of k(o_i, .)
    touches = {e for e in summand.atoms(sp.Indexed) if e.base == k_i}
    local = touches == {group.k(0, GN.J)} and not summand.has(sp.Sum)  # no other k(o_i, .) and no m_i
    return GN.proof_record(
        RESULT,
        "definition = self + normalisation + interaction, symbolic G, generic g",
        [GN.prove(credit, rhs, "s_i (eq. 5) = self + normalisation + interaction")],
        [("interaction summand j depends on o_i only through k(o_j, o_i)", local)],
    )


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """The general s_i and decomposition at G = sizes equal the explicit G x G expansions (i = 0)."""
    credit, rhs, _ = general_decomposition()
    pairs = [
        (credit, lambda G, _: S.credit(S.kernel_matrix(G), 0)),
        (rhs, lambda G, _: symbolic_decomposition(S.kernel_matrix(G), 0)),
    ]
    return GN.expansion_record(
        RESULT, "general-G s_i and decomposition = explicit expansion", GN.Group(1), pairs, sizes
    )


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """Definition of s_i (eq. 5) minus the decomposition is identically 0, symbolic kernel, generic g."""
    cases, bad = 0, []
    for G in sizes:
        K = S.kernel_matrix(G)
        for i in range(G):
            cases += 1
            if not S.is_identity(S.credit(K, i), symbolic_decomposition(K, i)):
                bad.append((G, i))
    return count_record(
        RESULT,
        f"definition = self + normalisation + interaction, generic g, G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


def check_locality(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """Each interaction summand j involves only row j of K, and o_i only through k(o_j, o_i)."""
    cases, bad = 0, []
    for G, K, i, j, everyone, rest in S.removals(sizes):
        cases += 1
        summand = S.g(S.set_local_mass(K, j, everyone)) - S.g(S.set_local_mass(K, j, rest))
        allowed = {K[j, z] for z in everyone if z != j}
        touches_i = {K[i, z] for z in everyone if z != i} & summand.free_symbols
        if not summand.free_symbols <= allowed or touches_i != {K[j, i]}:
            bad.append((G, i, j))
    return count_record(
        RESULT,
        f"interaction summand j depends on o_i only via k(o_j,o_i), G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        metric="violations",
        scope=sizes_scope(sizes),
    )


def check_against_core(points: int = 200, seed: int = 3, sizes: tuple[int, ...] = (3, 4, 5)) -> CheckRecord:
    """The sympy credit (definition, concrete g) evaluated at random kernels equals the core's loo_credits."""
    worst, n = 0.0, 0
    gen = generator(seed)
    for G in sizes:
        K = S.kernel_matrix(G)
        for name in SHAPINGS:
            Kn = random_kernel("uniform", points, G, gen)
            exprs = [S.concrete(S.credit(K, i), S.SYMPY_SHAPINGS[name]) for i in range(G)]
            sym = torch.from_numpy(S.evaluate(exprs, S.kernel_bindings(K, Kn.numpy())))
            worst = max(worst, float((sym - loo_credits(Kn, name)).abs().max()))
            n += points
    return error_record(
        RESULT,
        f"sympy definition (concrete g) vs loo_credits at random kernels, G={list(sizes)}",
        "numeric",
        n,
        [worst],
        TOL,
    )


def check_numeric(
    total: int = 10_000, seed: int = 4, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """self + normalisation + interaction vs loo_credits (Lemma D.1 closed form) and the literal Algorithm 1."""
    worst_fast, worst_ref, n = 0.0, 0.0, 0
    for cell, K in kernel_batches(total, sizes, seed, shapings):
        total_terms = sum(decomposition_terms(K, cell.shaping))
        fast, ref = loo_credits(K, cell.shaping), loo_credits_reference(K, cell.shaping)
        worst_fast = max(worst_fast, float((total_terms - fast).abs().max()))
        worst_ref = max(worst_ref, float((total_terms - ref).abs().max()))
        n += cell.batch
    return error_record(
        RESULT,
        f"decomposition vs loo_credits and loo_credits_reference, kernels {KERNELS}, "
        f"g in {shaping_names(shapings)}, G={list(sizes)}",
        "numeric",
        n,
        [worst_fast, worst_ref],
        TOL,
        detail=f"vs closed form {worst_fast:.1e}, vs Algorithm 1 {worst_ref:.1e}",
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: 1/16-grid kernels (ties, 0/1 entries), G = 3..7, the four registered g."""

    def prop(case) -> None:
        K, g = case
        err = float((sum(decomposition_terms(K, g)) - loo_credits(K, g)).abs().max())
        assert err <= TOL, f"error {err} for g={g}, K={K.tolist()}"

    check = "hypothesis: decomposition vs loo_credits on 1/16-grid kernels"
    return property_record(RESULT, check, st.tuples(kernels(), shapings), prop, examples)


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Thm 4.3."""
    sizes = (3, 4) if quick else (3, 4, 5, 6)
    return [
        check_general(),
        check_symbolic(sizes),
        check_general_vs_expansion(sizes),
        check_locality(sizes),
        check_against_core(20, sizes=(3,)) if quick else check_against_core(200),
        check_numeric(1_000 if quick else 10_000),
        check_property(50 if quick else 300),
    ]
