"""Countdown answers: the <answer> tag, the TinyZero rule reward (1.0 correct, 0.1 format score, 0 without an
<answer>...</answer>), its TRL and evaluation forms."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, Sequence

from setpo.tasks.countdown.expressions import evaluate_expression
from setpo.tasks.countdown.problems import CountdownProblem

_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_tagged_answer(text: str) -> str | None:
    """The last <answer>...</answer> content (TinyZero Countdown format), or None."""
    found = _TAG_RE.findall(text)
    return found[-1].strip() if found else None


Outcome = Literal["no_answer", "wrong_numbers", "invalid_expression", "wrong_value", "correct"]


def extract_answer(completion: str, last_line_only: bool = False) -> str | None:
    """The last <answer>...</answer> content of a completion, stripped, or None.

    TinyZero looks only at the last line of the response (`last_line_only=True` reproduces that);
    by default tags anywhere in the completion count.
    """
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a string, got {type(completion).__name__}")
    if last_line_only:
        completion = completion.split("\n")[-1]
    return extract_tagged_answer(completion)


def score_answer(
    completion: str,
    nums: Sequence[int],
    target: int,
    format_score: float = 0.1,
    score: float = 1.0,
    last_line_only: bool = False,
) -> tuple[float, Outcome]:
    """TinyZero Countdown reward with the branch taken: 0 without an <answer>; `format_score` when the answer
    does not use each number exactly once, is not plain arithmetic, or misses the target; `score` on target.

    Departures from TinyZero's `compute_score` (which `eval`s the text): the value is exact (fractions,
    not float with 1e-5 tolerance), and `**`, `//`, `%` and decimal literals are not plain arithmetic.
    """
    eq = extract_answer(completion, last_line_only)
    if eq is None:
        return 0.0, "no_answer"
    used = sorted(int(x) for x in re.findall(r"\d+", eq))
    if used != sorted(nums):
        return format_score, "wrong_numbers"
    try:
        value = evaluate_expression(eq)
    except ValueError:
        return format_score, "invalid_expression"
    if value != target:
        return format_score, "wrong_value"
    return score, "correct"


def countdown_reward(completion: str, nums: Sequence[int], target: int, **kwargs) -> float:
    """The TinyZero Countdown reward of one completion (see `score_answer`)."""
    return score_answer(completion, nums, target, **kwargs)[0]


def correct_answer(completion: str, nums: Sequence[int], target: int) -> str | None:
    """The extracted answer when it solves the problem, else None."""
    return extract_answer(completion) if score_answer(completion, nums, target)[1] == "correct" else None


def trl_countdown_reward(completions, target, nums, **_) -> list[float]:
    """TRL reward function: dataset columns `target` and `nums` arrive as keyword lists, one per completion."""
    if not (len(completions) == len(target) == len(nums)):
        raise ValueError(f"lengths differ: {len(completions)} completions, {len(target)} targets, {len(nums)} nums")
    out = []
    for c, t, n in zip(completions, target, nums):
        text = c if isinstance(c, str) else c[-1]["content"]  # plain or conversational completions
        out.append(countdown_reward(text, list(n), int(t)))
    return out


def problem_of(ground_truth: Mapping) -> CountdownProblem:
    """The problem of a prepared Countdown row's ``reward_model.ground_truth`` ({"target", "numbers"}; the numbers
    may be a list or the array a parquet file reads back)."""
    if not isinstance(ground_truth, Mapping) or "target" not in ground_truth or "numbers" not in ground_truth:
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
