"""The math prompt: the paper's instruction after the problem, in SimpleRL-Zoo's "qwen_boxed" chat form."""

from __future__ import annotations

from setpo._validate import check_str

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

#: The system message of the math prompt. Without one, Qwen2.5-Math's chat template inserts MATH_INSTRUCTION as a
#: default system message, so the instruction would appear twice; this is SimpleRL-Zoo's "qwen_boxed" prompt.
MATH_SYSTEM = "You are a helpful assistant."


def math_prompt(problem: str) -> str:
    """The problem followed by the paper's instruction (Sec. 5 setup)."""
    check_str(problem, "math problem text")
    return f"{problem.strip()}\n{MATH_INSTRUCTION}"


def math_messages(problem: str) -> list[dict[str, str]]:
    """The chat prompt of a math problem: MATH_SYSTEM, then the problem followed by the instruction."""
    return [{"role": "system", "content": MATH_SYSTEM}, {"role": "user", "content": math_prompt(problem)}]
