"""Kernel local mass and the set diversity D(S) of a finite group (paper eqs. 3-4)."""

from __future__ import annotations

import torch

from setpo._validate import as_float_tensor
from setpo.core._checks import check_group_at_least, check_kernel_values, check_square, compute_dtype
from setpo.core.shaping import Shaping, ShapingSpec, get_shaping


def validate_kernel(K, minimum: int, what: str) -> tuple[torch.Tensor, int]:
    """Return (K as a float tensor, G) after checking shape (..., G, G), G >= minimum, values finite in [-1, 1]
    and symmetry up to rounding (tolerances: `setpo.core._checks`).

    Input validation only: K comes back in its own dtype; callers compute in `compute_dtype(K.dtype)`.
    """
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    check_group_at_least(G, minimum, what)
    check_kernel_values(K)
    return K, G


def check_finite_output(out: torch.Tensor, g_name: str, what: str) -> torch.Tensor:
    """Raise a clear ValueError when g was evaluated outside its domain (e.g. -log(1+x) at x <= -1)."""
    if not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"{what} is not finite: shaping {g_name!r} is undefined at some local mass "
            "(negative similarities from an unclamped kernel?)"
        )
    return out


def unchecked_local_mass(K: torch.Tensor) -> torch.Tensor:
    """Eq. 3 without input validation, for callers that validated K already."""
    return (K.sum(-1) - K.diagonal(dim1=-2, dim2=-1)) / (K.shape[-1] - 1)


def unchecked_set_diversity(K: torch.Tensor, shaping: Shaping) -> torch.Tensor:
    """Eq. 4 without input validation (K already validated and in its compute dtype)."""
    return check_finite_output(shaping(unchecked_local_mass(K)).mean(-1), shaping.name, "D(S)")


def local_mass(K) -> torch.Tensor:
    """m_hat(o_j; S) = 1/(|S|-1) sum_{z != j} k(o_j, z), self excluded (paper eq. 3); (..., G, G) -> (..., G).

    Returned in K's dtype; float16/bfloat16 kernels are summed in float32.
    """
    K, _ = validate_kernel(K, 2, "the local mass")
    return unchecked_local_mass(K.to(compute_dtype(K.dtype))).to(K.dtype)


def set_diversity(K, shaping: ShapingSpec = "neglog1p") -> torch.Tensor:
    """D(S) = 1/|S| sum_{y in S} g(m_hat(y; S)) (paper eq. 4); (..., G, G) -> (...).

    Returned in K's dtype; float16/bfloat16 kernels are computed in float32.
    """
    fn = get_shaping(shaping)
    K, _ = validate_kernel(K, 2, "the local mass")
    return unchecked_set_diversity(K.to(compute_dtype(K.dtype)), fn).to(K.dtype)
