"""Group-level rewards scored on the gathered batch: simulated process splits, and the trainer's reward pass.

The group reward under test is GAPO's frequency reward written as one (`setpo.rewards.gapo_rewards` on the first
words): it reads every member of a group, so it is wrong whenever a group is split across processes."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from references import score_gathered  # noqa: E402
from trl_tiny import gapo_group_reward  # noqa: E402

from setpo.integrations.trl import GroupRewardFunction  # noqa: E402
from setpo.rewards import gapo_rewards  # noqa: E402

VALID = ["red", "green", "blue"]


def first_word(text: str) -> str | None:
    words = text.split()
    return words[0] if words else None


def test_gapo_group_reward_equals_gapo_rewards():
    completions = ["red x", "red y", "blue", "pink", "green", "green", "green", ""]
    fn = gapo_group_reward(first_word, valid_set_key="valid")
    got = fn.score(["p"] * 8, completions, 4, valid=[VALID] * 8)
    answers = [first_word(c) for c in completions]
    torch.testing.assert_close(got, gapo_rewards(answers, [VALID] * 8, 4))
    # by hand: group 1 = red, red, blue, (pink invalid): f_red = 2/3, f_blue = 1/3, L = 3
    expected_first = [1 - (2 / 3 - 1 / 3), 1 - (2 / 3 - 1 / 3), 1 - (1 / 3 - 1 / 3), -1.0]
    torch.testing.assert_close(got[:4], torch.tensor(expected_first))


@pytest.mark.parametrize("options", [{"form": "absolute"}, {"count": "leave_one_out"}, {"invalid_reward": -2.0}])
def test_gapo_options_are_passed_through(options):
    completions = ["red", "red", "blue", "x"]
    got = gapo_group_reward(first_word, **options).score(["p"] * 4, completions, 4, valid_answers=[VALID] * 4)
    ref = gapo_rewards([first_word(c) for c in completions], [VALID] * 4, 4, **options)
    torch.testing.assert_close(got, ref)


def test_chat_completions_are_read_as_text():
    completions = [[{"role": "assistant", "content": c}] for c in ("red", "blue", "blue")]
    got = gapo_group_reward(first_word).score(["p"] * 3, completions, 3, valid_answers=[VALID] * 3)
    torch.testing.assert_close(got, gapo_rewards(["red", "blue", "blue"], [VALID] * 3, 3))


@pytest.mark.parametrize(("P", "B"), [(2, 6), (3, 4), (4, 3), (6, 2), (12, 1)])
def test_any_process_split_scores_like_one_process(P, B):
    # 12 rows, G = 4: with B = 6 the middle group is split 2 + 2 across two processes, etc.
    completions = ["red", "red", "blue", "red", "green", "green", "blue", "x", "blue", "blue", "blue", "blue"]
    prompts = [f"q{i // 4}" for i in range(12)]
    valid = [VALID] * 12
    fn = gapo_group_reward(first_word)
    single = fn.score(prompts, completions, 4, valid_answers=valid)
    split = score_gathered(
        fn,
        [prompts[p * B : (p + 1) * B] for p in range(P)],
        [completions[p * B : (p + 1) * B] for p in range(P)],
        4,
        per_process_columns=[{"valid_answers": valid[p * B : (p + 1) * B]} for p in range(P)],
    )
    torch.testing.assert_close(split, single)


def test_scoring_each_process_alone_would_be_wrong():
    # What TRL does with ordinary reward functions (call per process, on local rows) breaks a straddling group:
    # process 0 holds rows 4, 5 = green, green and process 1 holds rows 6, 7 = blue, x of group 1.
    completions = ["red", "red", "blue", "red", "green", "green", "blue", "x", "blue", "blue", "blue", "blue"]
    right = gapo_rewards(completions, [VALID] * 3, 4)
    naive_p0 = gapo_rewards(completions[4:6] + completions[4:6], [VALID], 4)[:2]  # group seen as its local half
    assert not torch.allclose(right[4:6], naive_p0)
    got = score_gathered(
        gapo_group_reward(first_word),
        [["q"] * 6, ["q"] * 6],
        [completions[:6], completions[6:]],
        4,
        per_process_columns=[{"valid_answers": [VALID] * 6}] * 2,
    )
    torch.testing.assert_close(got, right)


def test_group_reward_sees_group_size_and_extra_kwargs():
    seen = {}

    def fn(prompts, completions, group_size, **kwargs):
        seen.update(group_size=group_size, keys=sorted(kwargs))
        return [None if c == "?" else float(i % group_size) for i, c in enumerate(completions)]

    r = GroupRewardFunction(fn, name="pos").score(["p"] * 6, ["a", "?", "b", "c", "d", "e"], 3, col=list(range(6)))
    assert seen == {"group_size": 3, "keys": ["col"]}
    assert torch.isnan(r[1]) and r[[0, 2, 3, 4, 5]].tolist() == [0.0, 2.0, 0.0, 1.0, 2.0]


def test_bad_group_rewards_raise():
    with pytest.raises(ValueError, match=r"lengths differ: 2 rewards from group reward .*, 4 completions"):
        GroupRewardFunction(lambda p, c, g, **k: [0.0, 1.0], name="short").score(["p"] * 4, ["a"] * 4, 2)
    with pytest.raises(ValueError, match="5 rows cannot be split into groups of 2"):
        GroupRewardFunction(lambda p, c, g, **k: [0.0] * 5).score(["p"] * 5, ["a"] * 5, 2)
    with pytest.raises(ValueError, match="lengths differ: 3 prompts, 4 completions"):
        GroupRewardFunction(lambda p, c, g, **k: [0.0] * 4).score(["p"] * 3, ["a"] * 4, 2)
    with pytest.raises(ValueError, match="needs the dataset column 'valid_answers'"):
        gapo_group_reward(first_word).score(["p"] * 3, ["red"] * 3, 3)
    with pytest.raises(ValueError, match="fn must be callable"):
        GroupRewardFunction(3)
    with pytest.raises(ValueError, match="different dataset columns"):
        score_gathered(gapo_group_reward(first_word), [["p"], ["p"]], [["a"], ["b"]], 2, [{"a": [1]}, {"b": [1]}])


def test_calling_a_group_reward_per_process_is_refused():
    # TRL's GRPOTrainer would call it on local rows; that must fail loudly, not give per-process frequencies.
    fn = gapo_group_reward(first_word)
    assert fn.__name__ == "gapo"
    with pytest.raises(TypeError, match="needs whole groups gathered across processes; pass it to SetPOTrainer"):
        fn(prompts=["p"], completions=["red"], valid_answers=[VALID])
