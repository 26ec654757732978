"""Cor D.6 (dilution vs congestion).

Statement: for G >= 3, j != i,
    m_j^(-i) > m_j  iff  k(o_j, o_i) < m_j,   and hence   g(m_j^(-i)) < g(m_j)  iff  k(o_j, o_i) < m_j.
Removing a rollout less similar to o_j than o_j's average neighbour leaves o_j in a denser set (its mass
rises, its shaped value falls); removing a more similar one dilutes o_j's neighbourhood (mass falls).
Assumptions: the first equivalence is algebra (Lemma D.1, G - 2 > 0); the second needs g strictly decreasing.
"""

from __future__ import annotations

import sympy as sp
import torch
from hypothesis import strategies as st

from setpo import local_mass
from theory import general as GN
from theory import symbolic as S
from theory.instances import DTYPE, EXTRA, KERNELS, SHAPINGS, drop_entry, kernel_batches, resolve, without
from theory.records import CheckRecord, count_record, search_record, sizes_scope
from theory.strategies import kernels, property_record, shapings

RESULT = "Cor D.6"
TIE = 1e-12  # |difference| below this counts as a tie on both sides of an equivalence
GENERAL_SCOPE = (
    "m_j^(-i) - m_j = (m_j - k_ji)/(G-2) with 1/(G-2) > 0 for every G >= 3 (hence the first 'iff', ties "
    "included); the second 'iff' is then the definition of strictly decreasing g"
)


def general_difference() -> tuple[sp.Expr, sp.Expr]:
    """(m_hat(o_j; Omega minus o_i) - m_j by the definition, (m_j - k(o_j,o_i))/(G-2)): symbolic G, i = o_0."""
    group, G, j = GN.Group(1), GN.G, GN.J
    m_j = group.local_mass(j, {0})
    return group.local_mass(j, set()) - m_j, (m_j - group.k(0, j)) / (G - 2)


def check_general() -> CheckRecord:
    """m_j^(-i) - m_j = (m_j - k_ji)/(G-2) for a symbolic G, and 1/(G-2) > 0 for every G >= 3: same sign."""
    difference, scaled = general_difference()
    return GN.proof_record(
        RESULT,
        "m_j^(-i) - m_j = (m_j - k_ji)/(G-2) with 1/(G-2) > 0, symbolic G",
        [GN.prove(difference, scaled, "m_j^(-i) - m_j = (m_j - k_ji)/(G-2)")],
        [("1/(G-2) > 0 for G >= 3", GN.positive_for_all_g(1 / (GN.G - 2)))],
    )


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """The general difference at G = sizes equals the explicit one, every j != i = 0."""
    difference, _ = general_difference()

    def explicit(G, j):
        K = S.kernel_matrix(G)
        return S.set_local_mass(K, j, range(1, G)) - S.set_local_mass(K, j, range(G))

    return GN.expansion_record(
        RESULT, "general-G m_j^(-i) - m_j = explicit expansion", GN.Group(1), [(difference, explicit)], sizes
    )


def _sign(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.abs() <= TIE, torch.zeros_like(x), torch.sign(x))


def mismatches(K: torch.Tensor, g) -> tuple[int, int, int]:
    """(pairs, mass mismatches, shaped-value mismatches) over all (i, j != i): the sides of each 'iff' disagree."""
    shaping = resolve(g)
    m = local_mass(K)
    pairs, bad_m, bad_g = 0, 0, 0
    for i in range(K.shape[-1]):
        m_loo = local_mass(without(K, i))
        m_rest = drop_entry(m, i)
        gap = drop_entry(m - K[..., :, i], i)  # m_j - k(o_j, o_i): > 0 iff the condition holds
        rises = _sign(m_loo - m_rest)  # +1 iff m_j^(-i) > m_j
        falls = _sign(shaping(m_rest) - shaping(m_loo))  # +1 iff g(m_j^(-i)) < g(m_j)
        bad_m += int(((rises > 0) != (_sign(gap) > 0)).sum())
        bad_g += int(((falls > 0) != (_sign(gap) > 0)).sum())
        pairs += gap.numel()
    return pairs, bad_m, bad_g


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """m_j^(-i) - m_j = (m_j - k(o_j,o_i))/(G-2) from the literal reduced-set mass: same sign as m_j - k_ji."""
    cases, bad = 0, []
    for G, K, i, j, everyone, rest in S.removals(sizes):
        cases += 1
        m_j = S.set_local_mass(K, j, everyone)
        if sp.expand(S.set_local_mass(K, j, rest) - m_j - (m_j - K[j, i]) / (G - 2)) != 0:
            bad.append((G, i, j))
    return count_record(
        RESULT,
        f"m_j^(-i) - m_j = (m_j - k_ji)/(G-2), G - 2 > 0, G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


def check_numeric(
    total: int = 10_000, seed: int = 14, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """Both equivalences on every (i, j) pair of random kernels, masses from the core's local_mass."""
    pairs, bad_m, bad_g, n, rising = 0, 0, 0, 0, 0
    for cell, K in kernel_batches(total, sizes, seed, shapings):
        p, bm, bg = mismatches(K, cell.shaping)
        pairs, bad_m, bad_g, n = pairs + p, bad_m + bm, bad_g + bg, n + cell.batch
        m = local_mass(K)
        rising += sum(int((drop_entry(m - K[..., :, i], i) > TIE).sum()) for i in range(cell.size))
    return count_record(
        RESULT,
        f"both 'iff's on all (i, j) pairs, kernels {KERNELS}, G={list(sizes)}",
        "numeric",
        n,
        bad_m + bad_g,
        "mismatched pairs",
        f"{pairs} pairs; removal of o_i raises m_j on {rising / pairs:.1%} of them",
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: 1/16-grid kernels (exact ties, G = 3..7), the four registered g."""

    def prop(case: tuple[torch.Tensor, str]) -> None:
        K, g = case
        _, bm, bg = mismatches(K, g)
        assert bm + bg == 0, f"{bm} mass and {bg} shaped-value mismatches for g={g}, K={K.tolist()}"

    check = "hypothesis: both 'iff's on 1/16-grid kernels"
    return property_record(RESULT, check, st.tuples(kernels(), shapings), prop, examples)


def check_flat_g() -> CheckRecord:
    """g only non-increasing (flat on [1/2, 1]): congestion without any change of g, so the second 'iff' fails."""
    K = torch.tensor([[1.0, 0.8, 0.6], [0.8, 1.0, 0.9], [0.6, 0.9, 1.0]], dtype=DTYPE)
    _, bm, bg = mismatches(K, EXTRA["flat"])
    return search_record(
        RESULT,
        "g = max(0, 1/2 - x)^2: explicit instance",
        1,
        bg > 0 and bm == 0,
        float(bg),
        "i=2, j=0: k_02 = 0.6 < m_0 = 0.7 and m_0^(-2) = 0.8 > m_0, yet g(0.8) = g(0.7) = 0 "
        "(every mass is >= 1/2, where g is flat)",
        expect_found=True,
        metric="shaped-value mismatches",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Cor D.6."""
    sizes = (3, 4) if quick else (3, 4, 5, 6)
    return [
        check_general(),
        check_symbolic(sizes),
        check_general_vs_expansion(sizes),
        check_numeric(1_000 if quick else 10_000),
        check_property(50 if quick else 300),
        check_flat_g(),
    ]
