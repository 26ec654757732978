"""Thm 4.5 = D.4 (dominance ordering).

Statement: if k(o_r, o_j) <= k(o_c, o_j) for every j not in {r, c}, strictly for at least one j, then
s_r > s_c: a rollout whose similarities are pointwise below another's earns the larger credit.
Assumptions: G >= 3; g strictly decreasing (Assumption C.1). Under Assumption 4.1 alone (g only
non-increasing) the proof gives s_r >= s_c and strictness can fail (see the flat-g counterexample).
Proof route checked here: s_r - s_c = D(Omega minus o_c) - D(Omega minus o_r), and Lemma D.1 pairs every
shaped mass of one set with a no-smaller mass of the other.
"""

from __future__ import annotations

import sympy as sp
import torch
from hypothesis import strategies as st

from setpo import loo_credits, loo_credits_reference
from theory import general as GN
from theory import symbolic as S
from theory.instances import DTYPE, EXTRA, KERNELS, SHAPINGS, generator, kernel_batches, shaping_names
from theory.records import CheckRecord, count_record, record, search_record, sizes_scope
from theory.strategies import Dominance, dominance_instances, property_record, shapings

RESULT = "Thm 4.5 = D.4"
GENERAL_SCOPE = (
    "for every G >= 3: s_r - s_c = D(Omega-c) - D(Omega-r) = (1/(G-1)) [g(a_0) - g(b_0) + sum_j (g(a_j) - g(b_j))] "
    "with a_0 - b_0 = sum_j (k_rj - k_cj)/(G-2), a_j - b_j = (k_rj - k_cj)/(G-2); under dominance a_0 < b_0 (case "
    "split: G = 3, where the strict j* is the only other member, and G >= 4) and "
    "a_j <= b_j, and a positive g-difference plus non-negative ones over G-1 gives s_r > s_c. Not machine-checked: "
    "'a < b implies g(a) > g(b)', the definition of strictly decreasing g"
)


def general_pairs() -> dict[str, sp.Expr]:
    """The quantities of the proof for symbolic G, r = o_0, c = o_1, j the generic member of R.

    a_0 = m_r^(-c), b_0 = m_c^(-r), a_j = m_j^(-c), b_j = m_j^(-r).
    """
    group, j = GN.Group(2), GN.J
    return {
        "gap": group.credit(0) - group.credit(1),
        "D(-c) - D(-r)": group.diversity({0}) - group.diversity({1}),
        "a0": group.local_mass(0, {0}),
        "b0": group.local_mass(1, {1}),
        "aj": group.local_mass(j, {0}),
        "bj": group.local_mass(j, {1}),
    }


def check_general() -> CheckRecord:
    """s_r - s_c = D(Omega-c) - D(Omega-r) = paired g-differences, with the paired mass gaps, for symbolic G."""
    group, G, j = GN.Group(2), GN.G, GN.J
    q = general_pairs()
    paired = (S.g(q["a0"]) - S.g(q["b0"]) + group.rest_sum(S.g(q["aj"]) - S.g(q["bj"]))) / (G - 1)
    gap_0 = group.rest_sum(group.k(0, GN.Z) - group.k(1, GN.Z), GN.Z) / (G - 2)
    proofs = [
        GN.prove(q["gap"], q["D(-c) - D(-r)"], "s_r - s_c = D(Omega-c) - D(Omega-r)"),
        GN.prove(q["D(-c) - D(-r)"], paired, "D(Omega-c) - D(Omega-r) = (1/(G-1)) sum of paired g-differences"),
        GN.prove(q["a0"] - q["b0"], gap_0, "m_r^(-c) - m_c^(-r) = sum_j (k_rj - k_cj)/(G-2)"),
        GN.prove(
            q["aj"] - q["bj"], (group.k(0, j) - group.k(1, j)) / (G - 2), "m_j^(-c) - m_j^(-r) = (k_rj - k_cj)/(G-2)"
        ),
    ]
    # Dominance: delta_j = k_rj - k_cj <= 0 for j in R, < 0 at one j* (o_2 without loss of generality, split off).
    strict, delta = sp.Symbol("delta_*", negative=True), sp.IndexedBase("delta", nonpositive=True)
    a0_minus_b0 = (strict + sp.Sum(delta[j], (j, 3, G - 1))) / (G - 2)
    # g strictly decreasing: Delta_0 = g(a_0) - g(b_0) > 0 (a_0 < b_0), Delta_j = g(a_j) - g(b_j) >= 0 (a_j <= b_j).
    first, rest = sp.Symbol("Delta_0", positive=True), sp.IndexedBase("Delta", nonnegative=True)
    gap = (first + group.rest_sum(rest[j])) / (G - 1)
    facts = [
        ("1/(G-1) > 0 for G >= 3", GN.positive_for_all_g(1 / (G - 1))),
        ("1/(G-2) > 0 for G >= 3", GN.positive_for_all_g(1 / (G - 2))),
        # case split: for G = 3, j* is the only member of R and the remaining sum is empty
        ("under dominance m_r^(-c) - m_c^(-r) < 0: case G = 3", GN.positive_at(-a0_minus_b0, 3)),
        ("under dominance m_r^(-c) - m_c^(-r) < 0: case G >= 4", GN.positive_for_all_g(-a0_minus_b0, least=4)),
        ("then s_r - s_c = (Delta_0 + sum_j Delta_j)/(G-1) > 0", GN.positive_for_all_g(gap)),
    ]
    return GN.proof_record(RESULT, "paired-mass identity and the ordering, symbolic G, generic g", proofs, facts)


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """The general gap, D(Omega-c) - D(Omega-r) and paired masses at G = sizes equal the explicit ones (r=0, c=1)."""
    q = general_pairs()

    def without(G, drop):
        return [a for a in range(G) if a != drop]

    explicit = {
        "gap": lambda G, _: S.credit(S.kernel_matrix(G), 0) - S.credit(S.kernel_matrix(G), 1),
        "D(-c) - D(-r)": lambda G, _: (
            S.set_diversity(S.kernel_matrix(G), without(G, 1)) - S.set_diversity(S.kernel_matrix(G), without(G, 0))
        ),
        "a0": lambda G, _: S.set_local_mass(S.kernel_matrix(G), 0, without(G, 1)),
        "b0": lambda G, _: S.set_local_mass(S.kernel_matrix(G), 1, without(G, 0)),
        "aj": lambda G, j: S.set_local_mass(S.kernel_matrix(G), j, without(G, 1)),
        "bj": lambda G, j: S.set_local_mass(S.kernel_matrix(G), j, without(G, 0)),
    }
    pairs = [(q[name], explicit[name]) for name in q]
    return GN.expansion_record(
        RESULT, "general-G gap and paired masses = explicit expansion", GN.Group(2), pairs, sizes
    )


