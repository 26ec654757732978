"""Kernel local mass and the set diversity D(S) of a finite group (paper eqs. 3-4)."""

from __future__ import annotations

from typing import Union

import torch

from setpo.core._checks import as_float_tensor, check_finite, check_group_size, check_square
from setpo.core.shaping import Fn, Shaping, get_shaping

ShapingSpec = Union[str, Shaping, Fn]


def validate_kernel(K, minimum: int, what: str, check_values: bool = True) -> tuple[torch.Tensor, int]:
    """Return (K as a float tensor, G) after checking shape (..., G, G), G >= minimum and (optionally) finiteness."""
    K = as_float_tensor(K, "kernel")
    G = check_square(K)
    check_group_size(G, minimum, what)
    if check_values:
        check_finite(K, "kernel")
    return K, G


def unchecked_local_mass(K: torch.Tensor) -> torch.Tensor:
    """Eq. 3 without input validation, for callers that validated K already."""
    return (K.sum(-1) - K.diagonal(dim1=-2, dim2=-1)) / (K.shape[-1] - 1)


def local_mass(K) -> torch.Tensor:
    """m_hat(o_j; S) = 1/(|S|-1) sum_{z != j} k(o_j, z), self excluded (paper eq. 3); (..., G, G) -> (..., G)."""
    K, _ = validate_kernel(K, 2, "the local mass")
    return unchecked_local_mass(K)


def set_diversity(K, g: ShapingSpec = "neglog1p") -> torch.Tensor:
    """D(S) = 1/|S| sum_{y in S} g(m_hat(y; S)) (paper eq. 4); (..., G, G) -> (...)."""
    return get_shaping(g)(local_mass(K)).mean(-1)
