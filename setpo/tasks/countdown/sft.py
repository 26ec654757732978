"""Countdown SFT data: solutions drawn with a fixed bias over solution forms, so the base policy is not uniform."""

from __future__ import annotations

import math
import random
import re
from typing import Sequence

from setpo.tasks.countdown.expressions import parse_expression, render
from setpo.tasks.countdown.problems import CountdownProblem
from setpo.tasks.countdown.prompts import answer_completion, make_prompt
from setpo.tasks.countdown.solver import solve


def preference_key(expression: str, nums: Sequence[int]) -> tuple:
    """A fixed "style" order over solutions (lower = preferred): + before - before * before /, numbers in the
    order given, then the text. Used to give the SFT data a biased distribution over solution forms."""
    op_cost = sum({"+": 0, "-": 1, "*": 2, "/": 3}[c] for c in expression if c in "+-*/")
    order = [int(x) for x in re.findall(r"\d+", expression)]
    return (op_cost, order != list(nums), expression)


def biased_solution_weights(solutions: Sequence[str], nums: Sequence[int], decay: float) -> list[float]:
    """Zipf-like weights (rank + 1) ** -decay over `solutions` sorted by `preference_key`; aligned with input order."""
    if decay < 0 or not math.isfinite(decay):
        raise ValueError(f"decay must be finite and >= 0, got {decay}")
    order = sorted(range(len(solutions)), key=lambda i: preference_key(solutions[i], nums))
    w = [0.0] * len(solutions)
    for rank, i in enumerate(order):
        w[i] = (rank + 1.0) ** -decay
    total = sum(w)
    return [x / total for x in w]


def sft_examples(
    problems: Sequence[CountdownProblem],
    per_problem: int,
    decay: float = 1.5,
    template: str = "compact",
    spaces: bool = False,
    seed: int = 0,
) -> list[dict]:
    """Supervised examples {"prompt", "completion", "target", "nums"}: `per_problem` solutions per problem drawn
    from `biased_solution_weights` (with replacement), so the learnt base policy covers several solution forms
    with a bias towards the preferred ones."""
    if per_problem < 1:
        raise ValueError(f"per_problem must be >= 1, got {per_problem}")
    rng = random.Random(seed)
    out = []
    for p in problems:
        sols = solve(p.nums, p.target)
        if not sols:
            raise ValueError(f"problem {p} has no solution")
        texts = [render(parse_expression(s), spaces=spaces) for s in sols]
        for s in rng.choices(texts, weights=biased_solution_weights(texts, p.nums, decay), k=per_problem):
            out.append(
                {
                    "prompt": make_prompt(p, template),
                    "completion": answer_completion(s),
                    "target": p.target,
                    "nums": list(p.nums),
                }
            )
    return out
