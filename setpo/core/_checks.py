"""Input validation shared by the core functions: clear errors instead of silent wrong numbers."""

from __future__ import annotations

import torch


def as_float_tensor(x, name: str) -> torch.Tensor:
    """Return `x` as a floating torch tensor (numpy/lists accepted), raising on integer or complex input."""
    if isinstance(x, (str, bytes)):
        raise ValueError(f"{name} must be a floating-point tensor, got {type(x).__name__}")
    t = torch.as_tensor(x)
    if not torch.is_floating_point(t):
        if t.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
        raise ValueError(f"{name} has unsupported dtype {t.dtype}")
    return t


def check_finite(t: torch.Tensor, name: str) -> None:
    """Raise ValueError naming `name` if `t` holds NaN or inf."""
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(bad.sum()) - n_nan
        raise ValueError(f"{name} contains {n_nan} NaN and {n_inf} inf value(s)")


def check_kernel_values(K: torch.Tensor, name: str = "kernel") -> None:
    """Raise ValueError unless every entry of K is finite and in [-1, 1] (a similarity; one min/max pass)."""
    if K.numel() == 0:
        return
    lo, hi = torch.aminmax(K)
    tol = 16 * torch.finfo(K.dtype).eps
    if bool(lo >= -1 - tol) and bool(hi <= 1 + tol):
        return
    check_finite(K, name)
    raise ValueError(
        f"{name} values must lie in [-1, 1] (similarities), got min {lo.item():.4g} and max {hi.item():.4g}; "
        "build it with setpo.cosine_kernel"
    )


def check_square(K: torch.Tensor, name: str = "kernel") -> int:
    """Check `K` has shape (..., G, G) and return G."""
    if K.dim() < 2 or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"{name} must have shape (..., G, G), got {tuple(K.shape)}")
    return K.shape[-1]


def check_group_size(G: int, minimum: int, what: str) -> None:
    """Raise ValueError when a group is too small for `what` to be defined."""
    if G < minimum:
        raise ValueError(
            f"group size G={G} is too small: {what} needs G >= {minimum} "
            f"(the leave-one-out set Omega \\ {{o_i}} must keep at least 2 members for its local mass)"
            if minimum == 3
            else f"group size G={G} is too small: {what} needs G >= {minimum}"
        )
