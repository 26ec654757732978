"""Countdown prompts: TinyZero's "base" template (the paper's), a compact one for tiny models, SFT completions."""

from __future__ import annotations

from typing import Sequence

from setpo._validate import check_choice, check_int, check_ints
from setpo.tasks.countdown.problems import CountdownProblem


def countdown_prompt(nums: Sequence[int], target: int) -> str:
    """TinyZero's "base" Countdown template (numbers, target, <think>/<answer> tags), ending in <think>."""
    nums = list(check_ints(nums, "countdown numbers"))
    check_int(target, "countdown target")
    return (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
        "The assistant first thinks about the reasoning process in the mind and then provides the user with the "
        f"answer.\nUser: Using the numbers {nums}, create an equation that equals {target}. You can use basic "
        "arithmetic operations (+, -, *, /) and each number can only be used once. Show your work in <think> "
        "</think> tags. And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 "
        "</answer>.\nAssistant: Let me solve this step by step.\n<think>"
    )


TEMPLATES = ("base", "compact")


def make_prompt(problem: CountdownProblem, template: str = "base") -> str:
    """Prompt text. "base": TinyZero's base template (the paper's); "compact": one line for tiny char-level models."""
    if check_choice(template, "template", TEMPLATES) == "base":
        return countdown_prompt(list(problem.nums), problem.target)
    return f"Make {problem.target} from {list(problem.nums)}.\n"


def answer_completion(expression: str) -> str:
    """The completion an SFT example teaches: the expression inside <answer> tags."""
    return f"<answer>{expression}</answer>"
