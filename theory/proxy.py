"""Shared pieces of Lemma C.4 / Thm C.5 / Thm C.7: phi, the constants L, M, c_a, the remainder r and delta.

phi(m) = g(m) + m g'(m) (Lemma C.4); phi'(m) = 2 g'(m) + m g''(m), so the curvature condition
m g'' < -2 g' of Thm C.5 is exactly phi' < 0. Constants are taken on a 10,001-point grid of [0, 1]
with the core's g', g'' (exact for the registered g: their extremes sit at the endpoints, see Cor C.6).
"""

from __future__ import annotations

import torch

from setpo import influence
from theory.instances import DTYPE, resolve

GRID = torch.linspace(0.0, 1.0, 10_001, dtype=DTYPE)


def phi(g, m: torch.Tensor) -> torch.Tensor:
    """phi(m) = g(m) + m g'(m) (Lemma C.4)."""
    s = resolve(g)
    return s(m) + m * s.dg(m)


def phi_prime(g, m: torch.Tensor) -> torch.Tensor:
    """phi'(m) = 2 g'(m) + m g''(m)."""
    s = resolve(g)
    return 2 * s.dg(m) + m * s.d2g(m)


def lipschitz_dg(g) -> float:
    """L = max_{[0,1]} |g''|: a Lipschitz constant of g' on [0, 1] (Assumption C.1)."""
    return float(resolve(g).d2g(GRID).abs().max())


def max_abs_dg(g) -> float:
    """M = max_{[0,1]} |g'| (Thm C.7)."""
    return float(resolve(g).dg(GRID).abs().max())


def curvature_constant(g, a: torch.Tensor) -> torch.Tensor:
    """c_a = min_{m in [a, 1]} -phi'(m) (Thm C.5), on the grid point at or below a (never larger than the true c_a
    for a -phi' that is monotone between grid points)."""
    suffix_min = torch.flip(torch.cummin(torch.flip(-phi_prime(g, GRID), [0]), 0).values, [0])
    idx = torch.clamp((a * (len(GRID) - 1)).floor().long(), 0, len(GRID) - 1)
    return suffix_min[idx]


def remainder(p: torch.Tensor, K: torch.Tensor, g) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(m_P(tau), I~(tau; P), r_tau = I~ - phi(m_tau)) for every point tau, from the core's influence()."""
    inf = influence(p, K, resolve(g))
    return inf.local_mass, inf.uncentred, inf.uncentred - phi(g, inf.local_mass)


def smoothness_delta(p: torch.Tensor, K: torch.Tensor, m: torch.Tensor, above: torch.Tensor) -> torch.Tensor:
    """delta = max |m_P(y) - m_P(tau)| over support atoms y with k(y, tau) > `above` (0 if there are none).

    `above` has shape (B, n_tau, n_cand): for each tau a list of thresholds; returns the same shape.
    This is the smallest delta(tau, eta) of Assumption C.3 for eta just above each threshold (B_{tau,eta}
    restricted to the support of P, which is all the proof of Lemma C.4 uses).
    """
    k = K.mT.unsqueeze(-2)  # (B, tau, 1, y): k(y, tau)
    gap = (m.unsqueeze(-2) - m.unsqueeze(-1)).abs().unsqueeze(-2)  # (B, tau, 1, y)
    inside = (k > above.unsqueeze(-1)) & (p > 0).unsqueeze(-2).unsqueeze(-2)
    return torch.where(inside, gap, torch.zeros_like(gap)).amax(-1)
