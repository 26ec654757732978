"""Asymmetric kernels are refused beyond rounding; 16-bit inputs are computed in float32: a 16-bit kernel's credits
come back in its dtype, 16-bit embeddings give a float32 kernel and credits in the embeddings' dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from strategies import make_kernel

from setpo import cosine_kernel, local_mass, loo_credits, loo_credits_reference, set_diversity
from setpo.core import group_credits
from setpo.core._checks import asymmetry_tolerance

KERNEL_FNS = [local_mass, set_diversity, loo_credits, loo_credits_reference]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


def _fn_id(fn) -> str:
    return fn.__name__


# --- item 11: asymmetry --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", KERNEL_FNS, ids=_fn_id)
@pytest.mark.parametrize("G", [3, 6, 16, 40, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grossly_asymmetric_kernel_is_refused(fn, G, dtype):
    K = make_kernel("random", G, np.random.default_rng(G), batch=(3,)).to(dtype)
    K[1, 0, G - 1] = 0.9
    K[1, G - 1, 0] = 0.1  # every value in [0, 1], diagonal 1: only the symmetry is wrong
    with pytest.raises(ValueError, match=r"symmetric.*max \|K - K\^T\| is 0\.8"):
        fn(K)


@pytest.mark.parametrize("fn", KERNEL_FNS, ids=_fn_id)
def test_row_normalised_kernel_is_refused(fn):
    """A typical asymmetric 'kernel': similarities divided by their row sums."""
    K = cosine_kernel(torch.randn(2, 5, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="symmetric"):
        fn(K / K.sum(-1, keepdim=True))


@pytest.mark.parametrize("fn", KERNEL_FNS, ids=_fn_id)
@pytest.mark.parametrize("G", [5, 16, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_rounding_level_asymmetry_is_accepted(fn, G, dtype):
    """Perturbing one triangle by half the tolerance changes nothing visible; just past the tolerance is refused."""
    K = make_kernel("blocks", G, np.random.default_rng(0), batch=(2,)).to(dtype)
    tol = asymmetry_tolerance(dtype)
    up = torch.triu(torch.ones(G, G, dtype=torch.bool), 1)
    noisy = K.clone()
    noisy[:, up] = (noisy[:, up].double() - 0.5 * tol).to(dtype)  # values stay in [0, 1]: blocks are >= 0.0
    noisy = noisy.clamp(0.0, 1.0)
    assert 0 < float((noisy.double() - noisy.double().mT).abs().max()) <= tol
    torch.testing.assert_close(fn(noisy).double(), fn(K).double(), rtol=0, atol=max(tol, 1e-12))
    far = K.clone()
    far[:, 0, 1] = (far[:, 0, 1].double() - 4 * tol).clamp(min=0).to(dtype)
    far[:, 1, 0] = (far[:, 0, 1].double() + 4 * tol).to(dtype)
    with pytest.raises(ValueError, match="symmetric"):
        fn(far)


def test_unsymmetrised_gram_kernel_passes():
    """u @ u^T in float32 without symmetrising: its rounding-level asymmetry must not be refused."""
    e = torch.randn(64, 16, 4096)
    u = e / e.norm(dim=-1, keepdim=True)
    K = (u @ u.mT).clamp(0.0, 1.0)
    K.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    torch.testing.assert_close(loo_credits(K), loo_credits((K + K.mT) / 2), rtol=0, atol=1e-6)


def test_nan_is_still_reported_as_nan_in_an_asymmetric_kernel():
    K = torch.eye(4)
    K[0, 1] = float("nan")
    for fn in KERNEL_FNS:
        with pytest.raises(ValueError, match="NaN"):
            fn(K)


# --- item 14: low precision -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("dtype", "tol"), [(torch.bfloat16, 1e-2), (torch.float16, 2e-3)])
def test_low_precision_embeddings_give_accurate_credits_at_G_64(dtype, tol, device):
    """bf16/fp16 embeddings: credits within `tol` of the largest credit computed in float64 from the same inputs.

    Before the fix, bf16 gave errors of 40-60% of the largest credit and fp16 6-9%. The kernel of 16-bit embeddings
    is float32; a kernel rounded to the 16-bit dtype is computed in float32 and its credits come back in that dtype.
    """
    torch.manual_seed(0)
    e = torch.randn(8, 64, 384).to(dtype).to(device)
    K = cosine_kernel(e)
    assert K.dtype == torch.float32
    K = K.to(dtype)
    s = loo_credits(K)
    assert s.dtype == dtype and s.device.type == device
    exact = loo_credits(cosine_kernel(e.double()))
    err = (s.double() - exact).abs().amax(-1) / exact.abs().amax(-1)
    assert float(err.max()) < tol, float(err.max())
    torch.testing.assert_close(loo_credits_reference(K).double(), exact, rtol=0, atol=tol * float(exact.abs().max()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_kernel_is_computed_in_float32(dtype):
    """Same 16-bit kernel: the result equals the float32 computation rounded once to the 16-bit dtype; 16-bit
    embeddings give exactly the float32 kernel of the same values."""
    K = cosine_kernel(torch.randn(4, 16, 32)).to(dtype)
    K32 = K.float()
    for fn in KERNEL_FNS:
        out = fn(K)
        assert out.dtype == dtype
        torch.testing.assert_close(out, fn(K32).to(dtype), rtol=0, atol=0)
    e = torch.randn(4, 16, 32).to(dtype)
    K16 = cosine_kernel(e)
    assert K16.dtype == torch.float32  # never rounded back to 16 bits
    torch.testing.assert_close(K16, cosine_kernel(e.float()), rtol=0, atol=0)


def _similar_groups(kind: str, G: int, gen: torch.Generator, batch: int = 16, d: int = 384) -> torch.Tensor:
    """(batch, G, d) float64 embeddings: 'clustered' (3 centres, noise 0.35: mean cosine 0.31), 'near_duplicates'
    (one centre, noise 0.2: mean cosine 0.96) or 'copies' (one centre, noise 0.01: mean cosine 0.9999)."""
    centres, sigma = {"clustered": (3, 0.35), "near_duplicates": (1, 0.2), "copies": (1, 0.01)}[kind]
    c = torch.randn(batch, centres, d, generator=gen, dtype=torch.float64)
    which = torch.randint(0, centres, (batch, G), generator=gen)
    base = torch.gather(c, 1, which.unsqueeze(-1).expand(batch, G, d))
    return base + sigma * torch.randn(batch, G, d, generator=gen, dtype=torch.float64)


# Credits of 16-bit embeddings through group_credits, against the float64 credits of the same (16-bit) values:
# |s - s_64| <= REL * max_i |s_64,i| + ABS in every group. ABS is the float32 floor of loo_credits (about 1e-6
# absolute, see its docstring); REL covers the final rounding of the credits to the 16-bit dtype (2^-8 for bf16).
# Measured worst (seed 0, float32 credits): 1.1e-4 relative on clustered groups, 2.6e-3 at mean cosine 0.96 and
# 3.5e-7 absolute on copies, whose credits (1e-7) sit at the float32 floor; rounding the credits to bf16 adds up to
# 2^-9 relative. The same near-duplicate groups through a bf16 kernel: 95% of the largest credit, 15 of 96 signs
# flipped at G = 6.
BOUND_REL, BOUND_ABS = 1e-2, 1e-6


@pytest.mark.parametrize("G", [6, 64])
@pytest.mark.parametrize("kind", ["clustered", "near_duplicates", "copies"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_group_credits_of_16_bit_embeddings_are_within_the_stated_bound(dtype, kind, G):
    """group_credits on bf16/fp16 embeddings vs the float64 credits of the same values (kernel in float32)."""
    e = _similar_groups(kind, G, torch.Generator().manual_seed(0)).to(dtype)
    s = group_credits(e, G)
    exact = group_credits(e.double(), G)
    err = (s.double() - exact).abs()
    allowed = BOUND_REL * exact.abs().amax(-1, keepdim=True) + BOUND_ABS
    assert bool((err <= allowed).all()), float((err - allowed).max())
    clear = exact.abs() > allowed  # a credit larger than the bound keeps its sign
    assert bool((s.double().sign() == exact.sign())[clear].all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_group_credits_come_back_in_the_embeddings_dtype(dtype):
    """The kernel is float32 internally, but credits return in the caller's dtype (flat and grouped layouts)."""
    e = _similar_groups("near_duplicates", 6, torch.Generator().manual_seed(1), batch=4).to(dtype)
    assert group_credits(e, 6).dtype == dtype
    assert group_credits(e.reshape(24, -1), 6).dtype == dtype


