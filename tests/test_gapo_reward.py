"""GAPO frequency-aware group reward on hand-worked groups, answer normalisation, and input errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from setpo import gapo_rewards, normalize_answer

V3 = {"red", "green", "blue"}
# One group of 6: "red" twice, "green" and "blue" once, no answer, an answer outside V. 4 valid rollouts, L = 3.
ANSWERS = ["red", "red", "green", "blue", None, "purple"]


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_published_form_by_hand():
    # f_red = 2/4, f_green = f_blue = 1/4; R = 1 - (f - 1/3); invalid -> -1.
    out = gapo_rewards(ANSWERS, [V3], group_size=6, dtype=torch.float64)
    expected = t([1 - (1 / 2 - 1 / 3)] * 2 + [1 - (1 / 4 - 1 / 3)] * 2 + [-1.0, -1.0])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


def test_absolute_form_by_hand():
    out = gapo_rewards(ANSWERS, [V3], group_size=6, form="absolute", dtype=torch.float64)
    expected = t([1 - abs(1 / 2 - 1 / 3)] * 2 + [1 - abs(1 / 4 - 1 / 3)] * 2 + [-1.0, -1.0])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


def test_leave_one_out_count_by_hand():
    # Without the scored rollout: f_red = (2 - 1)/(4 - 1) = 1/3, f_green = f_blue = 0/3.
    out = gapo_rewards(ANSWERS, [V3], group_size=6, count="leave_one_out", dtype=torch.float64)
    expected = t([1.0, 1.0, 1 + 1 / 3, 1 + 1 / 3, -1.0, -1.0])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)
    out_abs = gapo_rewards(ANSWERS, [V3], 6, form="absolute", count="leave_one_out", dtype=torch.float64)
    torch.testing.assert_close(out_abs, t([1.0, 1.0, 1 - 1 / 3, 1 - 1 / 3, -1.0, -1.0]), rtol=0, atol=1e-15)


def test_leave_one_out_single_valid_rollout_has_zero_frequency():
    out = gapo_rewards(["blue", None, "x"], [V3], group_size=3, count="leave_one_out", dtype=torch.float64)
    torch.testing.assert_close(out, t([1 + 1 / 3, -1.0, -1.0]), rtol=0, atol=1e-15)


def test_uniform_coverage_gets_reward_one():
    """Every valid answer equally often: f = 1/L for all, so R = 1 in both forms."""
    answers = ["red", "green", "blue"] * 2
    for form in ("published", "absolute"):
        out = gapo_rewards(answers, [V3], group_size=6, form=form, dtype=torch.float64)
        torch.testing.assert_close(out, torch.ones(6, dtype=torch.float64), rtol=0, atol=1e-15)


def test_collapsed_group():
    """All G rollouts give the same valid answer: f = 1, R = 1 - (1 - 1/L) = 1/L."""
    out = gapo_rewards(["red"] * 4, [V3], group_size=4, dtype=torch.float64)
    torch.testing.assert_close(out, torch.full((4,), 1 / 3, dtype=torch.float64), rtol=0, atol=1e-15)


def test_all_invalid_and_custom_invalid_reward():
    out = gapo_rewards([None, "", "cyan"], [V3], group_size=3, invalid_reward=-0.5, dtype=torch.float64)
    assert torch.equal(out, t([-0.5, -0.5, -0.5]))


def test_groups_are_scored_separately():
    answers = ["red", "red", "green", "dog", "cat", "cat"]
    out = gapo_rewards(answers, [V3, {"dog", "cat"}], group_size=3, dtype=torch.float64)
    expected = t([1 - (2 / 3 - 1 / 3)] * 2 + [1 - (1 / 3 - 1 / 3)] + [1 - (1 / 3 - 1 / 2)] + [1 - (2 / 3 - 1 / 2)] * 2)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


def test_per_row_valid_sets_equal_per_group():
    answers = ["red", "red", "green", "dog", "cat", "cat"]
    per_group = gapo_rewards(answers, [V3, {"dog", "cat"}], group_size=3)
    per_row = gapo_rewards(answers, [V3] * 3 + [{"cat", "dog"}] * 3, group_size=3)
    assert torch.equal(per_group, per_row)


def test_per_row_sets_compared_after_normalisation():
    answers = ["red", "green", "red"]
    rows = [{"Red", "green"}, {"red ", "GREEN."}, ["red", "green"]]
    assert torch.equal(gapo_rewards(answers, rows, 3), gapo_rewards(answers, [{"red", "green"}], 3))


def test_answers_and_valid_sets_are_normalised():
    answers = [" RED. ", "red", "Green!", "  blue", "Ｂｌｕｅ", None]
    out = gapo_rewards(answers, [{"Red", "GREEN", "blue "}], group_size=6, dtype=torch.float64)
    # red x2, green x1, blue x2 (full-width letters fold by NFKC); None invalid; 5 valid.
    expected = t([1 - (2 / 5 - 1 / 3)] * 2 + [1 - (1 / 5 - 1 / 3)] + [1 - (2 / 5 - 1 / 3)] * 2 + [-1.0])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        (None, ""),
        ("  Paris  ", "paris"),
        ("Paris.", "paris"),
        ('"Paris!"', "paris"),
        ("New   York\n", "new york"),
        ("U.S.A.", "u.s.a"),
        ("Straße", "strasse"),
        ("ＰＡＲＩＳ", "paris"),
        ("--42--", "42"),
        ("...", ""),
        ("rock-n-roll", "rock-n-roll"),
    ],
)
def test_normalize_answer(raw, canonical):
    assert normalize_answer(raw) == canonical


@given(st.text(max_size=30))
def test_normalize_answer_is_idempotent(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once


def test_custom_normaliser():
    out = gapo_rewards(["RED", "red"], [{"red"}], group_size=2, normalize=lambda s: s or "", dtype=torch.float64)
    assert torch.equal(out, t([-1.0, 1 - (1.0 - 1.0)]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_dtype_and_shape(dtype):
    out = gapo_rewards(ANSWERS * 2, [V3, V3], group_size=6, dtype=dtype)
    assert out.dtype == dtype and out.shape == (12,)
    assert gapo_rewards(ANSWERS, [V3], 6).dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"answers": ["red"] * 6, "valid_sets": [V3] * 4, "group_size": 3}, "one entry per group"),
        ({"answers": ["red"] * 6, "valid_sets": [], "group_size": 3}, "one entry per group"),
        ({"answers": ["red"] * 4, "valid_sets": [V3, V3, V3, {"red"}], "group_size": 4}, "differ within group 0"),
        ({"answers": ["red"] * 4, "valid_sets": [V3, V3, V3, {"x"}], "group_size": 2}, "differ within group 1"),
        ({"answers": ["red"] * 3, "valid_sets": [set()], "group_size": 3}, "empty valid set"),
        ({"answers": ["red"] * 3, "valid_sets": [{" ", "..."}], "group_size": 3}, "empty valid set"),
        ({"answers": ["red"] * 6, "valid_sets": [V3, set()], "group_size": 3}, "group 1 has an empty"),
        ({"answers": ["red"] * 3, "valid_sets": [V3], "group_size": 3, "form": "squared"}, "unknown form"),
        ({"answers": ["red"] * 3, "valid_sets": [V3], "group_size": 3, "count": "exclusive"}, "unknown count"),
        ({"answers": ["red"] * 5, "valid_sets": [V3], "group_size": 3}, "multiple of group_size"),
        ({"answers": [], "valid_sets": [], "group_size": 3}, "multiple of group_size"),
        ({"answers": ["red"] * 3, "valid_sets": [V3], "group_size": 0}, "group_size"),
        ({"answers": ["red"] * 3, "valid_sets": [V3], "group_size": 3.0}, "group_size"),
    ],
    ids=[
        "sets-length",
        "no-sets",
        "row-sets-differ",
        "row-sets-differ-g1",
        "empty",
        "empty-after-normalise",
        "empty-second-group",
        "form",
        "count",
        "indivisible",
        "no-answers",
        "G0",
        "float-G",
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gapo_rewards(**kwargs)
