"""Thm 4.4 = D.3 (strict anti-redundancy).

Statement: for G >= 3 and t != i, with the kernel entry k(o_i, o_t) = k(o_t, o_i) varied as one variable,
    d s_i / d k(o_i, o_t) = (g'(m_i) + g'(m_t)) / (G (G-1)),
which is < 0 when g'(m_i) < 0 and g'(m_t) < 0 at the two masses. "g strictly decreasing" (Assumption C.1) is
not enough: g = -(x - 1/2)^3 is strictly decreasing, yet at G = 3 with all k = 1/2 both masses are 1/2, where
g' = 0, and the derivative is exactly 0. Assumption 4.1 (g non-increasing) only gives <= 0.
"""

from __future__ import annotations

import sympy as sp
import torch
from hypothesis import strategies as st

from setpo import local_mass, loo_credits, loo_credits_reference
from theory import general as GN
from theory import symbolic as S
from theory.instances import DTYPE, KERNELS, SHAPINGS, generator, kernel_batches, random_kernel, resolve, shaping_names
from theory.records import CheckRecord, count_record, error_record, record, search_record, sizes_scope
from theory.strategies import kernels, property_record, shapings

RESULT = "Thm 4.4 = D.3"
TOL = 1e-12
GENERAL_SCOPE = (
    "the derivative for every G >= 3, every pair (i, t != i) and a generic g; its sign (< 0) whenever "
    "g'(m_i), g'(m_t) < 0 (strictly decreasing g with g' < 0 at the two masses)"
)


def general_derivative() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(d s_i/d k_it of the definition, the printed (g'(m_i) + g'(m_t))/(G(G-1)), the variable k_it).

    Symbolic G, i = o_0, t = o_1; k_it is one symbol, so the derivative moves k(o_i,o_t) and k(o_t,o_i) together.
    """
    group, G = GN.Group(2), GN.G
    k_it = group.k(0, 1)
    printed = (S.gp(group.local_mass(0, {0, 1})) + S.gp(group.local_mass(1, {0, 1}))) / (G * (G - 1))
    return sp.diff(group.credit(0), k_it), printed, k_it


def check_general() -> CheckRecord:
    """The derivative of the definition equals the printed formula for a symbolic G >= 3; its sign for g' < 0."""
    derived, printed, _ = general_derivative()
    u, v = sp.symbols("u v", positive=True)  # -g'(m_i), -g'(m_t) > 0
    group = GN.Group(2)
    at = {S.gp(GN.reduce(group.local_mass(0, {0, 1}))): -u, S.gp(GN.reduce(group.local_mass(1, {0, 1}))): -v}
    negative = GN.positive_for_all_g(-GN.canonical_form(printed).xreplace(at))
    return GN.proof_record(
        RESULT,
        "d s_i/d k_it of the definition = (g'(m_i)+g'(m_t))/(G(G-1)), symbolic G, generic g",
        [GN.prove(derived, printed, "d s_i/d k_it = (g'(m_i) + g'(m_t))/(G(G-1))")],
        [("(g'(m_i) + g'(m_t))/(G(G-1)) < 0 when g'(m_i), g'(m_t) < 0", negative)],
    )


def check_general_vs_expansion(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """The general derivative and formula at G = sizes equal the explicit ones (i = 0, t = 1)."""
    derived, printed, _ = general_derivative()

    def explicit(G, _):
        K = S.kernel_matrix(G)
        return S.named_derivatives(sp.diff(S.credit(K, 0), K[0, 1]))

    def formula(G, _):
        K = S.kernel_matrix(G)
        m = [S.set_local_mass(K, a, range(G)) for a in (0, 1)]
        return (S.gp(m[0]) + S.gp(m[1])) / (G * (G - 1))

    pairs = [(derived, explicit), (printed, formula)]
    return GN.expansion_record(
        RESULT, "general-G derivative and formula = explicit expansion", GN.Group(2), pairs, sizes
    )


def predicted_derivative(K: torch.Tensor, g) -> torch.Tensor:
    """(g'(m_i) + g'(m_t)) / (G(G-1)) for every (i, t) pair, shape (..., G, G) (diagonal meaningless)."""
    G = K.shape[-1]
    dg = resolve(g).dg(local_mass(K))
    return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * (G - 1))


def autograd_derivative(K: torch.Tensor, g, reference: bool = False) -> torch.Tensor:
    """d s_i / d k_it along the symmetric direction E_it + E_ti, by autograd through the core; (..., G, G)."""
    fn = loo_credits_reference if reference else loo_credits
    K = K.detach().clone().requires_grad_(True)
    s = fn(K, resolve(g))
    rows = []
    for i in range(K.shape[-1]):
        (grad,) = torch.autograd.grad(s[..., i].sum(), K, retain_graph=True)
        rows.append(grad[..., i, :] + grad[..., :, i])  # d/dk_it of K[i,t] and K[t,i] together
    return torch.stack(rows, -2).detach()


