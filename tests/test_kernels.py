"""cosine_kernel: exact symmetry and unit diagonal, range, numpy reference, zero-norm policy, input errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import BATCH_SHAPES, embeddings, seeds

from setpo import cosine_kernel

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


def numpy_cosine(e: np.ndarray, clamp: bool) -> np.ndarray:
    """Reference: cos(e_i, e_j) from numpy, clamped to [0, 1] or left in [-1, 1] (no zero-norm rows)."""
    u = e / np.linalg.norm(e, axis=-1, keepdims=True)
    sim = u @ np.swapaxes(u, -1, -2)
    return np.clip(sim, 0.0, 1.0) if clamp else np.clip(sim, -1.0, 1.0)


@given(
    e=embeddings(batch_shapes=BATCH_SHAPES), dtype=st.sampled_from([torch.float32, torch.float64]), clamp=st.booleans()
)
def test_exact_symmetry_and_unit_diagonal(e, dtype, clamp):
    K = cosine_kernel(e.to(dtype), clamp=clamp)
    assert K.dtype == dtype
    assert K.shape == (*e.shape[:-1], e.shape[-2])
    assert torch.equal(K, K.mT)
    assert torch.equal(K.diagonal(dim1=-2, dim2=-1), torch.ones(K.shape[:-1], dtype=dtype))


@given(e=embeddings(batch_shapes=BATCH_SHAPES), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_value_range(e, dtype):
    clamped = cosine_kernel(e.to(dtype))
    raw = cosine_kernel(e.to(dtype), clamp=False)
    assert clamped.min() >= 0.0 and clamped.max() <= 1.0
    assert raw.min() >= -1.0 and raw.max() <= 1.0


def test_unclamped_kernel_keeps_negative_cosines():
    e = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    raw = cosine_kernel(e, clamp=False)
    torch.testing.assert_close(raw[0, 1], torch.tensor(-1.0, dtype=torch.float64), rtol=0, atol=1e-15)
    torch.testing.assert_close(raw[1, 2], torch.tensor(-(0.5**0.5), dtype=torch.float64), rtol=0, atol=1e-15)
    assert cosine_kernel(e)[0, 1] == 0.0 and cosine_kernel(e)[1, 2] == 0.0


@given(e=embeddings(batch_shapes=BATCH_SHAPES), clamp=st.booleans())
def test_matches_numpy_reference_float64(e, clamp):
    K = cosine_kernel(e, clamp=clamp)
    np.testing.assert_allclose(K.numpy(), numpy_cosine(e.numpy(), clamp), rtol=0, atol=1e-12)


@given(e=embeddings(max_size=16))
def test_float32_close_to_float64_reference(e):
    K = cosine_kernel(e.to(torch.float32))
    np.testing.assert_allclose(K.double().numpy(), numpy_cosine(e.numpy(), True), rtol=0, atol=2e-6)


@given(e=embeddings(min_size=2, max_size=16, batch_shapes=((2, 3),)))
def test_batched_equals_per_group(e):
    K = cosine_kernel(e)
    for b in range(2):
        for c in range(3):
            torch.testing.assert_close(K[b, c], cosine_kernel(e[b, c]), rtol=0, atol=1e-15)


@given(e=embeddings(max_size=12), seed=seeds)
def test_invariant_to_positive_row_scaling(e, seed):
    scale = torch.from_numpy(10.0 ** np.random.default_rng(seed).uniform(-30, 30, size=(e.shape[0], 1)))
    torch.testing.assert_close(cosine_kernel(e * scale), cosine_kernel(e), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("scale", [1e-200, 1e200], ids=["tiny", "huge"])
def test_extreme_but_finite_magnitudes_give_the_true_cosine(dtype, scale):
    """cos is scale invariant: finite embeddings near the ends of the float range must not change K."""
    if dtype == torch.float32:
        scale = 1e-30 if scale < 1 else 1e30
    e = torch.tensor([[3.0, 4.0, 0.0], [4.0, 3.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    expected = cosine_kernel(e).to(dtype)
    torch.testing.assert_close(cosine_kernel((e * scale).to(dtype)), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("clamp", [True, False])
def test_zero_norm_rows_are_isolated(clamp):
    """Documented "isolate" policy: a zero row has k = 0 to non-zero rows and k = 1 to other zero rows."""
    e = torch.tensor([[1.0, 2.0], [0.0, 0.0], [2.0, 4.0], [0.0, 0.0], [-1.0, 0.5]], dtype=torch.float64)
    K = cosine_kernel(e, clamp=clamp)
    zero = torch.tensor([False, True, False, True, False])
    assert torch.equal(K[1], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64))
    assert torch.equal(K[3], K[1])
    assert torch.equal(K[zero][:, ~zero], torch.zeros(2, 3, dtype=torch.float64))
    assert torch.equal(K[zero][:, zero], torch.ones(2, 2, dtype=torch.float64))
    # Non-zero rows are untouched by the zero rows.
    nz = e[~zero]
    torch.testing.assert_close(K[~zero][:, ~zero], cosine_kernel(nz, clamp=clamp), rtol=0, atol=1e-15)  # BLAS blocking


def test_single_zero_row_in_batch_is_isolated():
    e = torch.randn(3, 4, 5, dtype=torch.float64)
    e[1, 2] = 0.0
    K = cosine_kernel(e)
    assert torch.equal(K[1, 2], torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(K[0], cosine_kernel(e[0]), rtol=0, atol=1e-15)


def test_zero_norm_raise_policy():
    e = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="zero-norm"):
        cosine_kernel(e, on_zero_norm="raise")
    cosine_kernel(torch.eye(3), on_zero_norm="raise")  # no zero rows: no error


@pytest.mark.parametrize(
    ("bad", "word"), [(float("nan"), "NaN"), (float("inf"), "inf"), (float("-inf"), "inf")], ids=["nan", "inf", "-inf"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_non_finite_embeddings_raise(bad, word, dtype):
    e = torch.randn(4, 3, dtype=dtype)
    e[2, 1] = bad
    with pytest.raises(ValueError, match=word):
        cosine_kernel(e)


@pytest.mark.parametrize(
    ("e", "match"),
    [
        (torch.ones(5), "shape"),
        (torch.ones(()), "shape"),
        (torch.ones(4, 0), "d=0"),
        (torch.ones(4, 3, dtype=torch.int64), "floating-point"),
        (torch.ones(4, 3, dtype=torch.bool), "floating-point"),
        (torch.ones(4, 3, dtype=torch.complex64), "dtype"),
    ],
    ids=["1d", "0d", "d0", "int", "bool", "complex"],
)
def test_bad_embeddings_raise(e, match):
    with pytest.raises(ValueError, match=match):
        cosine_kernel(e)


def test_unknown_zero_norm_option_raises():
    with pytest.raises(ValueError, match="on_zero_norm"):
        cosine_kernel(torch.eye(3), on_zero_norm="ignore")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_preserved(device, dtype):
    K = cosine_kernel(torch.randn(2, 6, 8, dtype=dtype, device=device))
    assert K.dtype == dtype and K.device.type == device


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_input(dtype):
    e = np.random.default_rng(0).standard_normal((5, 7)).astype(dtype)
    K = cosine_kernel(e)
    assert isinstance(K, torch.Tensor) and K.dtype == torch.from_numpy(e).dtype
    torch.testing.assert_close(K, cosine_kernel(torch.from_numpy(e)), rtol=0, atol=0)
