"""The math rule reward on prepared rows: math-verify correctness (1.0 / 0.0) against every acceptable answer.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per response when pointed at
this file with ``custom_reward_function.path=<this file> custom_reward_function.name=compute_score``.
"""

from __future__ import annotations

from typing import Any

from setpo.tasks.math.verify import MathVerifier

_VERIFIER = MathVerifier()


def golds_of(reward_model: dict | None, extra_info: dict | None) -> list[str]:
    """The acceptable answers of a prepared row: extra_info.answers, else reward_model.ground_truth."""
    answers = (extra_info or {}).get("answers")
    if answers is not None and len(answers) > 0:
        return [str(a) for a in answers]
    if not reward_model or reward_model.get("ground_truth") is None:
        raise ValueError("row has neither extra_info.answers nor reward_model.ground_truth")
    return [str(reward_model["ground_truth"])]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """verl custom reward: math-verify correctness (1.0 / 0.0) for every math data source prepared by setpo.data."""
    if data_source == "countdown":
        raise ValueError("Countdown rows are scored by setpo.tasks.countdown, not by the math reward")
    return float(_VERIFIER(solution_str, golds_of({"ground_truth": ground_truth}, extra_info)))
