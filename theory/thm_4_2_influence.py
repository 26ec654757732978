"""Thm 4.2 = C.2 ("Theorem 3.2", diversity influence function).

Statement: for P_eps = (1-eps) P + eps delta_tau,
    I(tau; P) = d/deps F(P_eps)|_{eps=0} = g(m_P(tau)) + E_{y~P}[g'(m_P(y)) k(y, tau)] - Psi(P),
    Psi(P) = F(P) + E_{y~P}[g'(m_P(y)) m_P(y)]  (independent of tau),
with intrinsic novelty g(m_P(tau)) and interaction penalty E_P[g'(m_P(y)) k(y, tau)] <= 0 for non-increasing g.
Supporting identities: m_{P_eps}(y) = m_P(y) + eps d_tau(y), d_tau(y) = k(y, tau) - m_P(y);
m_{P_eps}(tau) = m_P(tau) + eps (1 - m_P(tau)) (needs k(tau, tau) = 1); and the exact split
F(P_eps) - F(P) = eps (g(m_{P_eps}(tau)) - F(P)) + (1-eps) E_P[g(m_P(y) + eps d_tau(y)) - g(m_P(y))].
Assumption 4.1 (k symmetric in [0,1], g C^1 with bounded g'); P of finite support here.
Implied and checked too: E_{tau~P}[I(tau; P)] = 0.
"""

from __future__ import annotations

import sympy as sp
import torch

from setpo import influence, population_diversity, population_local_mass
from theory import symbolic as S
from theory.instances import (
    DTYPE,
    KERNELS,
    SHAPINGS,
    generator,
    population_batches,
    random_kernel,
    random_weights,
    resolve,
)
from theory.records import CheckRecord, count_record, error_record, record, search_record, sizes_scope

RESULT = "Thm 4.2 = C.2 (3.2)"
NO_GENERAL_PROOF = (
    "a statement about a distribution P, not a finite group: symbolic for fixed numbers N of atoms, "
    "not for a symbolic N"
)
TOL = 1e-12


def mixture(p: torch.Tensor, t: int, eps) -> torch.Tensor:
    """Weights of P_eps = (1-eps) P + eps delta_{y_t} on the same points."""
    e_t = torch.zeros_like(p)
    e_t[..., t] = 1.0
    return (1 - eps) * p + eps * e_t


def autograd_influence(p: torch.Tensor, K: torch.Tensor, g) -> torch.Tensor:
    """d/deps F(P_eps) at eps = 0 for every point tau (support or zero-weight), by autograd through the core."""
    out = []
    for t in range(p.shape[-1]):
        eps = torch.zeros(*p.shape[:-1], 1, dtype=p.dtype, requires_grad=True)
        (grad,) = torch.autograd.grad(population_diversity(mixture(p, t, eps), K, resolve(g)).sum(), eps)
        out.append(grad[..., 0])
    return torch.stack(out, -1)


def exact_split(p: torch.Tensor, K: torch.Tensor, g, t: int, eps: torch.Tensor) -> torch.Tensor:
    """Right-hand side of the exact split for tau = point t and eps of shape (..., 1); returns (...)."""
    shaping = resolve(g)
    m = population_local_mass(p, K)
    F = population_diversity(p, K, shaping)
    m_tau = m[..., t : t + 1]
    d = K[..., :, t] - m
    first = eps[..., 0] * (shaping(m_tau + eps * (1 - m_tau))[..., 0] - F)
    second = (1 - eps[..., 0]) * (p * (shaping(m + eps * d) - shaping(m))).sum(-1)
    return first + second


def _symbolic_case(N: int, outside: bool):
    """(derived derivative, printed formula, Psi part, kernel, tau index, weights) for N atoms."""
    eps = sp.Symbol("epsilon", nonnegative=True)
    p = S.weights(N)
    K = S.kernel_matrix(N + outside)
    tau = N if outside else 0
    derived = sp.diff(S.population_diversity(K, S.mixture(p, eps, None if outside else tau)), eps).subs(eps, 0)
    m = [S.population_mass(K, p, a) for a in range(N)]
    m_tau, F = S.population_mass(K, p, tau), S.population_diversity(K, p)
    interaction = sp.Add(*[p[a] * S.gp(m[a]) * K[a, tau] for a in range(N)])
    psi = F + sp.Add(*[p[a] * S.gp(m[a]) * m[a] for a in range(N)])
    return derived, S.g(m_tau) + interaction - psi, derived - S.g(m_tau) - interaction, K, tau, p