def finite_difference(K: torch.Tensor, g, h: float = 1e-5) -> torch.Tensor:
    """Central difference of loo_credits_reference along E_it + E_ti, shape (..., G, G)."""
    G = K.shape[-1]
    out = torch.zeros_like(K)
    for i in range(G):
        for t in range(G):
            if t == i:
                continue
            E = torch.zeros(G, G, dtype=K.dtype)
            E[i, t] = E[t, i] = h
            plus, minus = loo_credits_reference(K + E, resolve(g)), loo_credits_reference(K - E, resolve(g))
            out[..., i, t] = (plus[..., i] - minus[..., i]) / (2 * h)
    return out


def _offdiag(x: torch.Tensor) -> torch.Tensor:
    G = x.shape[-1]
    mask = ~torch.eye(G, dtype=torch.bool)
    return x[..., mask]


def check_symbolic(sizes: tuple[int, ...] = (3, 4, 5, 6)) -> CheckRecord:
    """Differentiate the definition of s_i (generic g, symbolic kernel) by k_it: equals the printed formula."""
    cases, bad = 0, []
    for G in sizes:
        K = S.kernel_matrix(G)
        everyone = list(range(G))
        m = [S.set_local_mass(K, j, everyone) for j in everyone]
        for i in everyone:
            s_i = S.credit(K, i)
            for t in everyone:
                if t == i:
                    continue
                cases += 1
                derived = sp.diff(s_i, K[i, t])
                printed = (S.gp(m[i]) + S.gp(m[t])) / (G * (G - 1))
                if not S.is_identity(derived, printed):
                    bad.append((G, i, t))
    return count_record(
        RESULT,
        f"d s_i/d k_it of the definition = (g'(m_i)+g'(m_t))/(G(G-1)), G={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes),
    )


