"""Leave-one-out SetPO credits s_i = D(Omega) - D(Omega \\ {o_i}) (paper eq. 5)."""

from __future__ import annotations

from typing import Literal

import torch

from setpo._validate import as_float_tensor, check_choice, check_int
from setpo.core._checks import check_group_at_least, check_kernel_values, check_square, compute_dtype
from setpo.core.diversity import check_finite_output, set_diversity, unchecked_local_mass, unchecked_set_diversity
from setpo.core.kernels import ZeroNormPolicy, cosine_kernel
from setpo.core.shaping import Shaping, ShapingSpec, get_shaping

#: What to do with a group of G < 3, where D(Omega \ {o_i}) is undefined: raise, or give every member credit 0.
SmallGroupPolicy = Literal["raise", "zero"]


def loo_credits(K, shaping: ShapingSpec = "neglog1p", on_small_group: SmallGroupPolicy = "raise") -> torch.Tensor:
    """All G credits s_i in O(G^2) via Lemma D.1, m_j^(-i) = m_j + (m_j - k(o_j,o_i))/(G-2); (..., G, G) -> (..., G).

    The kernel must be finite, in [-1, 1] and symmetric up to rounding. The credits are computed in at least float32
    (a float16 / bfloat16 kernel is upcast to float32 first) and returned in K's dtype. ``on_small_group="zero"``
    returns zero credits for G < 3 (where D(Omega \\ {o_i}) is undefined) instead of raising.
    """
    check_small_group_policy(on_small_group)
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    if on_small_group == "zero" and G < 3:
        check_kernel_values(K)
        return torch.zeros(K.shape[:-1], dtype=K.dtype, device=K.device)
    check_group_at_least(G, 3, "the leave-one-out credits")
    g = get_shaping(shaping)
    check_kernel_values(K)
    return _closed_form(K.to(compute_dtype(K.dtype)), g).to(K.dtype)


def check_small_group_policy(policy: object, name: str = "on_small_group") -> None:
    """Raise ValueError naming `name` unless `policy` is a `SmallGroupPolicy` ('raise' or 'zero')."""
    check_choice(policy, f"{name} option", ("raise", "zero"))


def _closed_form(K: torch.Tensor, g: Shaping) -> torch.Tensor:
    """Lemma D.1 for any g: s_i = mean_j g(m_j) - sum_{j != i} g(m_j^(-i)) / (G-1). K validated. Differentiable."""
    G = K.shape[-1]
    m = unchecked_local_mass(K)  # (..., G), index j
    g_m = g(m)
    d_full = g_m.mean(-1, keepdim=True)
    # Mt[..., j, i] = m_j^(-i) = ((G-1) m_j - K[j, i]) / (G-2): one fused broadcast op over K's own layout.
    Mt = torch.sub(m.unsqueeze(-1) * ((G - 1) / (G - 2)), K, alpha=1.0 / (G - 2))
    # The diagonal (j = i) is not part of Omega \ {o_i}; put m_i there so g stays in its domain,
    # then remove exactly g(m_i) from the column sum.
    Mt.diagonal(dim1=-2, dim2=-1).copy_(m)
    d_loo = (g(Mt).sum(-2) - g_m) / (G - 1)
    return check_finite_output(d_full - d_loo, g.name, "the credits")


def group_credits(
    embeddings,
    group_size: int,
    *,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
    on_small_group: SmallGroupPolicy = "raise",
    on_zero_norm: ZeroNormPolicy = "isolate",
    return_diversity: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Credits s_i (eq. 5) of groups of `group_size` rows: cosine kernel (Sec. 3), then `loo_credits` (Lemma D.1).

    ``embeddings`` (B * G, d), G = `group_size` consecutive rows per group, gives (B * G,) credits; (B, G, d) gives
    (B, G). With ``return_diversity`` the result is ``(credits, D)``, D (B,) the set diversity D(Omega) (eq. 4) of
    each group (NaN where G < 3). Computed in at least float32, returned in the embeddings' dtype.
    """
    e = as_float_tensor(embeddings, "embeddings")
    check_int(group_size, "group_size", minimum=1)
    if e.dim() == 2:
        if e.shape[0] % group_size != 0:
            raise ValueError(f"{e.shape[0]} embedding rows are not divisible by the group size {group_size}")
        grouped = e.reshape(e.shape[0] // group_size, group_size, e.shape[1])
    elif e.dim() == 3 and e.shape[1] == group_size:
        grouped = e
    else:
        raise ValueError(
            f"embeddings must have shape (B * G, d) or (B, G, d) with G = {group_size}, got {tuple(e.shape)}"
        )
    K = cosine_kernel(grouped.to(compute_dtype(e.dtype)), clamp=clamp, on_zero_norm=on_zero_norm)
    credits = loo_credits(K, shaping, on_small_group).reshape(e.shape[:-1]).to(e.dtype)
    if not return_diversity:
        return credits
    if group_size < 3:
        return credits, torch.full(K.shape[:-2], float("nan"), dtype=e.dtype, device=K.device)
    return credits, set_diversity(K, shaping).to(e.dtype)


def loo_credits_reference(K, shaping: ShapingSpec = "neglog1p") -> torch.Tensor:
    """Literal Algorithm 1: recompute D(Omega \\ {o_i}) from the reduced kernel for every i (O(G^3) per group).

    Same validation and dtype rules as `loo_credits`.
    """
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    check_group_at_least(G, 3, "the leave-one-out credits")
    g = get_shaping(shaping)
    check_kernel_values(K)
    Kc = K.to(compute_dtype(K.dtype))
    d_full = unchecked_set_diversity(Kc, g)
    credits = []
    for i in range(G):
        keep = torch.tensor([j for j in range(G) if j != i], device=K.device)
        K_minus_i = Kc.index_select(-2, keep).index_select(-1, keep)
        credits.append(d_full - unchecked_set_diversity(K_minus_i, g))
    return torch.stack(credits, dim=-1).to(K.dtype)