def check_symbolic(sizes: tuple[int, ...] = (1, 2, 3, 4)) -> CheckRecord:
    """Differentiate F((1-eps)P + eps delta_tau) for symbolic weights and kernel, generic g: the printed I.

    Also: the remainder after novelty and interaction (= -Psi) has no entry k(., tau), so Psi is tau-free.
    """
    cases, bad = 0, []
    for N in sizes:
        for outside in (False, True):
            derived, printed, psi_part, K, tau, _ = _symbolic_case(N, outside)
            cases += 1
            if not S.is_identity(derived, printed):
                bad.append((N, outside, "formula"))
            if outside and {K[a, tau] for a in range(N)} & S.canonical(S.named_derivatives(psi_part)).free_symbols:
                bad.append((N, outside, "Psi depends on tau"))
    return count_record(
        RESULT,
        f"d/deps F(P_eps) = printed I, tau in/out of support, N={list(sizes)} atoms",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes, "N") + " atoms",
    )


def check_symbolic_split(sizes: tuple[int, ...] = (1, 2, 3)) -> CheckRecord:
    """Exact split (all eps), m_{P_eps} = m_P + eps d_tau, m_{P_eps}(tau) = m + eps(1-m), and E_{tau~P} I = 0."""
    cases, bad = 0, []
    eps = sp.Symbol("epsilon", nonnegative=True)
    for N in sizes:
        p = S.weights(N)
        K = S.kernel_matrix(N + 1)
        tau = N
        w = S.mixture(p, eps)
        mass_eps = [S.population_mass(K, w, a) for a in range(N + 1)]
        m = [S.population_mass(K, p, a) for a in range(N + 1)]  # m[tau] = m_P(tau): p has N entries
        F, F_eps = S.population_diversity(K, p), S.population_diversity(K, w)
        d = [K[a, tau] - m[a] for a in range(N)]
        split = eps * (S.g(mass_eps[tau]) - F) + (1 - eps) * sp.Add(
            *[p[a] * (S.g(m[a] + eps * d[a]) - S.g(m[a])) for a in range(N)]
        )
        cases += 3 + N  # split, m_eps(tau), E_P I, and m_eps(y_a) for each atom
        if not S.is_identity(F_eps - F, split):
            bad.append((N, "split"))
        if any(sp.expand(mass_eps[a] - (m[a] + eps * d[a])) != 0 for a in range(N)):
            bad.append((N, "m_eps = m + eps d"))
        if sp.expand(mass_eps[tau] - (m[tau] + eps * (1 - m[tau]))) != 0:
            bad.append((N, "m_eps(tau)"))
        # E_{tau ~ P} I(tau; P) = 0 once the weights sum to 1.
        Ks = S.kernel_matrix(N)
        ms = [S.population_mass(Ks, p, a) for a in range(N)]
        psi = S.population_diversity(Ks, p) + sp.Add(*[p[a] * S.gp(ms[a]) * ms[a] for a in range(N)])
        mean_I = sp.Add(
            *[p[t] * (S.g(ms[t]) + sp.Add(*[p[a] * S.gp(ms[a]) * Ks[a, t] for a in range(N)]) - psi) for t in range(N)]
        )
        if S.canonical(mean_I.subs(p[-1], 1 - sp.Add(*p[:-1]))) != 0:
            bad.append((N, "E_P I"))
    return count_record(
        RESULT,
        f"exact split, mass identities and E_P[I] = 0, generic g, N={list(sizes)}",
        "symbolic",
        cases,
        bad,
        scope=sizes_scope(sizes, "N") + " atoms",
    )


def check_against_core(points: int = 200, seed: int = 20, shapings: tuple = SHAPINGS) -> CheckRecord:
    """The sympy-derived I (concrete g) at random (p, K) equals the core's influence(), N = 3, tau in support."""
    worst, n = 0.0, 0
    gen = generator(seed)
    N = 3
    for name in shapings:
        exprs, K, p = [], None, None
        for t in range(N):
            eps = sp.Symbol("epsilon", nonnegative=True)
            p = S.weights(N)
            K = S.kernel_matrix(N)
            F_eps = S.population_diversity(K, S.mixture(p, eps, t), S.SYMPY_SHAPINGS[name])
            exprs.append(sp.diff(F_eps, eps).subs(eps, 0))
        Kn = random_kernel("uniform", points, N, gen)
        pn = random_weights(points, N, gen)
        bindings = S.kernel_bindings(K, Kn.numpy()) | {p[a]: pn[:, a].numpy() for a in range(N)}
        sym = torch.from_numpy(S.evaluate(exprs, bindings))
        worst = max(worst, float((sym - influence(pn, Kn, name).influence).abs().max()))
        n += points
    return error_record(
        RESULT, "sympy derivative (concrete g) vs influence() at random P, N=3", "numeric", n, [worst], TOL
    )


