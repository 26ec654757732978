"""Shaping registry: g, g', g'' consistent (finite differences, autograd), paper's conditions, registry errors."""

from __future__ import annotations

import math

import pytest
import torch
from strategies import REGISTERED_SHAPINGS, user_shaping

from setpo import Shaping, available_shapings, get_shaping, register_shaping
from setpo.core import shaping as shaping_module

X = torch.linspace(0.0, 1.0, 101, dtype=torch.float64)
H = 1e-5

# Closed forms written out independently of setpo, per element, with the math module.
CLOSED_FORMS = {
    "neglog1p": (lambda x: -math.log1p(x), lambda x: -1.0 / (1.0 + x), lambda x: 1.0 / (1.0 + x) ** 2),
    "linear": (lambda x: 1.0 - x, lambda x: -1.0, lambda x: 0.0),
    "exp": (lambda x: math.exp(-x), lambda x: -math.exp(-x), lambda x: math.exp(-x)),
    "inverse": (lambda x: 1.0 / (1.0 + x), lambda x: -1.0 / (1.0 + x) ** 2, lambda x: 2.0 / (1.0 + x) ** 3),
}


def central_difference(f, x: torch.Tensor, h: float = H) -> torch.Tensor:
    """(f(x + h) - f(x - h)) / 2h, error O(h^2)."""
    return (f(x + h) - f(x - h)) / (2 * h)


def test_registry_holds_the_documented_shapings():
    assert set(REGISTERED_SHAPINGS) <= set(available_shapings())
    assert available_shapings() == sorted(available_shapings())


@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_registered_values_match_closed_forms(name):
    s = get_shaping(name)
    assert isinstance(s, Shaping) and s.name == name
    for fn, ref in zip((s.g, s.dg, s.d2g), CLOSED_FORMS[name]):
        out = fn(X)
        assert out.dtype == torch.float64 and out.shape == X.shape
        torch.testing.assert_close(out, torch.tensor([ref(float(x)) for x in X], dtype=torch.float64))
    assert torch.equal(s(X), s.g(X))


@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_derivatives_match_central_differences(name):
    s = get_shaping(name)
    torch.testing.assert_close(s.dg(X), central_difference(s.g, X), rtol=0, atol=1e-9)
    torch.testing.assert_close(s.d2g(X), central_difference(s.dg, X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_paper_conditions_hold_on_unit_interval(name):
    """Assumption 4.1 / C.1: g strictly decreasing, |g'| bounded; Thm C.5: m g''(m) < -2 g'(m) on (0, 1]."""
    s = get_shaping(name)
    assert bool((s.dg(X) < 0).all())
    assert bool((s.g(X[1:]) < s.g(X[:-1])).all())
    m = X[1:]
    assert bool((m * s.d2g(m) < -2.0 * s.dg(m)).all())


def test_neglog1p_phi_derivative_cor_c6():
    """Cor C.6: phi(m) = g(m) + m g'(m) has phi'(m) = -(m + 2) / (1 + m)^2 for g = -log(1 + m)."""
    s = get_shaping("neglog1p")

    def phi(m):
        return s.g(m) + m * s.dg(m)

    torch.testing.assert_close(central_difference(phi, X), -(X + 2) / (1 + X) ** 2, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_callable_derivatives_by_autograd_match_registered(name):
    """The same g given as a bare callable: autograd g', g'' equal the analytic ones."""
    analytic = get_shaping(name)
    from_callable = get_shaping(analytic.g)
    torch.testing.assert_close(from_callable.g(X), analytic.g(X), rtol=0, atol=0)
    torch.testing.assert_close(from_callable.dg(X), analytic.dg(X), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(from_callable.d2g(X), analytic.d2g(X), rtol=1e-14, atol=1e-14)


def test_user_callable_derivatives():
    s = get_shaping(user_shaping)
    assert s.name == "user_shaping"
    torch.testing.assert_close(s.dg(X), -1.0 / (2.0 + X) ** 2, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(s.d2g(X), 2.0 / (2.0 + X) ** 3, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(s.dg(X), central_difference(s.g, X), rtol=0, atol=1e-9)


def test_callable_second_derivative_of_affine_shaping_is_zero():
    """An affine callable g(x) = 1 - x has g'' = 0 everywhere; asking for it must not raise."""
    s = get_shaping(lambda x: 1.0 - x)
    torch.testing.assert_close(s.dg(X), -torch.ones_like(X), rtol=0, atol=0)
    torch.testing.assert_close(s.d2g(X), torch.zeros_like(X), rtol=0, atol=0)


def test_callable_derivatives_do_not_leak_graphs():
    s = get_shaping(user_shaping)
    x = X.clone()
    assert not s.dg(x).requires_grad and not s.d2g(x).requires_grad
    assert not x.requires_grad


def test_callable_derivatives_differentiable_when_input_requires_grad():
    s = get_shaping(user_shaping)
    x = X.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(s.dg(x).sum(), x)
    torch.testing.assert_close(grad, 2.0 / (2.0 + X) ** 3, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_dtype_preserved(name, dtype):
    s = get_shaping(name)
    x = X.to(dtype)
    for fn in (s.g, s.dg, s.d2g):
        assert fn(x).dtype == dtype


def test_get_shaping_passes_shaping_through():
    s = get_shaping("exp")
    assert get_shaping(s) is s
    assert get_shaping() is get_shaping("neglog1p")


def test_unknown_name_lists_available():
    with pytest.raises(ValueError, match="unknown shaping") as info:
        get_shaping("neg_log")
    for name in REGISTERED_SHAPINGS:
        assert name in str(info.value)


@pytest.mark.parametrize("spec", [3, None, 0.5, ["neglog1p"]])
def test_non_callable_spec_raises(spec):
    with pytest.raises(ValueError, match="shaping must be"):
        get_shaping(spec)


@pytest.fixture
def temporary_name():
    name = "test_only_sqrt_shaping"
    yield name
    shaping_module._REGISTRY.pop(name, None)


def test_register_and_use_new_shaping(temporary_name):
    s = register_shaping(
        temporary_name,
        g=lambda x: 1.0 - torch.sqrt(1.0 + x),
        dg=lambda x: -0.5 / torch.sqrt(1.0 + x),
        d2g=lambda x: 0.25 * (1.0 + x) ** -1.5,
    )
    assert get_shaping(temporary_name) is s
    assert temporary_name in available_shapings()
    torch.testing.assert_close(s.dg(X), central_difference(s.g, X), rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="already registered"):
        register_shaping(temporary_name, g=s.g, dg=s.dg, d2g=s.d2g)


@pytest.mark.parametrize("name", REGISTERED_SHAPINGS)
def test_builtin_names_cannot_be_overwritten(name):
    before = get_shaping(name)
    with pytest.raises(ValueError, match="already registered"):
        register_shaping(name, g=torch.neg, dg=torch.neg, d2g=torch.neg)
    assert get_shaping(name) is before
