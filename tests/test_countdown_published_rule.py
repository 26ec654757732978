"""The published CPU Countdown experiments keep the reward rule their results were computed with ("lenient"), by
name, without a new config key (so run folders written before the rule had a name still resume)."""

from __future__ import annotations

import dataclasses

import pytest

from reproduce import countdown, countdown_evidence, methods_comparison
from reproduce.tasks import countdown as countdown_task
from setpo.tasks.countdown import extract_answer, score_answer, trl_countdown_reward_lenient, trl_reward_for

PROFILES = [
    *countdown.PROFILES.values(),
    *countdown_evidence.PROFILES.values(),
    *methods_comparison.PROFILES.values(),
]


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: type(p).__name__)
def test_published_profiles_name_the_lenient_rule_outside_their_config(prof):
    assert prof.reward_rule == "lenient"
    assert trl_reward_for(prof.reward_rule) is trl_countdown_reward_lenient
    assert "reward_rule" not in dataclasses.asdict(prof)  # the recorded config.json is unchanged


def test_experiment_helpers_read_answers_with_the_lenient_rule():
    two_lines = "<answer>(3+4)*5</answer>\nchecked"  # TinyZero's rule would see no answer here
    assert extract_answer(two_lines) is None
    assert methods_comparison.commutative_answer(two_lines) == methods_comparison.commutative_answer(
        "<answer>5*(4+3)</answer>"
    )
    assert score_answer(two_lines, [3, 4, 5], 35, rule=countdown_task.REWARD_RULE) == (1.0, "correct")
    assert countdown_task.answer_embedder().rule == "lenient"