def impose_dominance(K: torch.Tensor, r: int, c: int, gen: torch.Generator, low: float = 0.0) -> torch.Tensor:
    """A copy of (B, G, G) K rewritten so o_c dominates o_r: k_rj <= k_cj for j not in {r, c}, strict for one j.

    About 30% of the j are exact ties; the strict j gets a gap of at least 1% of the range. `low` is the
    smallest kernel value (0 for clamped kernels, -1 for raw cosines). Binary kernels stay binary.
    """
    K = K.clone()
    B, G, _ = K.shape
    others = torch.tensor([j for j in range(G) if j not in (r, c)])
    kc = K[:, c, others]
    binary = bool(((K == 0) | (K == 1)).all())
    if binary:
        factor = torch.randint(0, 2, kc.shape, generator=gen).to(DTYPE)
    else:
        u = torch.rand(kc.shape, generator=gen, dtype=DTYPE)
        factor = torch.where(torch.rand(kc.shape, generator=gen) < 0.3, torch.ones_like(u), u)
    kr = low + (kc - low) * factor
    star = torch.randint(0, len(others), (B,), generator=gen)
    rows = torch.arange(B)
    if binary:
        kc[rows, star], kr[rows, star] = 1.0, 0.0
    else:
        kc[rows, star] = torch.maximum(kc[rows, star], torch.full((B,), low + 0.1 * (1 - low), dtype=DTYPE))
        kr[rows, star] = low + (kc[rows, star] - low) * 0.9 * torch.rand(B, generator=gen, dtype=DTYPE)
    K[:, c, others], K[:, others, c] = kc, kc
    K[:, r, others], K[:, others, r] = kr, kr
    return K


