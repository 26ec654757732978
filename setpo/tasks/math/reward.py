"""Rule rewards on prepared rows: a TRL reward function and a verl `compute_score`, both math-verify based.

TRL passes every extra dataset column to a reward function as a keyword list, so rows prepared by
`setpo.data` arrive with ``reward_model=[{"ground_truth": ...}, ...]`` and ``extra_info=[...]``.
verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per response when pointed at
this file with ``custom_reward_function.path=<this file> custom_reward_function.name=compute_score``.
"""

from __future__ import annotations

from typing import Any, Sequence

from setpo.eval.verify import MathVerifier

_VERIFIER = MathVerifier()


def _golds(reward_model: dict | None, extra_info: dict | None) -> list[str]:
    answers = (extra_info or {}).get("answers")
    if answers is not None and len(answers) > 0:
        return [str(a) for a in answers]
    if not reward_model or reward_model.get("ground_truth") is None:
        raise ValueError("row has neither extra_info.answers nor reward_model.ground_truth")
    return [str(reward_model["ground_truth"])]


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
    if not (len(completions) == len(reward_model) == len(infos)):
        raise ValueError("completions, reward_model and extra_info must have the same length")
    from setpo.integrations.trl.group_rewards import completion_text  # TRL path only; keeps verl free of trl

    return [float(_VERIFIER(completion_text(c), _golds(rm, ei))) for c, rm, ei in zip(completions, reward_model, infos)]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """verl custom reward: math-verify correctness (1.0 / 0.0) for every math data source prepared by setpo.data."""
    if data_source == "countdown":
        raise ValueError("Countdown rows are scored by setpo.tasks.countdown, not by the math reward")
    return float(_VERIFIER(solution_str, _golds({"ground_truth": ground_truth}, extra_info)))
