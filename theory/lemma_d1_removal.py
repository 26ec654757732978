"""Lemma D.1 (density update under removal).

Statement: for a group Omega of G >= 3 rollouts with local masses m_j = m_hat(o_j; Omega) (eq. 3),
removing o_i changes every other local mass to
    m_j^(-i) = ((G-1) m_j - k(o_j, o_i)) / (G-2) = m_j + (m_j - k(o_j, o_i)) / (G-2),   j != i.
Assumptions: k symmetric with k(o, o) = 1 (only the off-diagonal entries enter), G >= 3.
"""

from __future__ import annotations

import sympy as sp
import torch

from setpo import local_mass, loo_credits
from theory import general as GN
from theory import symbolic as S
from theory.instances import KERNELS, drop_entry, kernel_batches, without
from theory.records import CheckRecord, count_record, error_record, record, search_record, sizes_scope
from theory.strategies import kernels, property_record

RESULT = "Lemma D.1"
TOL = 1e-12
GENERAL_SCOPE = "the identity (both printed forms) for every G >= 3, every pair (i, j != i) and any kernel entries"


def general_forms() -> tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr]:
    """(literal m_hat(o_j; Omega minus o_i), m_j, form ((G-1)m_j - k_ji)/(G-2), form m_j + (m_j - k_ji)/(G-2)).

    Symbolic G, i = o_0 and j the generic member of R (every j != i is one).
    """
    group, G, j = GN.Group(1), GN.G, GN.J
    literal, m_j, k_ji = group.local_mass(j, set()), group.local_mass(j, {0}), group.k(0, j)
    return literal, m_j, ((G - 1) * m_j - k_ji) / (G - 2), m_j + (m_j - k_ji) / (G - 2)


def check_general() -> CheckRecord:
    """Both printed forms equal the literal reduced-set mass for a symbolic G >= 3 (proof, not a sample of G)."""
    literal, _, first, second = general_forms()
    proofs = [
        GN.prove(first, literal, "((G-1) m_j - k_ji)/(G-2) = m_hat(o_j; Omega minus o_i)"),
        GN.prove(second, literal, "m_j + (m_j - k_ji)/(G-2) = m_hat(o_j; Omega minus o_i)"),
    ]
    return GN.proof_record(RESULT, "both forms = literal reduced-set mass, symbolic G", proofs)


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """The general model's masses at G = sizes equal the explicit ones of S.kernel_matrix, every j != i = 0."""
    literal, m_j, _, _ = general_forms()

    def explicit(members):
        return lambda G, j: S.set_local_mass(S.kernel_matrix(G), j, members(G))

    pairs = [(literal, explicit(lambda G: range(1, G))), (m_j, explicit(range))]
    return GN.expansion_record(RESULT, "general-G masses = explicit expansion", GN.Group(1), pairs, sizes)


def removal_formula(m: torch.Tensor, K: torch.Tensor, i: int) -> torch.Tensor:
    """Lemma D.1's right-hand side m_j + (m_j - k(o_j, o_i)) / (G-2) for j != i; (..., G) -> (..., G-1)."""
    G = K.shape[-1]
    return drop_entry(m + (m - K[..., :, i]) / (G - 2), i)


def removal_error(K: torch.Tensor) -> float:
    """Largest |Lemma D.1's formula - local_mass of the reduced kernel| over every removed i and remaining j."""
    m = local_mass(K)
    errors = [removal_formula(m, K, i) - local_mass(without(K, i)) for i in range(K.shape[-1])]
    return float(torch.stack(errors).abs().max())


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """Both printed forms equal the literal reduced-set local mass, for symbolic kernels, G in `sizes`."""
    cases, bad = 0, []
    for G, K, i, j, everyone, rest in S.removals(sizes):
        literal, m_j = S.set_local_mass(K, j, rest), S.set_local_mass(K, j, everyone)
        for form in (((G - 1) * m_j - K[j, i]) / (G - 2), m_j + (m_j - K[j, i]) / (G - 2)):
            cases += 1
            if sp.expand(literal - form) != 0:
                bad.append((G, i, j))
    return count_record(
        RESULT,
        f"both forms = literal m_hat(o_j; Omega minus o_i), G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


def check_numeric(total: int = 10_000, seed: int = 1, sizes: tuple[int, ...] = (3, 4, 6, 8)) -> CheckRecord:
    """Formula vs the core's local_mass recomputed on the reduced kernel, every (i, j), random kernels."""
    worst, n = 0.0, 0
    for cell, K in kernel_batches(total, sizes, seed, shapings=("linear",)):
        worst, n = max(worst, removal_error(K)), n + cell.batch
    return error_record(
        RESULT,
        f"formula vs local_mass of the reduced kernel, kernels {KERNELS}, G={list(sizes)}",
        "numeric",
        n,
        [worst],
        TOL,
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: 1/16-grid kernels with exact ties, G = 3..7, every (i, j)."""

    def prop(K: torch.Tensor) -> None:
        err = removal_error(K)
        assert err <= TOL, f"error {err}, K={K.tolist()}"

    return property_record(
        RESULT, "hypothesis: formula vs reduced-kernel local_mass on 1/16-grid kernels", kernels(), prop, examples
    )


def check_unclamped(total: int = 2_000, seed: int = 2) -> CheckRecord:
    """Dropping k in [0,1]: the lemma is algebra on the off-diagonal entries, so no counterexample can exist."""
    worst, n = 0.0, 0
    for cell, K in kernel_batches(total, (3, 5, 8), seed, shapings=("linear",), kernels=("cosine",), clamp=False):
        K = K.clone()
        K.diagonal(dim1=-2, dim2=-1).mul_(0.3)  # non-unit diagonal as well: it never enters
        worst, n = max(worst, removal_error(K)), n + cell.batch
    return search_record(
        RESULT,
        "kernel in [-1,1] with diagonal 0.3 (identity needs neither)",
        n,
        worst > TOL,
        worst,
        "the lemma only rearranges a sum of off-diagonal entries",
        expect_found=False,
        metric="max abs error",
    )


def check_small_group() -> CheckRecord:
    """G = 2: m_j^(-i) would average over no entry (division by G-2 = 0); the core must refuse, not divide."""
    K = torch.tensor([[1.0, 0.4], [0.4, 1.0]], dtype=torch.float64)
    try:
        loo_credits(K)
    except ValueError as err:
        zero = loo_credits(K, on_small_group="zero")
        check = "G=2: loo_credits raises ValueError (on_small_group='zero' gives 0)"
        return record(RESULT, check, "input", 1, "raised", 1.0, bool((zero == 0).all()), str(err)[:120])
    return record(RESULT, "G=2: loo_credits raises ValueError", "input", 1, "raised", 0.0, False, "no error for G=2")


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Lemma D.1."""
    sizes = (3, 4) if quick else (3, 4, 5, 6)
    total = 1_000 if quick else 10_000
    return [
        check_general(),
        check_symbolic(sizes),
        check_general_vs_expansion(sizes),
        check_numeric(total),
        check_property(50 if quick else 300),
        check_unclamped(500 if quick else 2_000),
        check_small_group(),
    ]