def credit_gap(K: torch.Tensor, r: int, c: int, g, reference: bool = False) -> torch.Tensor:
    """s_r - s_c from the core (closed form, or the literal Algorithm 1)."""
    s = (loo_credits_reference if reference else loo_credits)(K, g)
    return s[..., r] - s[..., c]


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """s_r - s_c = D(Omega minus o_c) - D(Omega minus o_r), and the paired mass differences are
    (k_rj - k_cj)/(G-2) summed (for o_r vs o_c) and (k_jr - k_jc)/(G-2) (for each other o_j): all <= 0
    under dominance, so every paired g-difference is >= 0 for non-increasing g (and one is > 0 for strict g)."""
    cases, bad = 0, []
    for G in sizes:
        K = S.kernel_matrix(G)
        everyone = list(range(G))
        r, c = 0, 1
        others = everyone[2:]
        no_c, no_r = [j for j in everyone if j != c], [j for j in everyone if j != r]
        cases += 1
        if not S.is_identity(S.credit(K, r) - S.credit(K, c), S.set_diversity(K, no_c) - S.set_diversity(K, no_r)):
            bad.append((G, "difference"))
        a0, b0 = S.set_local_mass(K, r, no_c), S.set_local_mass(K, c, no_r)
        if sp.expand(a0 - b0 - sp.Add(*[K[r, j] - K[c, j] for j in others]) / (G - 2)) != 0:
            bad.append((G, "pair r/c"))
        for j in others:
            cases += 1
            aj, bj = S.set_local_mass(K, j, no_c), S.set_local_mass(K, j, no_r)
            if sp.expand(aj - bj - (K[j, r] - K[j, c]) / (G - 2)) != 0:
                bad.append((G, f"pair {j}"))
    return count_record(
        RESULT,
        f"s_r - s_c = D(Omega-c) - D(Omega-r) with paired masses, G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


def check_numeric(
    total: int = 10_000, seed: int = 9, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """Random kernels rewritten to satisfy the hypothesis (random r, c; ties included): min s_r - s_c > 0."""
    smallest, n = float("inf"), 0
    gen = generator(seed + 1000)
    for cell, K in kernel_batches(total, sizes, seed, shapings):
        r, c = torch.randperm(cell.size, generator=gen)[:2].tolist()
        K = impose_dominance(K, r, c, gen)
        for reference in (False, True):
            smallest = min(smallest, float(credit_gap(K, r, c, cell.shaping, reference).min()))
        n += cell.batch
    check = (
        f"s_r > s_c under dominance (closed form and Algorithm 1), kernels {KERNELS}, g in {shaping_names(shapings)}"
    )
    return record(
        RESULT, f"{check}, G={list(sizes)}", "numeric", n, "min s_r - s_c (must be > 0)", smallest, smallest > 0
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: grid kernels with exact ties, any (r, c), the four registered g: s_r > s_c."""

    def prop(case: tuple[Dominance, str]) -> None:
        inst, g = case
        gap = float(credit_gap(inst.K, inst.r, inst.c, g))
        assert gap > 0, f"s_r - s_c = {gap} for g={g}, r={inst.r}, c={inst.c}, K={inst.K.tolist()}"

    check = "hypothesis: dominance on 1/16-grid kernels, G=3..7"
    return property_record(RESULT, check, st.tuples(dominance_instances(), shapings), prop, examples)


def check_flat_g() -> CheckRecord:
    """Assumption 4.1 alone (g non-increasing, flat on [1/2,1]): a strictly dominated rollout ties, s_r = s_c."""
    K = torch.tensor([[1.0, 0.8, 0.6], [0.8, 1.0, 0.9], [0.6, 0.9, 1.0]], dtype=DTYPE)  # r=0, c=1, j=2: 0.6 < 0.9
    gap = float(credit_gap(K, 0, 1, EXTRA["flat"]))
    return search_record(
        RESULT,
        "g = max(0, 1/2 - x)^2 (Assumption 4.1 only): explicit instance",
        1,
        gap <= 0,
        gap,
        "G=3, k_02 = 0.6 < k_12 = 0.9 but every (leave-one-out) mass is >= 1/2, so all credits are 0: "
        "strictness needs g strictly decreasing (Assumption C.1)",
        expect_found=True,
        metric="s_r - s_c",
    )


def dominated_gaps(total: int, sizes: tuple[int, ...], seed: int, low: float = 0.0, **batch_options) -> torch.Tensor:
    """s_r - s_c, o_0 dominated by o_1, on seeded random kernels rewritten to satisfy the hypothesis; (instances,)."""
    gen = generator(seed + 1000)
    batches = kernel_batches(total, sizes, seed, **batch_options)
    return torch.cat([credit_gap(impose_dominance(K, 0, 1, gen, low), 0, 1, cell.shaping) for cell, K in batches])


def check_increasing_g(total: int = 1_000, seed: int = 10) -> CheckRecord:
    """g increasing: the ordering reverses (s_r < s_c)."""
    gap = dominated_gaps(total, (3, 5), seed, shapings=("increasing",))
    reversed_ = int((gap <= 0).sum())
    return search_record(
        RESULT,
        "g = log(1+x) (increasing), random dominance instances",
        gap.numel(),
        reversed_ > 0,
        float(gap.max()),
        f"s_r <= s_c on {reversed_}/{gap.numel()} instances: the dominated rollout loses",
        expect_found=True,
        metric="max s_r - s_c",
    )


def check_unclamped(total: int = 2_000, seed: int = 11) -> CheckRecord:
    """Dropping k in [0,1] (raw cosine, dominance imposed within [-1,1]) with g decreasing on R: no use of the range."""
    gap = dominated_gaps(total, (3, 5, 8), seed, -1.0, shapings=("linear", "exp"), kernels=("cosine",), clamp=False)
    smallest = float(gap.min())
    return search_record(
        RESULT,
        "raw cosine kernel in [-1,1], g in [linear, exp]",
        gap.numel(),
        smallest <= 0,
        smallest,
        "the proof compares masses pairwise and never uses k >= 0",
        expect_found=False,
        metric="min s_r - s_c",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Thm 4.5."""
    sizes = (3, 4) if quick else (3, 4, 5, 6)
    return [
        check_general(),
        check_symbolic(sizes),
        check_general_vs_expansion(sizes),
        check_numeric(1_000 if quick else 10_000),
        check_property(50 if quick else 300),
        check_flat_g(),
        check_increasing_g(200 if quick else 1_000),
        check_unclamped(500 if quick else 2_000),
    ]
