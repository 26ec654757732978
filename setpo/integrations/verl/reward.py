"""verl custom reward for the rows written by ``python -m setpo.data.prepare``: math via math-verify, Countdown rules.

Point verl at it with ``reward.custom_reward_function.path=pkg://setpo.integrations.verl.reward``
``reward.custom_reward_function.name=compute_score``. Math data sources go to ``setpo.tasks.math.reward.compute_score``
(1.0 / 0.0); ``countdown`` goes to ``setpo.tasks.countdown.countdown_reward`` under TinyZero's ``compute_score``
rule (last line of the response only, 0 without an <answer>, 0.1 format score, 1.0 within 1e-5 of the target).
verl 0.9.1's reward managers pass the response alone, decoded with ``skip_special_tokens=True``
(``verl/experimental/reward_loop/reward_manager/naive.py``); TinyZero scored prompt + response, which for its
prompts reads the same last line (see ``setpo.tasks.countdown.reward``).
"""

from __future__ import annotations

from typing import Any


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **_: Any
) -> float:
    """Reward of one response for a prepared row (verl's ``compute_score`` signature; extra keywords ignored)."""
    if data_source == "countdown":
        from setpo.tasks.countdown.reward import countdown_reward, problem_of

        problem = problem_of(ground_truth)
        return float(countdown_reward(solution_str, list(problem.nums), problem.target, rule="tinyzero"))
    from setpo.tasks.math.reward import compute_score as math_score

    return math_score(data_source, solution_str, ground_truth, extra_info)
