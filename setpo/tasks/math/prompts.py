"""Prompt templates: the paper's math instruction and TinyZero's Countdown "base" template."""

from __future__ import annotations

from typing import Sequence

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

#: The system message of the math prompt. Without one, Qwen2.5-Math's chat template inserts MATH_INSTRUCTION as a
#: default system message, so the instruction would appear twice; this is SimpleRL-Zoo's "qwen_boxed" prompt.
MATH_SYSTEM = "You are a helpful assistant."


def math_prompt(problem: str) -> str:
    """The problem followed by the paper's instruction (Sec. 5 setup)."""
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError("math problem text must be a non-empty string")
    return f"{problem.strip()}\n{MATH_INSTRUCTION}"


def math_messages(problem: str) -> list[dict[str, str]]:
    """The chat prompt of a math problem: MATH_SYSTEM, then the problem followed by the instruction."""
    return [{"role": "system", "content": MATH_SYSTEM}, {"role": "user", "content": math_prompt(problem)}]


def countdown_prompt(nums: Sequence[int], target: int) -> str:
    """TinyZero's "base" Countdown template (numbers, target, <think>/<answer> tags), ending in <think>."""
    nums = list(nums)
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise ValueError(f"countdown numbers must be a non-empty list of ints, got {nums!r}")
    if not isinstance(target, int) or isinstance(target, bool):
        raise ValueError(f"countdown target must be an int, got {target!r}")
    return (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
        "The assistant first thinks about the reasoning process in the mind and then provides the user with the "
        f"answer.\nUser: Using the numbers {nums}, create an equation that equals {target}. You can use basic "
        "arithmetic operations (+, -, *, /) and each number can only be used once. Show your work in <think> "
        "</think> tags. And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 "
        "</answer>.\nAssistant: Let me solve this step by step.\n<think>"
    )
