"""Leave-one-out SetPO credits s_i = D(Omega) - D(Omega \\ {o_i}) (paper eq. 5)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from setpo.core._checks import (
    as_float_tensor,
    check_group_size,
    check_kernel_values,
    check_square,
    compute_dtype,
    kernel_violation,
)
from setpo.core.diversity import check_finite_output, set_diversity, unchecked_local_mass, unchecked_set_diversity
from setpo.core.kernels import ZeroNormPolicy, cosine_kernel
from setpo.core.shaping import Shaping, ShapingSpec, get_shaping

#: What to do with a group of G < 3, where D(Omega \ {o_i}) is undefined: raise, or give every member credit 0.
SmallGroupPolicy = Literal["raise", "zero"]
NEGLOG1P = get_shaping("neglog1p")

# Up to this G a CPU kernel is first copied to a batch-last (G, G, B) layout: every later pass (the symmetry check
# included) then runs over contiguous rows of B values instead of rows of G, which saves more than the copy costs
# (measured on one core: 5.4x instead of 11x one log1p pass at G = 6, 2.8x instead of 4x at G = 24).
BATCH_LAST_MAX_G = 31
CHUNK_ENTRIES = 1 << 17
BATCH_LAST_CHUNK_ENTRIES = 1 << 19  # bounds the copies; at B = 512 one chunk for every G it serves


def loo_credits(K, g: ShapingSpec = "neglog1p", on_small_group: SmallGroupPolicy = "raise") -> torch.Tensor:
    """All G credits s_i in O(G^2) via Lemma D.1, m_j^(-i) = m_j + (m_j - k(o_j,o_i))/(G-2); (..., G, G) -> (..., G).

    ``on_small_group="zero"`` returns zero credits for G < 3 (where D(Omega \\ {o_i}) is undefined)
    instead of raising. The kernel must be finite, in [-1, 1] and symmetric up to rounding. Credits come back in
    K's dtype; float16/bfloat16 kernels are computed in float32.

    For the paper's g = -log(1 + x) and a non-negative kernel, sum_{j != i} log(1 + m_j^(-i)) is evaluated as the
    log of a product of G - 1 factors in [1, 2]: G logs per group instead of G^2. Forming 1 + m rounds m to an
    absolute ulp, so float32 credits carry absolute errors up to about 1e-6 (about 2e-7 summing logs); float64
    agrees with Algorithm 1 to 1e-12 either way. Other shapings, negative kernels and inputs that need gradients
    take the general form.
    """
    check_small_group_policy(on_small_group)
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    if on_small_group == "zero" and G < 3:
        check_kernel_values(K)
        return torch.zeros(K.shape[:-1], dtype=K.dtype, device=K.device)
    check_group_size(G, 3, "the leave-one-out credits")
    shaping = get_shaping(g)
    out_dtype, Kc = K.dtype, K.to(compute_dtype(K.dtype))
    needs_grad = torch.is_grad_enabled() and Kc.requires_grad
    if shaping is not NEGLOG1P or needs_grad or Kc.numel() == 0:
        check_kernel_values(Kc, dtype=out_dtype)
        return _closed_form(Kc, shaping).to(out_dtype)
    if Kc.device.type == "cpu" and G <= BATCH_LAST_MAX_G:
        s = _neglog1p_batch_last(Kc, out_dtype)
        return (s if s is not None else _closed_form(Kc, shaping)).to(out_dtype)
    s = _neglog1p_product(Kc, out_dtype)
    return (s if s is not None else _closed_form(Kc, shaping)).to(out_dtype)


def check_small_group_policy(policy: object, name: str = "on_small_group") -> None:
    """Raise ValueError naming `name` unless `policy` is a `SmallGroupPolicy` ('raise' or 'zero')."""
    if policy not in ("raise", "zero"):
        raise ValueError(f"unknown {name} option {policy!r}; use 'raise' or 'zero'")


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
    each group (NaN where G < 3). Credits come back in the embeddings' dtype (16-bit: see `loo_credits`).
    """
    e = as_float_tensor(embeddings, "embeddings")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
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
    K = cosine_kernel(grouped, clamp=clamp, on_zero_norm=on_zero_norm)
    credits = loo_credits(K, shaping, on_small_group).reshape(e.shape[:-1])
    if not return_diversity:
        return credits
    if group_size < 3:
        return credits, torch.full(K.shape[:-2], float("nan"), dtype=K.dtype, device=K.device)
    return credits, set_diversity(K, shaping)