def check_numeric(
    total: int = 10_000, seed: int = 5, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """Printed derivative vs autograd through loo_credits and through the literal Algorithm 1."""
    worst, n = 0.0, 0
    for cell, K in kernel_batches(total, sizes, seed, shapings):
        pred = _offdiag(predicted_derivative(K, cell.shaping))
        for reference in (False, True):
            auto = _offdiag(autograd_derivative(K, cell.shaping, reference))
            worst = max(worst, float((auto - pred).abs().max()))
        n += cell.batch
    return error_record(
        RESULT,
        f"formula vs autograd of loo_credits and loo_credits_reference, kernels {KERNELS}, G={list(sizes)}",
        "numeric",
        n,
        [worst],
        TOL,
    )


def check_finite_difference(total: int = 1_000, seed: int = 6) -> CheckRecord:
    """Printed derivative vs a central difference (h = 1e-5) of the literal Algorithm 1: no autograd involved."""
    worst, n = 0.0, 0
    for cell, K in kernel_batches(total, (3, 5), seed, kernels=("cosine", "uniform")):
        K = K.clamp(1e-4, 1 - 1e-4)  # stay inside [0, 1] under the +-h step
        K.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        err = _offdiag(finite_difference(K, cell.shaping) - predicted_derivative(K, cell.shaping)).abs().max()
        worst = max(worst, float(err))
        n += cell.batch
    return error_record(
        RESULT, "formula vs central finite difference of loo_credits_reference", "numeric", n, [worst], 1e-8
    )


def largest_derivative(batches) -> tuple[float, int]:
    """(largest autograd d s_i/d k_it over every instance and pair, instances) of (cell, K) batches."""
    largest, n = -float("inf"), 0
    for cell, K in batches:
        largest, n = max(largest, float(_offdiag(autograd_derivative(K, cell.shaping)).max())), n + cell.batch
    return largest, n


def check_sign(
    total: int = 10_000, seed: int = 7, sizes: tuple[int, ...] = (3, 4, 6, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """Strictness: the largest autograd derivative over all instances and pairs is < 0 for strictly decreasing g."""
    largest, n = largest_derivative(kernel_batches(total, sizes, seed, shapings))
    check = f"d s_i/d k_it < 0 for every pair, g in {shaping_names(shapings)}"
    return record(RESULT, check, "numeric", n, "max derivative (must be < 0)", largest, largest < 0)


def check_against_core(points: int = 100, seed: int = 15) -> CheckRecord:
    """The sympy derivative of the definition (concrete g) at random kernels equals autograd through the core."""
    worst, n = 0.0, 0
    gen = generator(seed)
    for G in (3, 4):
        K = S.kernel_matrix(G)
        for name in SHAPINGS:
            exprs = [sp.diff(S.concrete(S.credit(K, 0), S.SYMPY_SHAPINGS[name]), K[0, t]) for t in range(1, G)]
            Kn = random_kernel("uniform", points, G, gen)
            sym = torch.from_numpy(S.evaluate(exprs, S.kernel_bindings(K, Kn.numpy())))
            worst = max(worst, float((sym - autograd_derivative(Kn, name)[:, 0, 1:]).abs().max()))
            n += points
    return error_record(
        RESULT, "sympy d s_0/d k_0t (concrete g) vs autograd of loo_credits, G=3,4", "numeric", n, [worst], TOL
    )


def check_property(examples: int = 300) -> CheckRecord:
    """Hypothesis: 1/16-grid kernels, G = 3..7, the four registered g: formula = autograd and < 0, all pairs."""

    def prop(case) -> None:
        K, g = case
        auto, pred = _offdiag(autograd_derivative(K, g)), _offdiag(predicted_derivative(K, g))
        err = float((auto - pred).abs().max())
        assert err <= TOL and float(auto.max()) < 0, f"error {err}, max {float(auto.max())}, g={g}, K={K.tolist()}"

    check = "hypothesis: formula and sign on 1/16-grid kernels"
    return property_record(RESULT, check, st.tuples(kernels(), shapings), prop, examples)


def _explicit(g_name: str, K: torch.Tensor) -> tuple[float, float]:
    """(autograd derivative, exact sympy derivative) of s_0 in k_01 at the kernel K, shaping `g_name`."""
    auto = float(autograd_derivative(K, g_name)[0, 1])
    G = K.shape[-1]
    Ks = S.kernel_matrix(G)
    exact = sp.diff(S.concrete(S.credit(Ks, 0), S.SYMPY_SHAPINGS[g_name]), Ks[0, 1])
    vals = {s: sp.nsimplify(float(K[a, b])) for s, a, b in S.entry_symbols(Ks)}
    return auto, float(exact.subs(vals))


def check_increasing_g() -> CheckRecord:
    """Dropping 'g non-increasing': with g = log(1+x) a more redundant pair earns a larger credit."""
    K = torch.tensor([[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]], dtype=DTYPE)
    auto, exact = _explicit("increasing", K)
    return search_record(
        RESULT,
        "g = log(1+x) (increasing): explicit instance",
        1,
        auto > 0 and exact > 0,
        auto,
        f"G=3, all k = 1/2: d s_0/d k_01 = {exact:.6f} (exact, = 2/(1.5*6)) > 0; autograd {auto:.6f}",
        expect_found=True,
        metric="d s_0/d k_01",
    )


def check_flat_g() -> CheckRecord:
    """Dropping strictness (Assumption 4.1 only): g flat on [1/2, 1] gives derivative exactly 0, not < 0."""
    K = torch.tensor([[1.0, 0.7, 0.6], [0.7, 1.0, 0.8], [0.6, 0.8, 1.0]], dtype=DTYPE)
    auto, exact = _explicit("flat", K)
    return search_record(
        RESULT,
        "g = max(0, 1/2 - x)^2 (non-increasing, flat): explicit instance",
        1,
        auto >= 0 and exact >= 0,
        auto,
        f"G=3, masses 0.65, 0.75, 0.7 >= 1/2: d s_0/d k_01 = {exact} (exact): strict sign needs g' < 0",
        expect_found=True,
        metric="d s_0/d k_01",
    )


def check_cubic_g() -> CheckRecord:
    """Strictly decreasing is not enough: g = -(x - 1/2)^3 with g'(1/2) = 0, G = 3, all k = 1/2: derivative 0."""
    K = torch.full((3, 3), 0.5, dtype=DTYPE)
    K.fill_diagonal_(1.0)
    auto = float(autograd_derivative(K, "cubic")[0, 1])
    pred = float(predicted_derivative(K, "cubic")[0, 1])
    return search_record(
        RESULT,
        "g = -(x - 1/2)^3 (strictly decreasing, g'(1/2) = 0): explicit instance",
        1,
        auto == 0 and pred == 0,
        auto,
        f"G=3, all k = 1/2, masses 1/2: d s_0/d k_01 = {auto} (autograd), {pred} (formula): the sign needs g' < 0 "
        "at the two masses, not only g strictly decreasing",
        expect_found=True,
        metric="d s_0/d k_01",
    )


def check_unclamped(total: int = 2_000, seed: int = 8) -> CheckRecord:
    """Dropping k in [0,1] (raw cosine in [-1,1]) with g strictly decreasing on R: the sign cannot flip."""
    batches = kernel_batches(total, (3, 5, 8), seed, shapings=("linear", "exp"), kernels=("cosine",), clamp=False)
    largest, n = largest_derivative(batches)
    return search_record(
        RESULT,
        "raw cosine kernel in [-1,1], g in [linear, exp] (decreasing on R)",
        n,
        largest >= 0,
        largest,
        "the derivative only needs g' < 0 at the two masses, whatever their range",
        expect_found=False,
        metric="max derivative",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Thm 4.4."""
    sizes = (3, 4) if quick else (3, 4, 5, 6)
    total = 1_000 if quick else 10_000
    return [
        check_general(),
        check_symbolic(sizes),
        check_general_vs_expansion(sizes),
        check_numeric(total),
        check_finite_difference(200 if quick else 1_000),
        check_sign(total),
        check_against_core(20 if quick else 100),
        check_property(50 if quick else 300),
        check_increasing_g(),
        check_flat_g(),
        check_cubic_g(),
        check_unclamped(500 if quick else 2_000),
    ]
