"""Population local mass, F(P) and the diversity influence function (Thm 4.2 = C.2) against brute force and F'."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import SHAPING_SPECS, distributions, make_kernel, seeds, shapings

from setpo import (
    Influence,
    get_shaping,
    influence,
    local_mass,
    population_diversity,
    population_local_mass,
)

H = 1e-5


def mixture(p: torch.Tensor, tau: int, eps: float) -> torch.Tensor:
    """P_eps = (1 - eps) P + eps delta_tau on the support of P (eps may be negative while weights stay >= 0)."""
    delta = torch.zeros_like(p)
    delta[tau] = 1.0
    return (1.0 - eps) * p + eps * delta


def derivative_of_F(p: torch.Tensor, K: torch.Tensor, tau: int, g) -> float:
    """d/deps F(P_eps) at eps = 0 by finite differences of population_diversity, error O(H^2).

    Central difference when P_{-H} is still a distribution; otherwise (p_tau < H, e.g. tau outside the
    support of P) the second-order one-sided formula (-3 F(0) + 4 F(H) - F(2H)) / 2H.
    """

    def F(eps):
        return float(population_diversity(mixture(p, tau, eps), K, g))

    if float(p[tau]) >= H:
        return (F(H) - F(-H)) / (2 * H)
    return (-3 * F(0.0) + 4 * F(H) - F(2 * H)) / (2 * H)


def brute_force_terms(p: torch.Tensor, K: torch.Tensor, g) -> dict[str, list[float] | float]:
    """Every term of Thm 4.2 by explicit loops over the support."""
    s = get_shaping(g)
    pl, Kl = p.tolist(), K.tolist()
    N = len(pl)
    m = [sum(Kl[a][b] * pl[b] for b in range(N)) for a in range(N)]
    g_m = [float(s.g(torch.tensor(x, dtype=torch.float64))) for x in m]
    dg_m = [float(s.dg(torch.tensor(x, dtype=torch.float64))) for x in m]
    F = sum(pl[a] * g_m[a] for a in range(N))
    interaction = [sum(pl[a] * dg_m[a] * Kl[a][t] for a in range(N)) for t in range(N)]
    psi = F + sum(pl[a] * dg_m[a] * m[a] for a in range(N))
    return {"m": m, "novelty": g_m, "F": F, "interaction": interaction, "psi": psi}


@st.composite
def populations(draw, max_size: int = 10):
    """(p, K): weights over N points (possibly one of zero weight) and a float64 kernel over those points."""
    p = draw(distributions(min_size=2, max_size=max_size))
    kind = draw(st.sampled_from(["embedding", "random", "blocks", "duplicates", "sparse"]))
    K = make_kernel(kind, p.shape[0], np.random.default_rng(draw(seeds)))
    return p, K


@given(pop=populations(), spec=shapings)
def test_terms_match_brute_force(pop, spec):
    p, K = pop
    out = influence(p, K, spec)
    ref = brute_force_terms(p, K, spec)
    assert isinstance(out, Influence)
    t = lambda v: torch.tensor(v, dtype=torch.float64)
    torch.testing.assert_close(out.local_mass, t(ref["m"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(population_local_mass(p, K), t(ref["m"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.novelty, t(ref["novelty"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.F, t(ref["F"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(population_diversity(p, K, spec), t(ref["F"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.interaction, t(ref["interaction"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.psi, t(ref["psi"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.uncentred, t(ref["novelty"]) + t(ref["interaction"]), rtol=0, atol=1e-14)
    torch.testing.assert_close(out.influence, out.uncentred - out.psi, rtol=0, atol=0)


@given(pop=populations(), spec=shapings)
def test_influence_is_the_derivative_of_F(pop, spec):
    """Thm 4.2: I(tau; P) = d/deps F((1 - eps) P + eps delta_tau) at eps = 0, for every support point tau."""
    p, K = pop
    out = influence(p, K, spec)
    fd = torch.tensor([derivative_of_F(p, K, tau, spec) for tau in range(p.shape[0])], dtype=torch.float64)
    torch.testing.assert_close(out.influence, fd, rtol=0, atol=1e-7)


@pytest.mark.parametrize("spec", SHAPING_SPECS, ids=lambda s: s if isinstance(s, str) else s.__name__)
def test_influence_derivative_every_shaping(spec):
    rng = np.random.default_rng(7)
    p = torch.from_numpy(rng.dirichlet(np.ones(9)))
    K = make_kernel("embedding", 9, rng)
    fd = torch.tensor([derivative_of_F(p, K, tau, spec) for tau in range(9)], dtype=torch.float64)
    torch.testing.assert_close(influence(p, K, spec).influence, fd, rtol=0, atol=1e-7)


@given(pop=populations(), spec=shapings)
def test_psi_does_not_depend_on_tau(pop, spec):
    """F'(eps=0) - I~(tau) is the same constant -Psi(P) for every tau (measured, not read off the code)."""
    p, K = pop
    out = influence(p, K, spec)
    fd = torch.tensor([derivative_of_F(p, K, tau, spec) for tau in range(p.shape[0])], dtype=torch.float64)
    offset = fd - out.uncentred
    assert float(offset.max() - offset.min()) < 2e-7
    torch.testing.assert_close(offset, -out.psi.expand_as(offset), rtol=0, atol=1e-7)
    assert out.psi.shape == out.F.shape == ()


