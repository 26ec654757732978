"""Countdown evaluation: correctness by the TinyZero rule (setpo.tasks.countdown) and Table 3's diversity width /
average mode (setpo.metrics.countdown_diversity) over the sampled completions of each test problem."""

from __future__ import annotations

import math
from typing import Sequence

from setpo.metrics.countdown_diversity import LEVELS, table3_metrics
from setpo.tasks.countdown import CountdownProblem, score_answer


def problem_of(ground_truth: dict) -> CountdownProblem:
    """The problem of a prepared Countdown row's ``reward_model.ground_truth`` ({"target", "numbers"})."""
    if not isinstance(ground_truth, dict) or "target" not in ground_truth or "numbers" not in ground_truth:
        raise ValueError(f"Countdown ground truth must be {{'target', 'numbers'}}, got {ground_truth!r}")
    return CountdownProblem(int(ground_truth["target"]), tuple(int(n) for n in ground_truth["numbers"]))


def countdown_checker():
    """Checker for Countdown rows: True when the <answer> reaches the target using each number exactly once."""

    def check(completions: Sequence[str], golds: Sequence[dict]) -> list[bool]:
        out = []
        for c, g in zip(completions, golds):
            p = problem_of(g)
            out.append(score_answer(c, p.nums, p.target)[1] == "correct")
        return out

    return check


def countdown_diversity(
    samples: Sequence[Sequence[str]], ground_truths: Sequence[dict], levels: Sequence[str] = LEVELS
) -> dict[str, dict[str, float | int | None]]:
    """Table 3 per canonicalisation level: width (problems with >= 2 distinct correct solutions), its share of
    the problems, and the average mode (mean distinct correct count over those; None when there are none)."""
    metrics = table3_metrics(samples, [problem_of(g) for g in ground_truths], levels)
    return {
        level: {
            "width": m["width"],
            "width_share": m["width_share"],
            "average_mode": None if math.isnan(m["average_mode"]) else m["average_mode"],
        }
        for level, m in metrics.items()
    }