def test_a_16_bit_kernel_would_break_the_bound():
    """The bound is not vacuous: rounding the kernel of the same near-duplicate groups to bf16 exceeds it by far."""
    e = _similar_groups("near_duplicates", 6, torch.Generator().manual_seed(0)).to(torch.bfloat16)
    exact = group_credits(e.double(), 6)
    rounded = loo_credits(cosine_kernel(e).to(torch.bfloat16)).double().reshape(exact.shape)
    allowed = BOUND_REL * exact.abs().amax(-1, keepdim=True) + BOUND_ABS
    assert float(((rounded - exact).abs() - allowed).max()) > 0


# --- the fast paths agree with the general one ----------------------------------------------------------------------


@pytest.mark.parametrize("G", [3, 6, 20, 21, 30, 32, 64, 130])
@pytest.mark.parametrize("kind", ["embedding", "near_duplicates", "ones", "identity", "sparse"])
def test_every_layout_and_size_matches_algorithm_1(G, kind):
    """Batch-last scaled (G <= 20) and unscaled (G <= 31, two chunks at G = 30), chunked product in K's layout
    (G >= 32) and the log-sum fallback (G > 125 in float32)."""
    K = make_kernel(kind, G, np.random.default_rng(G), batch=(600,) if G == 30 else (70,) if G <= 64 else (3,))
    torch.testing.assert_close(loo_credits(K), loo_credits_reference(K), rtol=0, atol=1e-12)
    torch.testing.assert_close(loo_credits(K.float()).double(), loo_credits(K), rtol=0, atol=2e-5)


