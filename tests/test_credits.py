"""Local mass, D(S) and the leave-one-out credits s_i: closed form (Lemma D.1) vs Algorithm 1 vs plain Python."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import BATCH_SHAPES, KERNEL_KINDS, SHAPING_SPECS, kernels, make_kernel, seeds, shapings, user_shaping

from setpo.core import (
    cosine_kernel,
    get_shaping,
    group_credits,
    local_mass,
    loo_credits,
    loo_credits_reference,
    set_diversity,
)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]
STRICTLY_DECREASING = ("neglog1p", "linear", "exp", "inverse", user_shaping)

# Scalar shaping functions for the plain-Python reference (math module only, no torch).
PY_SHAPINGS = {
    "neglog1p": lambda x: -math.log1p(x),
    "linear": lambda x: 1.0 - x,
    "exp": lambda x: math.exp(-x),
    "inverse": lambda x: 1.0 / (1.0 + x),
    "user_shaping": lambda x: 1.0 / (2.0 + x),
}


def py_local_mass(K: list[list[float]], members: list[int]) -> list[float]:
    """Eq. 3 by loops: mean similarity to the other members of the set, self excluded."""
    return [sum(K[a][b] for b in members if b != a) / (len(members) - 1) for a in members]


def py_diversity(K: list[list[float]], members: list[int], g) -> float:
    """Eq. 4 by loops: D(S) = mean over S of g(m_hat(y; S))."""
    return sum(g(m) for m in py_local_mass(K, members)) / len(members)


def py_credits(K: list[list[float]], g) -> list[float]:
    """Eq. 5 by loops: s_i = D(Omega) - D(Omega minus o_i)."""
    G = len(K)
    full = py_diversity(K, list(range(G)), g)
    return [full - py_diversity(K, [j for j in range(G) if j != i], g) for i in range(G)]


def shaping_key(spec) -> str:
    return spec if isinstance(spec, str) else spec.__name__


# --- agreement of the three computations ---------------------------------------------------------------------------


@pytest.mark.parametrize("G", [3, 4, 5, 7])
@pytest.mark.parametrize("kind", ["random", "embedding", "duplicates", "sparse"])
@pytest.mark.parametrize("spec", SHAPING_SPECS, ids=shaping_key)
def test_against_plain_python(G, kind, spec):
    K = make_kernel(kind, G, np.random.default_rng(1000 * G + len(kind)))
    K_list = K.tolist()
    g = PY_SHAPINGS[shaping_key(spec)]
    expected_m = torch.tensor(py_local_mass(K_list, list(range(G))), dtype=torch.float64)
    expected_d = torch.tensor(py_diversity(K_list, list(range(G)), g), dtype=torch.float64)
    expected_s = torch.tensor(py_credits(K_list, g), dtype=torch.float64)
    torch.testing.assert_close(local_mass(K), expected_m, rtol=0, atol=1e-14)
    torch.testing.assert_close(set_diversity(K, spec), expected_d, rtol=0, atol=1e-14)
    torch.testing.assert_close(loo_credits(K, spec), expected_s, rtol=0, atol=1e-13)
    torch.testing.assert_close(loo_credits_reference(K, spec), expected_s, rtol=0, atol=1e-13)


def test_hand_worked_group_of_three():
    """G = 3, k12 = 0.5, k13 = k23 = 0: D(Omega) and each D(Omega minus o_i) by hand with g = -log(1 + x)."""
    K = torch.tensor([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    # m = (0.25, 0.25, 0); removing o_1 or o_2 leaves a pair with k = 0, D = 0; removing o_3 leaves k = 0.5.
    d_full = -2 * math.log1p(0.25) / 3
    expected = torch.tensor([d_full, d_full, d_full + math.log1p(0.5)], dtype=torch.float64)
    torch.testing.assert_close(loo_credits(K), expected, rtol=0, atol=1e-15)
    torch.testing.assert_close(loo_credits_reference(K), expected, rtol=0, atol=1e-15)
    assert loo_credits(K)[2] > loo_credits(K)[0]


@given(K=kernels(batch_shapes=BATCH_SHAPES), spec=shapings)
def test_closed_form_matches_algorithm_1(K, spec):
    fast = loo_credits(K, spec)
    assert fast.shape == K.shape[:-1] and fast.dtype == torch.float64
    torch.testing.assert_close(fast, loo_credits_reference(K, spec), rtol=0, atol=1e-12)


@pytest.mark.parametrize("G", [3, 4, 17, 64])
@pytest.mark.parametrize("kind", KERNEL_KINDS)
@pytest.mark.parametrize("spec", SHAPING_SPECS, ids=shaping_key)
def test_closed_form_matches_algorithm_1_every_kind_and_shaping(G, kind, spec):
    """Every structured kernel kind x every shaping x small and large G, batched (2, 3, G, G)."""
    K = make_kernel(kind, G, np.random.default_rng(G), batch=(2, 3))
    torch.testing.assert_close(loo_credits(K, spec), loo_credits_reference(K, spec), rtol=0, atol=1e-12)


@pytest.mark.parametrize("spec", ["neglog1p", get_shaping("exp"), user_shaping], ids=["name", "Shaping", "callable"])
def test_every_shaping_spec_form_accepted(spec):
    K = make_kernel("random", 6, np.random.default_rng(0))
    torch.testing.assert_close(loo_credits(K, spec), loo_credits_reference(K, spec), rtol=0, atol=1e-12)


def test_default_shaping_is_neglog1p():
    K = make_kernel("random", 6, np.random.default_rng(0))
    assert torch.equal(loo_credits(K), loo_credits(K, "neglog1p"))
    assert torch.equal(set_diversity(K), set_diversity(K, "neglog1p"))


def test_constant_kernels_give_zero_credit():
    """All-ones or identity kernels: every local mass equals every leave-one-out local mass, so s_i = 0."""
    for K in (torch.ones(5, 5, dtype=torch.float64), torch.eye(5, dtype=torch.float64)):
        torch.testing.assert_close(loo_credits(K), torch.zeros(5, dtype=torch.float64), rtol=0, atol=1e-15)


# --- structural properties ------------------------------------------------------------------------------------------


@given(K=kernels(max_size=24), spec=shapings, seed=seeds)
def test_permutation_equivariance(K, spec, seed):
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(K.shape[-1]))
    permuted = loo_credits(K[perm][:, perm], spec)
    torch.testing.assert_close(permuted, loo_credits(K, spec)[perm], rtol=0, atol=1e-13)


@given(K=kernels(kinds=("duplicates",), max_size=32, batch_shapes=((), (3,))), spec=shapings)
def test_exact_duplicates_get_equal_credit(K, spec):
    s = loo_credits(K, spec)
    dup = K == 1.0  # k(o_i, o_j) = 1: i and j are duplicates (rows of one type in this kind)
    same_rows = (K.unsqueeze(-2) == K.unsqueeze(-3)).all(-1)
    assert bool((dup == same_rows).all())  # the kind's duplicates really are identical rows
    gap = (s.unsqueeze(-1) - s.unsqueeze(-2)).abs()
    assert float(gap[dup].max()) <= 1e-13


@given(
    G=st.integers(3, 40),
    d=st.integers(2, 16),
    cos=st.floats(0.0, 0.99),
    spec=st.sampled_from(STRICTLY_DECREASING),
    seed=seeds,
    position=st.integers(0, 39),
)
def test_distinct_rollout_among_duplicates_gets_strictly_largest_credit(G, d, cos, spec, seed, position):
    """G - 1 exact duplicates plus one rollout at cosine `cos` < 1 to them (Thm 4.5 with strict inequality)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    w = rng.standard_normal(d)
    w -= (w @ u) * u
    w /= np.linalg.norm(w)
    e = np.tile(u, (G, 1))
    r = position % G
    e[r] = cos * u + math.sqrt(1.0 - cos**2) * w
    s = loo_credits(cosine_kernel(torch.from_numpy(e)), spec)
    others = torch.cat([s[:r], s[r + 1 :]])
    assert bool((s[r] > others).all()), (s[r].item(), others.max().item())
    assert float(others.max() - others.min()) <= 1e-13