_LOG2_MAX = {dtype: math.log2(torch.finfo(dtype).max) for dtype in (torch.float32, torch.float64)}


def _product_fits(G: int, dtype: torch.dtype) -> bool:
    """A product of G - 1 factors in [1, 2 + rounding] stays finite in `dtype` (G <= 125 in float32)."""
    return G - 1 <= _LOG2_MAX[dtype] - 2


def _closed_form(K: torch.Tensor, shaping: Shaping) -> torch.Tensor:
    """Lemma D.1 for any g, in K's layout; K validated and in its compute dtype. Differentiable."""
    G = K.shape[-1]
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


def _neglog1p_product(K: torch.Tensor, given_dtype: torch.dtype) -> torch.Tensor | None:
    """Lemma D.1 with g = -log(1 + x): s_i = log prod_{j != i} (1 + m_j^(-i)) / (G-1) - mean_j log(1 + m_j).

    K in its compute dtype; validation included. None when K has negative entries or G is too large for the
    product, so the caller takes the general path. On CPU the passes over K run on chunks of about 2^17 entries,
    which stay in cache between passes; the (B, G) remainder runs once.
    """
    G = K.shape[-1]
    flat = K.reshape(-1, G, G)
    r_all = torch.empty(flat.shape[:-1], dtype=K.dtype, device=K.device)  # (G-1) m_j
    log_loo = torch.empty_like(r_all)  # prod_{j != i} (1 + m_j^(-i)), then its log
    size = max(1, CHUNK_ENTRIES // (G * G)) if K.device.type == "cpu" else max(1, flat.shape[0])
    for chunk, r, prod in zip(flat.split(size), r_all.split(size), log_loo.split(size)):
        if check_kernel_values(chunk, dtype=given_dtype) < 0 or not _product_fits(G, K.dtype):
            check_kernel_values(K, dtype=given_dtype)  # the chunks not seen yet
            return None
        torch.sum(chunk, -1, out=r).sub_(chunk.diagonal(dim1=-2, dim2=-1))
        # Y[..., j, i] = 1 + m_j^(-i) = 1 + (r_j - K[j, i]) / (G-2); the diagonal is no member of Omega \ {o_i}: 1.
        Y = torch.add(r.mul(1.0 / (G - 2)).add_(1.0).unsqueeze(-1), chunk, alpha=-1.0 / (G - 2))
        Y.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        torch.prod(Y, -2, out=prod)
    log_m = r_all.mul_(1.0 / (G - 1)).log1p_()  # log(1 + m_j) = -g(m_j)
    # log prod = sum_{j != i} log(1 + m_j^(-i)) = -(G-1) D(Omega \ {o_i})
    s = log_loo.log_().mul_(1.0 / (G - 1)).sub_(log_m.mean(-1, keepdim=True))
    return s.reshape(K.shape[:-1])


def _neglog1p_batch_last(K: torch.Tensor, given_dtype: torch.dtype) -> torch.Tensor | None:
    """`_neglog1p_product` on batch-last copies (G, G, b) of chunks of a CPU kernel, validation included.

    The copy makes K^T a permutation of the two leading dims, so the symmetry check is one contiguous pass, and every
    later pass runs along rows of b values. While (2G)^G stays finite (G <= 20 in float32) every factor is scaled by
    G - 2, (G-2) (1 + m_j^(-i)) = (G-2) + r_j - K[j, i] with r_j = (G-1) m_j, which saves two passes. None when K
    has negative entries (the caller takes the general path).
    """
    G = K.shape[-1]
    flat = K.reshape(-1, G * G)
    scaled = G * math.log2(2 * G) <= _LOG2_MAX[K.dtype] - 4
    parts = []
    size = max(1, BATCH_LAST_CHUNK_ENTRIES // (G * G))
    n = flat.shape[0]
    for start in range(0, n, size):  # narrow: Tensor.split and indexing cost microseconds, which count at small G
        chunk = flat if size >= n else flat.narrow(0, start, min(size, n - start))
        Kp = chunk.t().clone(memory_format=torch.contiguous_format).view(G, G, -1)  # Kp[j, i, b] = K[b, j, i]
        work = torch.sub(Kp, Kp.transpose(0, 1))  # antisymmetric: its max is max |K - K^T|
        lo, hi, asym = Kp.amin().item(), Kp.amax().item(), work.amax().item()  # amin + amax beat aminmax here
        kernel_violation(lo, hi, asym, given_dtype, K)
        if lo < 0:
            check_kernel_values(K, dtype=given_dtype)  # the chunks not seen yet
            return None
        if scaled:
            Kp.diagonal(dim1=0, dim2=1).fill_(G - 2)
            c = Kp.sum(1)  # (G, b): r_j + (G-2)
            Y = torch.sub(c.unsqueeze(1), Kp, out=work)  # Y[j, i] = (G-2) (1 + m_j^(-i)) for j != i
            Y.diagonal(dim1=0, dim2=1).fill_(G - 2)  # j = i is no member of Omega \ {o_i}: a factor (G-2) * 1
            log_loo = Y.prod(0).log_()  # sum_{j != i} log(1 + m_j^(-i)) + G log(G-2), (G, b), index i
            # log(c_j + 1) = log(1 + m_j) + log(G-1): the constant joins the one above.
            shift = c.add_(1.0).log_().mean(0).add_(G * math.log(G - 2) / (G - 1) - math.log(G - 1))
        else:
            Kp.diagonal(dim1=0, dim2=1).fill_(0.0)
            r = Kp.sum(1)  # (G, b): (G-1) m_j
            Y = torch.add(r.mul(1.0 / (G - 2)).add_(1.0).unsqueeze(1), Kp, alpha=-1.0 / (G - 2), out=work)
            Y.diagonal(dim1=0, dim2=1).fill_(1.0)
            log_loo = Y.prod(0).log_()  # sum_{j != i} log(1 + m_j^(-i))
            shift = r.mul_(1.0 / (G - 1)).log1p_().mean(0)  # mean_j log(1 + m_j)
        parts.append(log_loo.mul_(1.0 / (G - 1)).sub_(shift))  # (G, b)
    return (parts[0] if len(parts) == 1 else torch.cat(parts, 1)).t().reshape(K.shape[:-1])


def loo_credits_reference(K, g: ShapingSpec = "neglog1p") -> torch.Tensor:
    """Literal Algorithm 1: recompute D(Omega \\ {o_i}) from the reduced kernel for every i (O(G^3) per group).

    Same validation and dtype rules as `loo_credits`.
    """
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    check_group_size(G, 3, "the leave-one-out credits")
    shaping = get_shaping(g)
    check_kernel_values(K)
    Kc = K.to(compute_dtype(K.dtype))
    d_full = unchecked_set_diversity(Kc, shaping)
    credits = []
    for i in range(G):
        keep = torch.tensor([j for j in range(G) if j != i], device=K.device)
        K_minus_i = Kc.index_select(-2, keep).index_select(-1, keep)
        credits.append(d_full - unchecked_set_diversity(K_minus_i, shaping))
    return torch.stack(credits, dim=-1).to(K.dtype)