@pytest.mark.parametrize("G", [7, 40])
def test_negative_kernel_takes_the_general_path(G):
    K = cosine_kernel(torch.randn(3, G, 5, dtype=torch.float64), clamp=False)
    torch.testing.assert_close(loo_credits(K), loo_credits_reference(K), rtol=0, atol=1e-12)


def test_a_bad_or_negative_group_in_the_last_chunk_is_seen():
    """G = 40 runs in chunks of 81 groups: a negative or NaN group at the end must still be handled."""
    e = torch.randn(200, 40, 8, dtype=torch.float64)
    K = cosine_kernel(e)
    K[-1] = cosine_kernel(e[-1], clamp=False)
    torch.testing.assert_close(loo_credits(K), loo_credits_reference(K), rtol=0, atol=1e-12)
    K[-1, 3, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        loo_credits(K)


def test_input_kernel_is_not_modified():
    for G in (1, 6, 40):
        K = make_kernel("random", G, np.random.default_rng(0), batch=(1,)) if G > 1 else torch.ones(1, 1, 1)
        before = K.clone()
        if G >= 3:
            loo_credits(K)
            loo_credits(K[0])
        assert torch.equal(K, before)


def test_autograd_still_flows_through_the_credits():
    K = make_kernel("random", 6, np.random.default_rng(0)).requires_grad_(True)
    (grad,) = torch.autograd.grad(loo_credits(K)[0], K)
    assert grad.shape == K.shape and bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 0
