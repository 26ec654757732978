"""Lemma C.4 ("Lemma 3.4", proxy reduction with explicit remainder).

Statement: under Assumption C.1 (k symmetric in [0,1]; g strictly decreasing, g' L-Lipschitz on [0,1])
and Assumption C.3 at a threshold eta in (0,1),
    I~(tau; P) = phi(m_tau) + r_tau,   phi(m) = g(m) + m g'(m),   m_tau = m_P(tau),
    |r_tau| <= L (delta(tau, eta) m_tau + eta).
Derivation checked symbolically: r_tau = E_P[(g'(m_P(y)) - g'(m_tau)) k(y, tau)].
The numeric check takes, for each tau, the tightest bound over all eta in (0,1) (the infimum sits just
above a kernel value k(y, tau), where B_{tau,eta} loses a point) with the smallest admissible delta.
"""

from __future__ import annotations

import functools

import sympy as sp
import torch

from theory import symbolic as S
from theory.instances import DTYPE, KERNELS, SHAPINGS, population_batches, resolve
from theory.proxy import lipschitz_dg, remainder, smoothness_delta
from theory.records import CheckRecord, Verdict, error_record, search_record, sizes_scope, slack_record, timed

RESULT = "Lemma C.4 (3.4)"
NO_GENERAL_PROOF = (
    "a statement about a distribution P, not a finite group: symbolic for fixed numbers N of atoms, "
    "not for a symbolic N"
)


def tightest_bound(p: torch.Tensor, K: torch.Tensor, m: torch.Tensor, L: float) -> torch.Tensor:
    """min over eta in (0,1) of L (delta(tau, eta) m_tau + eta), for every tau: (B, n)."""
    cand = torch.cat([torch.zeros(*K.shape[:-1], 1, dtype=DTYPE), K.mT], -1)  # (B, tau, 1 + y)
    delta = smoothness_delta(p, K, m, cand)
    bound = L * (delta * m.unsqueeze(-1) + cand)
    return torch.where(cand < 1, bound, torch.full_like(bound, float("inf"))).amin(-1)


@timed
def check_symbolic(sizes: tuple[int, ...] = (1, 2, 3, 4)) -> CheckRecord:
    """I~(tau) - phi(m_tau) = sum_a p_a (g'(m_a) - g'(m_tau)) k(y_a, tau), generic g, tau in/out of support."""
    cases, bad = 0, []
    for N in sizes:
        for outside in (False, True):
            p = S.weights(N)
            K = S.kernel_matrix(N + 1 if outside else N)
            tau = N if outside else 0
            m = [S.population_mass(K, p, a) for a in range(N)]
            m_tau = sp.Add(*[p[b] * K[tau, b] for b in range(N)])
            uncentred = S.g(m_tau) + sp.Add(*[p[a] * S.gp(m[a]) * K[a, tau] for a in range(N)])
            phi = S.g(m_tau) + m_tau * S.gp(m_tau)
            r = sp.Add(*[p[a] * (S.gp(m[a]) - S.gp(m_tau)) * K[a, tau] for a in range(N)])
            cases += 1
            if not S.is_identity(uncentred - phi, r):
                bad.append((N, outside))
    return error_record(
        RESULT,
        f"r_tau = E_P[(g'(m_y) - g'(m_tau)) k(y,tau)], generic g, N={list(sizes)}",
        "symbolic",
        cases,
        [float(len(bad))],
        0,
        metric="non-identities",
        detail=f"failed: {bad}" if bad else "",
        scope=sizes_scope(sizes, "N") + " atoms",
    )


@functools.lru_cache(maxsize=4)
def _sweep(
    total: int,
    seed: int,
    sizes: tuple[int, ...],
    shapings: tuple,
    kernels: tuple = KERNELS,
    clamp=True,
    L_override: float | None = None,
):
    """(instances, per-cell min slack, ratios |r|/bound where bound > 0, violations with m_tau < 0, with m_tau >= 0)."""
    slack, ratios, n, neg, nonneg = [], [], 0, 0, 0
    for cell, K, p in population_batches(total, sizes, seed, shapings=shapings, kernels=kernels, clamp=clamp):
        L = lipschitz_dg(cell.shaping) if L_override is None else L_override
        m, _, r = remainder(p, K, cell.shaping)
        bound = tightest_bound(p, K, m, L)
        slack.append((bound - r.abs()).min())
        pos = bound > 1e-12
        ratios.append(r.abs()[pos] / bound[pos])
        bad = bound - r.abs() < -1e-12
        neg, nonneg = neg + int((bad & (m < 0)).sum()), nonneg + int((bad & (m >= 0)).sum())
        n += cell.batch
    return n, torch.stack(slack), torch.cat(ratios), neg, nonneg


@timed
def check_numeric(
    total: int = 10_000, seed: int = 40, sizes: tuple[int, ...] = (2, 3, 5, 8), shapings: tuple = SHAPINGS
) -> CheckRecord:
    """|r_tau| <= L (delta m_tau + eta) at the tightest eta, every tau (support and outside), random P."""
    n, slack, *_ = _sweep(total, seed, sizes, tuple(shapings))
    names = [s if isinstance(s, str) else s.name for s in shapings]
    return slack_record(
        RESULT, f"|r| <= L(delta m + eta) at the best eta, kernels {KERNELS}, g in {names}", "numeric", n, slack, 1e-12
    )


@timed
def check_tightness(total: int = 10_000, seed: int = 40, sizes: tuple[int, ...] = (2, 3, 5, 8)) -> CheckRecord:
    """How tight: |r_tau| / (tightest bound), over the same instances (g with L > 0)."""
    n, _, ratios, *_ = _sweep(total, seed, sizes, SHAPINGS)  # linear has L = 0: no ratio
    q = torch.quantile(ratios, torch.tensor([0.5, 0.9], dtype=DTYPE))
    return CheckRecord(
        RESULT,
        "tightness |r| / L(delta m + eta) at the best eta",
        "tightness",
        n,
        "max ratio",
        float(ratios.max()),
        Verdict.INFO,
        detail=f"median {float(q[0]):.3f}, 90th percentile {float(q[1]):.3f} over {ratios.numel()} taus",
    )


@timed
def check_unclamped(total: int = 2_000, seed: int = 41) -> CheckRecord:
    """Dropping k >= 0 (raw cosine in [-1,1]), g = exp(-x) with L = e (its Lipschitz constant on [-1,1])."""
    n, slack, _, neg, nonneg = _sweep(
        total,
        seed,
        (2, 3, 5, 8),
        ("exp",),
        kernels=("cosine",),
        clamp=False,
        L_override=float(resolve("exp").d2g(torch.tensor(-1.0, dtype=DTYPE))),
    )
    worst = float(slack.min())
    return search_record(
        RESULT,
        "raw cosine in [-1,1], g = exp(-x), L = e",
        n,
        worst < -1e-12,
        worst,
        f"violated at {neg} taus with m_tau < 0 and {nonneg} with m_tau >= 0 (the proof bounds "
        "E_P[k 1_B] by m_tau, which needs k >= 0)",
        expect_found=None,
        metric="min slack",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Lemma C.4."""
    total = 1_000 if quick else 10_000
    return [
        check_symbolic((1, 2, 3) if quick else (1, 2, 3, 4)),
        check_numeric(total),
        check_tightness(total),
        check_unclamped(500 if quick else 2_000),
    ]
