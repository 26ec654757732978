"""Kernel and group checks of the core functions (the generic ones are in `setpo._validate`)."""

from __future__ import annotations

import torch

from setpo._validate import as_float_tensor, check_finite

__all__ = ["as_float_tensor", "check_finite", "check_group_at_least", "check_kernel_values", "check_square"]

# 16-bit inputs are computed in float32: their own eps (2^-8 for bfloat16) turns credits of order 1e-4 into noise.
_EPS = {dtype: torch.finfo(dtype).eps for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the core computes in: float32 for float16/bfloat16 (any float under 32 bits), else the input's."""
    return torch.float32 if dtype.itemsize < 4 else dtype


def _eps(dtype: torch.dtype) -> float:
    eps = _EPS.get(dtype)
    return torch.finfo(dtype).eps if eps is None else eps


def range_tolerance(dtype: torch.dtype) -> float:
    """Rounding allowed outside [-1, 1]: 16 ulps of 1 in `dtype`."""
    return 16 * _eps(dtype)


def asymmetry_tolerance(dtype: torch.dtype) -> float:
    """Largest |K[i, j] - K[j, i]| accepted as rounding, for a kernel stored in `dtype`.

    64 ulps of 1 for float32/float64 (7.6e-6 and 1.4e-14): a dot product of length d accumulates about sqrt(d) ulps,
    so a kernel from an unsymmetrised Gram matrix passes up to d ~ 4096. 2 ulps for float16/bfloat16 (2e-3 and
    1.6e-2): their matmuls accumulate in float32 and round once, and 64 of their ulps would accept gross asymmetry.
    """
    return (2 if dtype.itemsize < 4 else 64) * _eps(dtype)


def kernel_violation(
    lo: float, hi: float, asym: float, dtype: torch.dtype, K: torch.Tensor, name: str = "kernel"
) -> None:
    """Raise the right ValueError from the reduced statistics of a kernel: its min, max and max |K - K^T|.

    Taking three numbers lets callers compute them in whatever fused pass suits their layout. NaN in any of them
    (NaN propagates through min/max) sends the diagnosis back to `K` to count NaN and inf.
    """
    tol = range_tolerance(dtype)
    if lo >= -1 - tol and hi <= 1 + tol and asym <= asymmetry_tolerance(dtype):
        return
    check_finite(K, name)
    if not (lo >= -1 - tol and hi <= 1 + tol):
        raise ValueError(
            f"{name} values must lie in [-1, 1] (similarities), got min {lo:.4g} and max {hi:.4g}; "
            "build it with setpo.cosine_kernel"
        )
    raise ValueError(
        f"{name} must be symmetric, k(o_i, o_j) = k(o_j, o_i): max |K - K^T| is {asym:.3g}, beyond the "
        f"rounding tolerance {asymmetry_tolerance(dtype):.2g} for {dtype}; build it with setpo.cosine_kernel "
        "or symmetrise it, (K + K.mT) / 2"
    )


def check_kernel_values(K: torch.Tensor, name: str = "kernel", dtype: torch.dtype | None = None) -> float:
    """Raise ValueError unless K (..., G, G) is finite, in [-1, 1] and symmetric up to rounding; return its min.

    `dtype` is the dtype the kernel was given in (the tolerances follow it), default K's own.
    """
    if K.numel() == 0:
        return 0.0
    # On CPU amin + amax take about 2/3 of one aminmax pass (torch 2.x, measured at 2^17 entries); on CUDA one kernel.
    lo, hi = (K.amin(), K.amax()) if K.device.type == "cpu" else torch.aminmax(K)
    asym = torch.sub(K, K.mT).amax() if K.shape[-1] > 1 else torch.zeros((), dtype=K.dtype)
    lo_v, hi_v, asym_v = lo.item(), hi.item(), asym.item()  # K - K^T is antisymmetric: its max is max |K - K^T|
    kernel_violation(lo_v, hi_v, asym_v, dtype or K.dtype, K, name)
    return lo_v


def check_square(K: torch.Tensor, name: str = "kernel") -> int:
    """Check `K` has shape (..., G, G) and return G."""
    if K.dim() < 2 or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"{name} must have shape (..., G, G), got {tuple(K.shape)}")
    return K.shape[-1]


def check_group_at_least(G: int, minimum: int, what: str) -> None:
    """Raise ValueError when a group is too small for `what` to be defined."""
    if G < minimum:
        raise ValueError(
            f"group size G={G} is too small: {what} needs G >= {minimum} "
            f"(the leave-one-out set Omega \\ {{o_i}} must keep at least 2 members for its local mass)"
            if minimum == 3
            else f"group size G={G} is too small: {what} needs G >= {minimum}"
        )