def check_numeric(
    total: int = 10_000, seed: int = 21, sizes: tuple[int, ...] = (2, 3, 5, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """influence() vs autograd of population_diversity along P_eps, at every support point and 2 outside points."""
    worst, n = 0.0, 0
    for cell, K, p in population_batches(total, sizes, seed, shapings=shapings):
        auto = autograd_influence(p, K, cell.shaping)
        worst = max(worst, float((auto - influence(p, K, cell.shaping).influence).abs().max()))
        n += cell.batch
    return error_record(
        RESULT,
        f"influence() vs autograd d/deps F(P_eps), tau in and out of support, kernels {KERNELS}, N={list(sizes)}",
        "numeric",
        n,
        [worst],
        TOL,
    )


def check_identities(
    total: int = 10_000, seed: int = 22, sizes: tuple[int, ...] = (2, 3, 5, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """E_P[I] = 0, interaction <= 0, and the exact split at random eps in [0, 1] (core population functions)."""
    worst_mean, worst_split, largest_inter, n = 0.0, 0.0, -float("inf"), 0
    gen = generator(seed + 1000)
    for cell, K, p in population_batches(total, sizes, seed, shapings=shapings):
        inf = influence(p, K, cell.shaping)
        worst_mean = max(worst_mean, float((p * inf.influence).sum(-1).abs().max()))
        largest_inter = max(largest_inter, float(inf.interaction.max()))
        for t in range(p.shape[-1]):
            eps = torch.rand(cell.batch, 1, generator=gen, dtype=DTYPE)
            lhs = population_diversity(mixture(p, t, eps), K, cell.shaping) - inf.F
            worst_split = max(worst_split, float((lhs - exact_split(p, K, cell.shaping, t, eps)).abs().max()))
        n += cell.batch
    return record(
        RESULT,
        "E_P[I] = 0, interaction <= 0, exact split at random eps",
        "numeric",
        n,
        "max abs error",
        max(worst_mean, worst_split),
        max(worst_mean, worst_split) <= TOL and largest_inter <= TOL,
        f"|E_P I| <= {worst_mean:.1e}, split error {worst_split:.1e}, "
        f"max interaction {largest_inter:.2e} (must be <= 0)",
    )


def check_increasing_g(total: int = 1_000, seed: int = 23) -> CheckRecord:
    """g increasing: the formula still holds, but the 'interaction penalty' becomes a bonus (> 0)."""
    largest, worst, n = -float("inf"), 0.0, 0
    for cell, K, p in population_batches(total, (2, 4), seed, shapings=("increasing",)):
        inf = influence(p, K, cell.shaping)
        largest = max(largest, float(inf.interaction.max()))
        worst = max(worst, float((autograd_influence(p, K, cell.shaping) - inf.influence).abs().max()))
        n += cell.batch
    return search_record(
        RESULT,
        "g = log(1+x) (increasing): sign of the interaction term",
        n,
        largest > 0,
        largest,
        f"interaction > 0 (a redundancy bonus); the formula itself still matches autograd to {worst:.1e}",
        expect_found=True,
        metric="max interaction",
    )


def check_kernel_range(total: int = 2_000, seed: int = 24) -> CheckRecord:
    """Dropping k in [0,1] and k(tau,tau) = 1: the formula for I is unaffected; m_{P_eps}(tau) = m + eps(1-m) is not."""
    worst, worst_tau, n = 0.0, 0.0, 0
    gen = generator(seed + 1000)
    for cell, K, p in population_batches(
        total, (2, 4), seed, shapings=("linear", "exp"), kernels=("cosine",), clamp=False
    ):
        K = K.clone()
        K.diagonal(dim1=-2, dim2=-1).copy_(0.5 + 0.5 * torch.rand(cell.batch, K.shape[-1], generator=gen, dtype=DTYPE))
        worst = max(
            worst, float((autograd_influence(p, K, cell.shaping) - influence(p, K, cell.shaping).influence).abs().max())
        )
        t, eps = K.shape[-1] - 1, 0.5
        m = population_local_mass(p, K)[..., t]
        moved = population_local_mass(mixture(p, t, eps), K)[..., t]
        worst_tau = max(worst_tau, float((moved - (m + eps * (1 - m))).abs().max()))
        n += cell.batch
    return search_record(
        RESULT,
        "raw cosine in [-1,1], k(y,y) in [0.5,1]: formula for I",
        n,
        worst > TOL,
        worst,
        f"I needs neither k >= 0 nor k(tau,tau) = 1 (no k(tau,tau) term at eps = 0); the identity "
        f"m_Peps(tau) = m + eps(1-m) does need k(tau,tau) = 1 (off by up to {worst_tau:.2f})",
        expect_found=False,
        metric="max abs error",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Thm 4.2."""
    total = 1_000 if quick else 10_000
    return [
        check_symbolic((1, 2, 3) if quick else (1, 2, 3, 4)),
        check_symbolic_split((1, 2) if quick else (1, 2, 3)),
        check_against_core(20, shapings=("neglog1p",)) if quick else check_against_core(200),
        check_numeric(total),
        check_identities(total),
        check_increasing_g(200 if quick else 1_000),
        check_kernel_range(500 if quick else 2_000),
    ]
