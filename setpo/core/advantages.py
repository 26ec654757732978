"""Group-relative base advantages (GRPO / Dr.GRPO conventions) and the SetPO shaping A_bar + lambda s."""

from __future__ import annotations

import numbers
from typing import Literal

import torch

from setpo._validate import as_float_tensor, check_choice, check_finite, check_int, check_lambda, check_real
from setpo.core._checks import compute_dtype

__all__ = ["check_lambda", "check_overflow", "group_advantages", "setpo_advantages"]

RewardScale = Literal["group", "batch", "none"]


def group_advantages(rewards, group_size: int, scale: RewardScale = "group", eps: float = 1e-4) -> torch.Tensor:
    """A_bar_i = (r_i - mean_group r) / (std + eps) (GRPO; paper Sec. 2), rows grouped as G consecutive entries.

    ``scale="group"``: std of the prompt's group (GRPO); ``"batch"``: std of the whole batch
    (TRL's ``scale_rewards="batch"``); ``"none"``: no division (Dr.GRPO). std is the unbiased sample
    std, and ``eps`` defaults to TRL's 1e-4 (verl uses 1e-6). Input (..., N) with N divisible by G.

    float16/bfloat16 rewards are computed and returned in float32 (a bfloat16 advantage would carry 2^-9 relative
    rounding, larger than typical diversity credits). Rewards whose advantages overflow the dtype (e.g. |r| near
    float32's 3.4e38) raise ValueError instead of returning inf or NaN.
    """
    r = as_float_tensor(rewards, "rewards")
    if r.dim() == 0:
        raise ValueError("rewards must have at least one dimension (..., N)")
    check_int(group_size, "group_size (a group-relative baseline)", minimum=2, kind=numbers.Integral)
    if r.shape[-1] % group_size != 0:
        raise ValueError(f"number of rewards {r.shape[-1]} is not divisible by group_size {group_size}")
    check_choice(scale, "scale", ("group", "batch", "none"))
    check_real(eps, "eps", minimum=0, kind=numbers.Real)
    check_finite(r, "rewards")
    r = r.to(compute_dtype(r.dtype))
    group_size = int(group_size)
    grouped = r.reshape(*r.shape[:-1], -1, group_size)
    centred = grouped - grouped.mean(-1, keepdim=True)
    if scale != "none":
        std = grouped.std(-1, keepdim=True) if scale == "group" else r.std(-1, keepdim=True).unsqueeze(-1)
        check_overflow(std, "group_advantages (the std)", r)
        if eps == 0 and bool((std == 0).any()):
            raise ValueError("a group (or batch) has tied rewards, so its std is 0: use eps > 0 or scale='none'")
        centred = centred / (std + eps)
    out = centred.reshape(r.shape)
    check_overflow(out, "group_advantages", r)
    return out


def check_overflow(out: torch.Tensor, what: str, *inputs: torch.Tensor) -> None:
    """ValueError when `out`, computed from finite inputs, holds inf or NaN: the dtype overflowed."""
    if bool(torch.isfinite(out).all()):
        return
    largest = max(float(x.abs().amax()) if x.numel() else 0.0 for x in inputs)
    raise ValueError(
        f"{what} overflowed {out.dtype} (largest input magnitude {largest:.3g}, dtype max "
        f"{torch.finfo(out.dtype).max:.3g}): rescale the rewards or pass float64"
    )


def setpo_advantages(base_advantages, credits, lam: float) -> torch.Tensor:
    """A_hat_i = A_bar_i + lambda * s_i (paper eq. 6): added after base normalisation, s not centred or clipped.

    Returned in base_advantages' dtype, float32 for float16/bfloat16 ones (a bfloat16 sum would round away any
    lambda * s_i below 2^-9 |A_bar_i|). A sum that overflows the dtype raises ValueError.
    """
    a = as_float_tensor(base_advantages, "base_advantages")
    s = as_float_tensor(credits, "credits")
    if a.shape != s.shape:
        raise ValueError(f"base_advantages shape {tuple(a.shape)} and credits shape {tuple(s.shape)} differ")
    lam = check_lambda(lam)
    check_finite(a, "base_advantages")
    check_finite(s, "credits")
    dtype = compute_dtype(a.dtype)
    out = a.to(dtype) + lam * s.to(dtype)
    check_overflow(out, "setpo_advantages", a, s)
    return out
