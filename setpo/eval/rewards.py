"""TRL reward on prepared math rows: math-verify correctness of each completion (setpo.tasks.math.reward).

TRL passes every extra dataset column to a reward function as a keyword list, so rows prepared by
`setpo.data` arrive with ``reward_model=[{"ground_truth": ...}, ...]`` and ``extra_info=[...]``.
"""

from __future__ import annotations

from typing import Any, Sequence

from setpo._validate import check_same_len
from setpo.tasks.math.reward import golds_of
from setpo.tasks.math.verify import MathVerifier

_VERIFIER = MathVerifier()


def math_accuracy_reward(
    completions: Sequence[Any],
    reward_model: Sequence[dict] | None = None,
    extra_info: Sequence[dict] | None = None,
    **_: Any,
) -> list[float]:
    """TRL reward: 1.0 when math-verify accepts the completion's answer, else 0.0."""
    if reward_model is None:
        raise ValueError("math_accuracy_reward needs the dataset column 'reward_model' (prepared by setpo.data)")
    infos = extra_info if extra_info is not None else [None] * len(completions)
    check_same_len(completions=completions, reward_model=reward_model, extra_info=infos)
    from setpo.integrations.trl.group_rewards import completion_text  # imported here: setpo.integrations.trl loads trl

    return [
        float(_VERIFIER(completion_text(c), golds_of(rm, ei))) for c, rm, ei in zip(completions, reward_model, infos)
    ]
