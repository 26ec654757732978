"""Shaping functions g for D(S) = mean g(m) (paper eq. 4), kept in a small name registry.

Each entry carries g and its first two derivatives: the credits need g, the influence function
needs g' (Thm 4.2), and the curvature condition of Thm C.5 needs g''.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import torch

from setpo._validate import check_callable, check_choice, check_str

Fn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Shaping:
    """An elementwise shaping function g with derivatives g' and g''."""

    name: str
    g: Fn
    dg: Fn
    d2g: Fn

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.g(x)


#: What every function taking a shaping accepts: a registered name, a `Shaping`, or an elementwise callable.
ShapingSpec = Union[str, Shaping, Fn]

_REGISTRY: dict[str, Shaping] = {}


def register_shaping(name: str, g: Fn, dg: Fn, d2g: Fn) -> Shaping:
    """Register a shaping function under `name` (refuses to overwrite an existing name)."""
    check_str(name, "shaping name", blank=True)
    for fn, what in ((g, "g"), (dg, "dg"), (d2g, "d2g")):
        check_callable(fn, f"shaping {name!r}: {what}")
    if name in _REGISTRY:
        raise ValueError(f"shaping function {name!r} is already registered")
    _REGISTRY[name] = Shaping(name, g, dg, d2g)
    return _REGISTRY[name]


def available_shapings() -> list[str]:
    """Names accepted by `get_shaping`."""
    return sorted(_REGISTRY)


def _autograd_derivative(fn: Fn) -> Fn:
    """Elementwise derivative of an elementwise function by autograd (keeps the graph for higher orders)."""

    def d(x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            xr = x if x.requires_grad else x.detach().requires_grad_(True)
            y = fn(xr)
            if not y.requires_grad:  # fn ignores its input (e.g. the derivative of an affine g)
                return torch.zeros_like(x)
            (grad,) = torch.autograd.grad(y.sum(), xr, create_graph=True, allow_unused=True, materialize_grads=True)
        return grad if x.requires_grad else grad.detach()

    return d


_PROBE = torch.linspace(0.0, 1.0, 7, dtype=torch.float64)


def check_elementwise(g: Fn, name: str = "shaping") -> None:
    """ValueError unless g maps a tensor to one of its shape whose entries depend on the matching entry alone.

    Probed on 7 points of [0, 1]: g of the whole vector must equal g of each point alone and of the reversed vector
    reversed (a g such as x - x.mean() would otherwise turn D(S) = mean g(m) into a different functional silently).
    """
    try:
        whole = g(_PROBE)
        alone = torch.cat([torch.as_tensor(g(_PROBE[i : i + 1])).reshape(-1) for i in range(len(_PROBE))])
        reversed_ = g(_PROBE.flip(0))
    except Exception as err:  # any failure on a plain float64 tensor means a bad shaping
        raise ValueError(f"{name} g failed on a float64 tensor of 7 points in [0, 1]: {err}") from err
    if not isinstance(whole, torch.Tensor) or whole.shape != _PROBE.shape or alone.shape != _PROBE.shape:
        got = getattr(whole, "shape", whole)
        raise ValueError(f"{name} g must be elementwise: a tensor of shape (7,) gave {got!r}")
    same = torch.allclose(whole.double(), alone.double(), rtol=1e-6, atol=1e-9, equal_nan=True) and torch.allclose(
        whole.double(), torch.as_tensor(reversed_).double().flip(0), rtol=1e-6, atol=1e-9, equal_nan=True
    )
    if not same:
        raise ValueError(
            f"{name} g must be elementwise (g(x)[i] may depend on x[i] only), but its value at a point changes "
            "with the other entries of the tensor"
        )


def get_shaping(shaping: ShapingSpec = "neglog1p") -> Shaping:
    """Resolve a shaping spec: a registered name, a `Shaping`, or an elementwise callable (derivatives by autograd).

    A callable is probed once (`check_elementwise`): one that is not elementwise raises ValueError. A `Shaping`
    is trusted as given (its g, g', g'' are the caller's contract).
    """
    if isinstance(shaping, Shaping):
        return shaping
    if isinstance(shaping, str):
        return _REGISTRY[check_choice(shaping, "shaping function", available_shapings())]
    if callable(shaping):
        check_elementwise(shaping, f"shaping {getattr(shaping, '__name__', 'callable')!r}")
        dg = _autograd_derivative(shaping)
        return Shaping(getattr(shaping, "__name__", "callable"), shaping, dg, _autograd_derivative(dg))
    raise ValueError(f"shaping must be a name, a Shaping or a callable, got {type(shaping).__name__}")


# The paper's choice: g(x) = -log(1 + x) (Sec. 3, "diminishing marginal sensitivity"; Cor. C.6).
register_shaping(
    "neglog1p",
    g=lambda x: -torch.log1p(x),
    dg=lambda x: -1.0 / (1.0 + x),
    d2g=lambda x: 1.0 / (1.0 + x) ** 2,
)
# Linear g(x) = 1 - x (eq. 4 with linear g): D = 1 - mean pairwise similarity; g'' = 0, so Thm C.5's condition holds.
register_shaping(
    "linear",
    g=lambda x: 1.0 - x,
    dg=lambda x: -torch.ones_like(x),
    d2g=lambda x: torch.zeros_like(x),
)
# g(x) = exp(-x): strictly decreasing; the curvature condition of Thm C.5 (3.5), m g'' < -2 g', holds for m < 2.
register_shaping(
    "exp",
    g=lambda x: torch.exp(-x),
    dg=lambda x: -torch.exp(-x),
    d2g=lambda x: torch.exp(-x),
)
# g(x) = 1 / (1 + x): strictly decreasing; Thm C.5's curvature condition m g'' < -2 g' holds for every m >= 0.
register_shaping(
    "inverse",
    g=lambda x: 1.0 / (1.0 + x),
    dg=lambda x: -1.0 / (1.0 + x) ** 2,
    d2g=lambda x: 2.0 / (1.0 + x) ** 3,
)
