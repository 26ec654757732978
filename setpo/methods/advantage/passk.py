"""Pass@k training (Chen et al. 2025, "Pass@k Training for Adaptively Balancing Exploration and Exploitation of Large
Reasoning Models", RUCAIBox/Passk_Training): the analytic pass@k advantage, replacing the GRPO advantage.

The formulas are those of the analytical derivation as the authors state it (their README and code/passk_adv.py).
"""

from __future__ import annotations

import numbers

import torch

from setpo._validate import check_int
from setpo.methods.batch import GroupBatch, check_real
from setpo.methods.registry import register_method


def _falling_ratio(top: torch.Tensor, bottom: int, terms: int) -> torch.Tensor:
    """prod_{i<terms} max(top - i, 0) / (bottom - i), the ratio C(top, terms) / C(bottom, terms); 1 for terms = 0."""
    i = torch.arange(terms, dtype=torch.float64, device=top.device)
    num = (top.to(torch.float64).unsqueeze(-1) - i).clamp_min(0.0)
    return (num / (bottom - i)).prod(-1)


def passk_advantages(correct: torch.Tensor, k: int, eps: float = 0.0) -> torch.Tensor:
    """A_pos = (1-rho)/sigma, A_neg = (1-rho-C(n-c-1,k-1)/C(n-1,k-1))/sigma, rho = 1-C(n-c,k)/C(n,k) (Pass@k analytic).

    ``correct`` (B, n) bool; returns (B, n) float64 advantages, sigma = sqrt(rho (1 - rho)). Where sigma = 0 (all
    correct, all wrong, or fewer than k wrong) every numerator is exactly 0 too and the advantages are 0.
    ``eps > 0`` divides by sigma + eps instead, as the public code does (eps = 1e-6); eps = 0 is the paper's form.
    """
    if correct.dtype != torch.bool or correct.dim() != 2:
        raise ValueError(f"correct must be a (B, n) bool mask, got {correct.dtype} {tuple(correct.shape)}")
    n = correct.shape[-1]
    check_int(k, f"k (at most the group size n = {n})", minimum=1, maximum=n, kind=numbers.Integral)
    eps = check_real(eps, "eps", minimum=0.0)
    k = int(k)
    c = correct.sum(-1)  # (B,)
    rho = 1.0 - _falling_ratio(n - c, n, k)
    # C(n-c-1, k-1) / C(n-1, k-1): the chance that the other k-1 of a k-subset holding a wrong rollout are all wrong.
    q = _falling_ratio(n - c - 1, n - 1, k - 1)
    sigma = (rho * (1.0 - rho)).clamp_min(0.0).sqrt()
    a_pos, a_neg = 1.0 - rho, 1.0 - rho - q
    if eps > 0:
        a_pos, a_neg = a_pos / (sigma + eps), a_neg / (sigma + eps)
    else:
        safe = torch.where(sigma > 0, sigma, torch.ones_like(sigma))
        a_pos = torch.where(sigma > 0, a_pos / safe, torch.zeros_like(sigma))
        a_neg = torch.where(sigma > 0, a_neg / safe, torch.zeros_like(sigma))
    return torch.where(correct, a_pos.unsqueeze(-1), a_neg.unsqueeze(-1))


@register_method(
    "passk",
    entry="advantage",
    needs=("correct",),
    citation="Chen et al. 2025, Pass@k Training for Adaptively Balancing Exploration and Exploitation of LRMs",
)
def passk_method(batch: GroupBatch, advantages: torch.Tensor, k: int = 4, eps: float = 0.0) -> torch.Tensor:
    """A_i = (1-rho)/sigma if correct else (1-rho-C(n-c-1,k-1)/C(n-1,k-1))/sigma (Pass@k analytic); replaces A_bar.

    The base advantages are ignored (only their dtype is kept): the analytic pass@k advantage replaces them.
    """
    return passk_advantages(batch.correct, k, eps).to(advantages.dtype)