@given(K=kernels(max_size=32, batch_shapes=((2, 3), (4,))), spec=shapings)
def test_batched_equals_per_group_loop(K, spec):
    batched = loo_credits(K, spec)
    flat_K = K.reshape(-1, *K.shape[-2:])
    looped = torch.stack([loo_credits(k, spec) for k in flat_K]).reshape(batched.shape)
    torch.testing.assert_close(batched, looped, rtol=0, atol=1e-14)
    torch.testing.assert_close(
        set_diversity(K, spec).reshape(-1), torch.stack([set_diversity(k, spec) for k in flat_K])
    )


# --- dtype, device, input types ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_preserved(dtype, device):
    K = make_kernel("embedding", 8, np.random.default_rng(0), batch=(2,)).to(dtype=dtype, device=device)
    for out in (local_mass(K), set_diversity(K), loo_credits(K), loo_credits_reference(K)):
        assert out.dtype == dtype and out.device.type == device


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_inputs_are_computed_in_float32_and_returned_in_their_dtype(dtype):
    e = torch.randn(3, 7, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(dtype)
    K = cosine_kernel(e.float()).to(dtype)
    s = loo_credits(K)
    assert s.dtype == dtype
    # the same 16-bit kernel values, upcast by hand: equal after rounding to the caller's dtype
    torch.testing.assert_close(s, loo_credits_reference(K.double()).to(dtype), rtol=0, atol=0)
    credits = group_credits(e, 7)
    assert credits.dtype == dtype
    want = group_credits(e.float(), 7)
    torch.testing.assert_close(credits.float(), want, rtol=0, atol=torch.finfo(dtype).eps)


@given(K=kernels(max_size=64), spec=shapings)
def test_float32_close_to_float64(K, spec):
    s32 = loo_credits(K.float(), spec)
    torch.testing.assert_close(s32.double(), loo_credits(K, spec), rtol=0, atol=2e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_input_accepted(dtype):
    K = make_kernel("random", 6, np.random.default_rng(0)).numpy().astype(dtype)
    K_t = torch.from_numpy(K)
    for fn in (local_mass, set_diversity, loo_credits, loo_credits_reference):
        out = fn(K)
        assert isinstance(out, torch.Tensor) and out.dtype == K_t.dtype
        torch.testing.assert_close(out, fn(K_t), rtol=0, atol=0)


# --- small groups and bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [loo_credits, loo_credits_reference])
@pytest.mark.parametrize("G", [1, 2])
def test_small_group_raises_naming_G(fn, G):
    with pytest.raises(ValueError, match=f"G={G}"):
        fn(torch.ones(G, G, dtype=torch.float64))


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
@pytest.mark.parametrize("G", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_group_zero_policy(G, batch, dtype):
    K = torch.ones(*batch, G, G, dtype=dtype)
    out = loo_credits(K, on_small_group="zero")
    assert torch.equal(out, torch.zeros(*batch, G, dtype=dtype))


def test_zero_policy_does_not_change_large_groups():
    K = make_kernel("random", 5, np.random.default_rng(0))
    assert torch.equal(loo_credits(K, on_small_group="zero"), loo_credits(K))


def test_zero_policy_still_validates_small_kernels():
    with pytest.raises(ValueError, match="NaN"):
        loo_credits(torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]]), on_small_group="zero")
    with pytest.raises(ValueError, match="floating-point"):
        loo_credits(torch.ones(2, 2, dtype=torch.int64), on_small_group="zero")


