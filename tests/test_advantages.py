"""group_advantages (GRPO / TRL conventions) and setpo_advantages A_hat = A_bar + lambda s (paper eq. 6)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import seeds

from setpo import group_advantages, setpo_advantages


def trl_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str) -> torch.Tensor:
    """TRL 1.16 GRPOTrainer._generate_and_score_completions, "sum_then_normalize" branch, restated for 1-D rewards.

    Group mean, Bessel-corrected std (per group, or over the whole batch), 1e-4 added to the std.
    """

    def nanstd(t, dim=None):
        mean = torch.nanmean(t, dim=dim, keepdim=True)
        var = torch.nanmean((t - mean) ** 2, dim=dim, keepdim=True)
        count = torch.sum(~torch.isnan(t), dim=dim, keepdim=True)
        var = var * count / (count - 1)
        return torch.sqrt(var).squeeze() if dim is None else torch.sqrt(var).squeeze(dim)

    mean_grouped = torch.nanmean(rewards.view(-1, num_generations), dim=1).repeat_interleave(num_generations, dim=0)
    if scale_rewards in ("group", "none"):
        std = nanstd(rewards.view(-1, num_generations), dim=1).repeat_interleave(num_generations, dim=0)
    else:
        std = nanstd(rewards).expand_as(rewards)
    advantages = rewards - mean_grouped
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    return advantages


def py_group_advantages(rewards: list[float], G: int, scale: str, eps: float) -> list[float]:
    """The same by hand with the statistics module (stdev is the unbiased sample std)."""
    out = []
    batch_std = statistics.stdev(rewards)
    for start in range(0, len(rewards), G):
        group = rewards[start : start + G]
        mu = statistics.fmean(group)
        denom = {"group": statistics.stdev(group) + eps, "batch": batch_std + eps, "none": 1.0}[scale]
        out.extend((r - mu) / denom for r in group)
    return out


def test_hand_worked_example():
    """Two groups of 3: rewards (1, 0, 0) and (1, 1, 1); std of (1, 0, 0) is sqrt(1/3)."""
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    sd = (1.0 / 3.0) ** 0.5
    expected_group = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0, 0], dtype=torch.float64) / (sd + 1e-4)
    torch.testing.assert_close(group_advantages(r, 3), expected_group, rtol=0, atol=1e-15)
    batch_sd = float(np.std([1, 0, 0, 1, 1, 1], ddof=1))
    expected_batch = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0, 0], dtype=torch.float64) / (batch_sd + 1e-4)
    torch.testing.assert_close(group_advantages(r, 3, scale="batch"), expected_batch, rtol=0, atol=1e-15)
    expected_none = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0, 0], dtype=torch.float64)
    torch.testing.assert_close(group_advantages(r, 3, scale="none"), expected_none, rtol=0, atol=1e-15)


@given(
    G=st.integers(2, 16),
    B=st.integers(1, 8),
    scale=st.sampled_from(["group", "batch", "none"]),
    binary=st.booleans(),
    seed=seeds,
)
def test_matches_trl_and_hand_computation(G, B, scale, binary, seed):
    rng = np.random.default_rng(seed)
    r_np = rng.integers(0, 2, G * B).astype(float) if binary else rng.normal(size=G * B)
    r = torch.from_numpy(r_np)
    ours = group_advantages(r, G, scale=scale)
    torch.testing.assert_close(ours, trl_advantages(r, G, scale), rtol=1e-12, atol=1e-12)
    expected = torch.tensor(py_group_advantages(r_np.tolist(), G, scale, 1e-4), dtype=torch.float64)
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)


def test_custom_eps():
    r = torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64)
    for eps in (0.0, 1e-6):
        expected = (r - r.mean()) / (r.std() + eps)
        torch.testing.assert_close(group_advantages(r, 3, eps=eps), expected, rtol=0, atol=1e-15)


def test_constant_group_gives_zero_advantage():
    out = group_advantages(torch.full((8,), 0.7, dtype=torch.float64), 4)
    assert torch.equal(out, torch.zeros(8, dtype=torch.float64))


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_leading_dims_are_independent_batches(scale):
    r = torch.randn(3, 12, dtype=torch.float64)
    out = group_advantages(r, 4, scale=scale)
    assert out.shape == r.shape
    for b in range(3):
        torch.testing.assert_close(out[b], group_advantages(r[b], 4, scale=scale), rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_preserved_and_numpy_accepted(dtype):
    r = torch.randn(12, dtype=dtype)
    assert group_advantages(r, 4).dtype == dtype
    torch.testing.assert_close(group_advantages(r.numpy(), 4), group_advantages(r, 4), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rewards": torch.ones(7), "group_size": 3}, "not divisible"),
        ({"rewards": torch.ones(6), "group_size": 1}, "group_size"),
        ({"rewards": torch.ones(6), "group_size": 0}, "group_size"),
        ({"rewards": torch.ones(6), "group_size": 3.0}, "group_size"),
        ({"rewards": torch.ones(6), "group_size": 3, "scale": "prompt"}, "unknown scale"),
        ({"rewards": torch.ones(6), "group_size": 3, "eps": -1e-4}, "eps"),
        ({"rewards": torch.ones(6), "group_size": 3, "eps": float("nan")}, "eps"),
        ({"rewards": torch.tensor([1.0, float("nan"), 0.0]), "group_size": 3}, "NaN"),
        ({"rewards": torch.tensor([1.0, float("inf"), 0.0]), "group_size": 3}, "inf"),
        ({"rewards": torch.tensor(1.0), "group_size": 2}, "dimension"),
        ({"rewards": torch.ones(6, dtype=torch.int64), "group_size": 3}, "floating-point"),
    ],
    ids=["indivisible", "G1", "G0", "float-G", "scale", "neg-eps", "nan-eps", "nan", "inf", "0d", "int"],
)
def test_group_advantages_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_advantages(**kwargs)


# --- setpo_advantages -----------------------------------------------------------------------------------------------


@given(seed=seeds, lam=st.floats(0.0, 10.0), shape=st.sampled_from([(6,), (4, 6), (2, 3, 6)]))
def test_setpo_advantages_add_lambda_times_credit(seed, lam, shape):
    rng = np.random.default_rng(seed)
    a, s = (torch.from_numpy(rng.normal(size=shape)) for _ in range(2))
    out = setpo_advantages(a, s, lam)
    expected = [x + lam * y for x, y in zip(a.flatten().tolist(), s.flatten().tolist())]
    torch.testing.assert_close(out.flatten(), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=0)


def test_lambda_zero_returns_base_exactly():
    a = torch.randn(24, dtype=torch.float64)
    s = torch.randn(24, dtype=torch.float64) * 1e3
    assert torch.equal(setpo_advantages(a, s, 0.0), a)
    assert torch.equal(setpo_advantages(a, s, 0), a)


def test_credit_is_not_centred_or_clipped():
    """Paper Sec. 2: lambda s_i is added as is, even when every s_i is positive and large."""
    a = torch.zeros(4, dtype=torch.float64)
    s = torch.tensor([5.0, 6.0, 7.0, 100.0], dtype=torch.float64)
    assert torch.equal(setpo_advantages(a, s, 0.5), 0.5 * s)


@pytest.mark.parametrize(
    ("a", "s", "lam", "match"),
    [
        (torch.zeros(6), torch.zeros(5), 0.1, "shape"),
        (torch.zeros(2, 3), torch.zeros(6), 0.1, "shape"),
        (torch.zeros(6), torch.zeros(6), -0.1, "lambda"),
        (torch.zeros(6), torch.zeros(6), float("nan"), "lambda"),
        (torch.zeros(6), torch.zeros(6), float("inf"), "lambda"),
        (torch.zeros(3), torch.tensor([0.0, float("nan"), 0.0]), 0.1, "NaN"),
        (torch.zeros(3, dtype=torch.int64), torch.zeros(3), 0.1, "floating-point"),
        (torch.zeros(3), torch.zeros(3, dtype=torch.int64), 0.1, "floating-point"),
    ],
    ids=["len", "shape", "neg-lambda", "nan-lambda", "inf-lambda", "nan-credit", "int-base", "int-credit"],
)
def test_setpo_advantages_errors(a, s, lam, match):
    with pytest.raises(ValueError, match=match):
        setpo_advantages(a, s, lam)
