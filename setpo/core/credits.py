"""Leave-one-out SetPO credits s_i = D(Omega) - D(Omega \\ {o_i}) (paper eq. 5)."""

from __future__ import annotations

from typing import Literal

import torch

from setpo.core.diversity import (
    ShapingSpec,
    check_finite_output,
    set_diversity,
    unchecked_local_mass,
    validate_kernel,
)
from setpo.core.shaping import get_shaping

SmallGroupPolicy = Literal["raise", "zero"]


def _small_group(K, on_small_group: SmallGroupPolicy) -> torch.Tensor | None:
    if on_small_group not in ("raise", "zero"):
        raise ValueError(f"unknown on_small_group option {on_small_group!r}; use 'raise' or 'zero'")
    K_t = torch.as_tensor(K)
    if on_small_group == "zero" and K_t.dim() >= 2 and K_t.shape[-1] == K_t.shape[-2] and K_t.shape[-1] < 3:
        validate_kernel(K_t, 1, "the credits")
        return torch.zeros(K_t.shape[:-1], dtype=K_t.dtype, device=K_t.device)
    return None


def loo_credits(K, g: ShapingSpec = "neglog1p", on_small_group: SmallGroupPolicy = "raise") -> torch.Tensor:
    """All G credits s_i in O(G^2) via Lemma D.1, m_j^(-i) = m_j + (m_j - k(o_j,o_i))/(G-2); (..., G, G) -> (..., G).

    ``on_small_group="zero"`` returns zero credits for G < 3 (where D(Omega \\ {o_i}) is undefined)
    instead of raising.
    """
    early = _small_group(K, on_small_group)
    if early is not None:
        return early
    K, G = validate_kernel(K, 3, "the leave-one-out credits")
    shaping = get_shaping(g)
    m = unchecked_local_mass(K)  # (..., G), index j
    g_m = shaping(m)
    d_full = g_m.mean(-1, keepdim=True)
    # Mt[..., j, i] = m_j^(-i) = ((G-1) m_j - K[j, i]) / (G-2): one fused broadcast op over K's own layout.
    Mt = torch.sub(m.unsqueeze(-1) * ((G - 1) / (G - 2)), K, alpha=1.0 / (G - 2))
    # The diagonal (j = i) is not part of Omega \ {o_i}; put m_i there so g stays in its domain,
    # then remove exactly g(m_i) from the column sum.
    Mt.diagonal(dim1=-2, dim2=-1).copy_(m)
    d_loo = (shaping(Mt).sum(-2) - g_m) / (G - 1)
    return check_finite_output(d_full - d_loo, shaping.name, "the credits")


def loo_credits_reference(K, g: ShapingSpec = "neglog1p") -> torch.Tensor:
    """Literal Algorithm 1: recompute D(Omega \\ {o_i}) from the reduced kernel for every i (O(G^3) per group)."""
    K, G = validate_kernel(K, 3, "the leave-one-out credits")
    d_full = set_diversity(K, g)
    credits = []
    for i in range(G):
        keep = torch.tensor([j for j in range(G) if j != i], device=K.device)
        K_minus_i = K.index_select(-2, keep).index_select(-1, keep)
        credits.append(d_full - set_diversity(K_minus_i, g))
    return torch.stack(credits, dim=-1)