def test_unknown_small_group_option():
    with pytest.raises(ValueError, match="on_small_group"):
        loo_credits(torch.eye(4), on_small_group="skip")


def test_unknown_shaping_name_lists_available():
    with pytest.raises(ValueError, match=r"unknown shaping.*neglog1p"):
        loo_credits(torch.eye(4), "neg-log")
    with pytest.raises(ValueError, match=r"unknown shaping.*neglog1p"):
        set_diversity(torch.eye(4), "neg-log")


BAD_KERNELS = [
    (torch.ones(3, 4), "shape"),
    (torch.ones(4), "shape"),
    (torch.ones(()), "shape"),
    (torch.ones(2, 3, 4, 3), "shape"),
    (torch.tensor([[1.0, 0.2, float("nan")], [0.2, 1.0, 0.1], [0.3, 0.1, 1.0]]), "NaN"),
    (torch.tensor([[1.0, 0.2, float("inf")], [0.2, 1.0, 0.1], [0.3, 0.1, 1.0]]), "inf"),
    (torch.ones(3, 3, dtype=torch.int64), "floating-point"),
    (torch.ones(3, 3, dtype=torch.bool), "floating-point"),
]


@pytest.mark.parametrize("fn", [loo_credits, loo_credits_reference, local_mass, set_diversity])
@pytest.mark.parametrize(
    ("K", "match"), BAD_KERNELS, ids=["3x4", "1d", "0d", "batched-3x4", "nan", "inf", "int", "bool"]
)
def test_bad_kernels_raise(fn, K, match):
    with pytest.raises(ValueError, match=match):
        fn(K)


@pytest.mark.parametrize("fn", [local_mass, set_diversity])
def test_local_mass_needs_two_members(fn):
    with pytest.raises(ValueError, match="G=1"):
        fn(torch.ones(1, 1))


@pytest.mark.parametrize("clamp", [True, False])
@pytest.mark.parametrize("g", ["neglog1p", "linear"])
def test_group_credits_is_the_kernel_then_the_closed_form_in_both_layouts(clamp, g):
    e = torch.randn(4, 5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    K = cosine_kernel(e, clamp=clamp)
    want = loo_credits(K, g)
    got, diversity = group_credits(e, 5, clamp=clamp, shaping=g, return_diversity=True)
    assert torch.equal(got, want) and torch.equal(diversity, set_diversity(K, g))
    flat = group_credits(e.reshape(20, 7), 5, clamp=clamp, shaping=g)
    assert flat.shape == (20,) and torch.equal(flat, want.reshape(20))


def test_group_credits_small_groups_and_bad_layouts():
    e = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="G=2 is too small"):
        group_credits(e, 2)
    s, diversity = group_credits(e, 2, on_small_group="zero", return_diversity=True)
    assert torch.equal(s, torch.zeros(6, dtype=torch.float64)) and bool(torch.isnan(diversity).all())
    with pytest.raises(ValueError, match="not divisible by the group size 4"):
        group_credits(e, 4)
    with pytest.raises(ValueError, match=r"\(B, G, d\) with G = 4"):
        group_credits(e.reshape(2, 3, 3), 4)
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="group_size must be an integer"):
            group_credits(e, bad)
    with pytest.raises(ValueError, match="unknown on_small_group option 'skip'"):
        group_credits(e, 3, on_small_group="skip")
