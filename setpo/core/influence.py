"""Population quantities for a finite-support distribution P and the diversity influence function (Thm 4.2 / C.2)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from setpo.core._checks import as_float_tensor, check_finite, check_kernel_values, check_square
from setpo.core.shaping import ShapingSpec, get_shaping


def _validate(p, K) -> tuple[torch.Tensor, torch.Tensor]:
    p = as_float_tensor(p, "weights p")
    K = as_float_tensor(K, "kernel")
    N = check_square(K)
    if p.shape[-1:] != (N,) or p.shape[:-1] != K.shape[:-2]:
        raise ValueError(f"weights p shape {tuple(p.shape)} does not match kernel shape {tuple(K.shape)}")
    check_finite(p, "weights p")
    check_kernel_values(K)
    if p.dtype != K.dtype:
        raise ValueError(f"weights p ({p.dtype}) and kernel ({K.dtype}) must have the same dtype")
    if bool((p < 0).any()):
        raise ValueError("weights p must be non-negative")
    total = p.sum(-1)
    if not torch.allclose(total, torch.ones_like(total), atol=1e-6 if p.dtype == torch.float32 else 1e-10):
        raise ValueError(f"weights p must sum to 1 (got sums {total.flatten()[:4].tolist()}...)")
    return p, K


def population_local_mass(p, K) -> torch.Tensor:
    """m_P(y_a) = E_{y'~P}[k(y_a, y')] = sum_b K[a, b] p_b (paper Sec. 3, population local mass)."""
    p, K = _validate(p, K)
    return (K @ p.unsqueeze(-1)).squeeze(-1)


def population_diversity(p, K, shaping: ShapingSpec = "neglog1p") -> torch.Tensor:
    """F(P) = E_{y~P}[g(m_P(y))] (paper eq. 2)."""
    p, K = _validate(p, K)
    return (p * get_shaping(shaping)(population_local_mass(p, K))).sum(-1)


@dataclass(frozen=True)
class Influence:
    """Terms of Thm 4.2 for every support point tau (last dim indexes tau)."""

    local_mass: torch.Tensor  # m_P(tau), (..., N)
    F: torch.Tensor  # F(P), (...)
    novelty: torch.Tensor  # g(m_P(tau)), intrinsic novelty
    interaction: torch.Tensor  # E_P[g'(m_P(y)) k(y, tau)], interaction penalty (<= 0 for decreasing g)
    psi: torch.Tensor  # Psi(P) = F(P) + E_P[g'(m_P(y)) m_P(y)], independent of tau
    uncentred: torch.Tensor  # I~(tau; P) = novelty + interaction
    influence: torch.Tensor  # I(tau; P) = I~(tau; P) - Psi(P)


def influence(p, K, shaping: ShapingSpec = "neglog1p") -> Influence:
    """I(tau; P) = g(m_P(tau)) + E_P[g'(m_P(y)) k(y, tau)] - Psi(P) (Thm 4.2 = C.2, "Theorem 3.2")."""
    p, K = _validate(p, K)
    fn = get_shaping(shaping)
    m = population_local_mass(p, K)
    g_m = fn(m)
    w = p * fn.dg(m)  # p_a g'(m_a)
    F = (p * g_m).sum(-1)
    interaction = (w.unsqueeze(-2) @ K).squeeze(-2)  # sum_a p_a g'(m_a) K[a, tau]
    psi = F + (w * m).sum(-1)
    uncentred = g_m + interaction
    return Influence(m, F, g_m, interaction, psi, uncentred, uncentred - psi.unsqueeze(-1))
