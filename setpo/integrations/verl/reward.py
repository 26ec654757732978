"""verl custom reward for the rows written by ``python -m setpo.data.prepare``: math via math-verify, Countdown rules.

Point verl at it with ``reward.custom_reward_function.path=pkg://setpo.integrations.verl.reward``
``reward.custom_reward_function.name=compute_score``. Math data sources go to ``setpo.eval.rewards.compute_score``
(1.0 / 0.0); ``countdown`` goes to ``setpo.tasks.countdown.countdown_reward`` (TinyZero: 0 without an
<answer>, 0.1 format score, 1.0 on target).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _countdown_truth(ground_truth: Any) -> tuple[list[int], int]:
    if not isinstance(ground_truth, Mapping) or "target" not in ground_truth or "numbers" not in ground_truth:
        raise ValueError(
            f"a countdown ground_truth must be a mapping with 'target' and 'numbers', got {ground_truth!r}"
        )
    nums = ground_truth["numbers"]
    nums = nums.tolist() if hasattr(nums, "tolist") else list(nums)
    return [int(n) for n in nums], int(ground_truth["target"])


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **_: Any
) -> float:
    """Reward of one response for a prepared row (verl's ``compute_score`` signature; extra keywords ignored)."""
    if data_source == "countdown":
        from setpo.tasks.countdown import countdown_reward

        nums, target = _countdown_truth(ground_truth)
        return float(countdown_reward(solution_str, nums, target))
    from setpo.eval.rewards import compute_score as math_score

    return math_score(data_source, solution_str, ground_truth, extra_info)