@given(pop=populations(max_size=16), spec=shapings)
def test_influence_has_zero_mean_under_P(pop, spec):
    """sum_tau p_tau I(tau; P) = 0, as for any influence function."""
    p, K = pop
    assert abs(float((p * influence(p, K, spec).influence).sum())) < 1e-12


@pytest.mark.parametrize("spec", ["neglog1p", "exp"])
def test_interaction_is_non_positive_for_decreasing_g(spec):
    rng = np.random.default_rng(3)
    p = torch.from_numpy(rng.dirichlet(np.ones(8)))
    out = influence(p, make_kernel("random", 8, rng), spec)
    assert bool((out.interaction <= 0).all())


@given(G=st.integers(2, 20), seed=seeds)
def test_uniform_population_mass_relates_to_group_local_mass(G, seed):
    """Uniform P on G points: m_P(y) = (1 + (G - 1) m_hat(y)) / G, since the population mass counts k(y, y) = 1."""
    K = make_kernel("random", G, np.random.default_rng(seed))
    p = torch.full((G,), 1.0 / G, dtype=torch.float64)
    torch.testing.assert_close(population_local_mass(p, K), (1 + (G - 1) * local_mass(K)) / G, rtol=0, atol=1e-14)


def test_point_mass_population():
    """P = delta_y: m_P(y) = 1, F = g(1); I(tau) = g(m_tau) + g'(1) k(y, tau) - g(1) - g'(1)."""
    K = torch.tensor([[1.0, 0.3, 0.0], [0.3, 1.0, 0.5], [0.0, 0.5, 1.0]], dtype=torch.float64)
    p = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    s = get_shaping("neglog1p")
    out = influence(p, K)
    one = torch.tensor(1.0, dtype=torch.float64)
    torch.testing.assert_close(out.local_mass, K[0], rtol=0, atol=0)
    torch.testing.assert_close(out.F, s.g(one), rtol=0, atol=0)
    expected = s.g(K[0]) + s.dg(one) * K[0] - s.g(one) - s.dg(one)
    torch.testing.assert_close(out.influence, expected, rtol=0, atol=1e-15)


@given(seed=seeds, spec=shapings)
def test_batched_equals_per_item(seed, spec):
    rng = np.random.default_rng(seed)
    p = torch.from_numpy(rng.dirichlet(np.ones(6), size=(2, 3)))
    K = make_kernel("embedding", 6, rng, batch=(2, 3))
    out = influence(p, K, spec)
    assert out.influence.shape == (2, 3, 6) and out.psi.shape == (2, 3)
    for b in range(2):
        for c in range(3):
            one = influence(p[b, c], K[b, c], spec)
            torch.testing.assert_close(out.influence[b, c], one.influence, rtol=0, atol=1e-14)
            torch.testing.assert_close(out.psi[b, c], one.psi, rtol=0, atol=1e-14)
            torch.testing.assert_close(population_diversity(p, K, spec)[b, c], one.F, rtol=0, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_preserved_and_numpy_accepted(dtype):
    rng = np.random.default_rng(0)
    p_np = rng.dirichlet(np.ones(5))
    K = make_kernel("random", 5, rng).to(dtype)
    p = torch.from_numpy(p_np).to(dtype)
    out = influence(p, K)
    assert out.influence.dtype == dtype and population_diversity(p, K).dtype == dtype
    torch.testing.assert_close(influence(p.numpy(), K.numpy()).influence, out.influence, rtol=0, atol=0)


BAD = [
    (torch.tensor([0.5, 0.6, 0.0]), torch.eye(3), "sum to 1"),
    (torch.tensor([0.5, 0.4, 0.0]), torch.eye(3), "sum to 1"),
    (torch.tensor([1.5, -0.5, 0.0]), torch.eye(3), "non-negative"),
    (torch.tensor([0.5, 0.5]), torch.eye(3), "shape"),
    (torch.full((2, 3), 1 / 3), torch.eye(3), "shape"),
    (torch.full((3,), 1 / 3), torch.eye(3).expand(2, 3, 3), "shape"),
    (torch.full((3,), 1 / 3), torch.ones(3, 4), "shape"),
    (torch.tensor([0.5, float("nan"), 0.5]), torch.eye(3), "NaN"),
    (torch.full((3,), 1 / 3), torch.tensor([[1.0, float("nan"), 0], [0, 1, 0], [0, 0, 1]]), "NaN"),
    (torch.tensor([1, 0, 0]), torch.eye(3), "floating-point"),
]
BAD_IDS = ["sum>1", "sum<1", "negative", "length", "batch-p", "batch-K", "non-square", "nan-p", "nan-K", "int-p"]


@pytest.mark.parametrize("fn", [influence, population_local_mass, population_diversity])
@pytest.mark.parametrize(("p", "K", "match"), BAD, ids=BAD_IDS)
def test_bad_input_raises(fn, p, K, match):
    with pytest.raises(ValueError, match=match):
        fn(p, K)


def test_sum_tolerance_allows_float32_rounding():
    p = torch.full((7,), 1 / 7, dtype=torch.float32)
    out = influence(p, torch.eye(7, dtype=torch.float32))  # sums to 1 up to float32 rounding: accepted
    assert abs(float((p * out.influence).sum())) < 1e-6
