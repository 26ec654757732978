"""Countdown problems for the CPU experiments: the exhaustive solver (every expression tree over the numbers, in
exact fractions; solutions; reachable targets), a generator of solvable problems, and supervised data drawn with a
fixed bias over solution forms, so the tiny start policy is not uniform."""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from setpo._validate import check_ints
from setpo.tasks.countdown import CountdownProblem, Expr, answer_completion, make_prompt, parse_expression, render

# --------------------------------------------------------------------------- solver


def _check_nums(nums: Sequence[int], limit: int = 6) -> tuple[int, ...]:
    nums = check_ints(nums, "nums", minimum=0)
    if len(nums) > limit:
        raise ValueError(f"exhaustive enumeration supports at most {limit} numbers, got {len(nums)}")
    return nums


def all_expressions(nums: Sequence[int]) -> dict[str, tuple[Expr, Fraction]]:
    """Every expression tree using each number exactly once with + - * /, keyed by its text; value exact.

    Trees are built over index subsets: the root splits the used indices into an ordered pair of
    non-empty parts, so each tree appears once (repeated numbers give repeated texts, merged by the key).
    Divisions by zero are left out. The result does not depend on the order of `nums` (cached on the
    sorted numbers; treat it as read-only).
    """
    return _all_expressions(tuple(sorted(_check_nums(nums))))


@lru_cache(maxsize=4096)
def _all_expressions(nums: tuple[int, ...]) -> dict[str, tuple[Expr, Fraction]]:
    n = len(nums)
    table: dict[int, list[tuple[Expr, Fraction]]] = {1 << i: [(x, Fraction(x))] for i, x in enumerate(nums)}
    for mask in sorted(range(1, 1 << n), key=lambda m: bin(m).count("1")):
        if mask in table:
            continue
        out = []
        sub = (mask - 1) & mask
        while sub:
            rest = mask ^ sub
            for (ea, va), (eb, vb) in itertools.product(table[sub], table[rest]):
                out.append((("+", ea, eb), va + vb))
                out.append((("-", ea, eb), va - vb))
                out.append((("*", ea, eb), va * vb))
                if vb != 0:
                    out.append((("/", ea, eb), va / vb))
            sub = (sub - 1) & mask
        table[mask] = out
    return {render(e): (e, v) for e, v in table[(1 << n) - 1]}


def solve(nums: Sequence[int], target: int | Fraction) -> list[str]:
    """All distinct expression texts (see `render`) using each number once that equal `target` exactly; sorted."""
    target = Fraction(target)
    return sorted(t for t, (_, v) in all_expressions(_check_nums(nums)).items() if v == target)


def reachable_targets(nums: Sequence[int], lo: int, hi: int) -> dict[int, int]:
    """Integer targets in [lo, hi] reachable from `nums`, with their number of distinct solution texts."""
    counts: dict[int, int] = {}
    for _, v in all_expressions(_check_nums(nums)).values():
        if v.denominator == 1 and lo <= v <= hi:
            counts[int(v)] = counts.get(int(v), 0) + 1
    return counts


# --------------------------------------------------------------------------- problems


def generate_problems(
    n: int,
    n_numbers: int = 3,
    max_number: int = 10,
    min_target: int = 1,
    max_target: int = 30,
    min_solutions: int = 1,
    seed: int = 0,
    exclude: set | frozenset = frozenset(),
    max_tries: int = 100_000,
) -> list[CountdownProblem]:
    """`n` distinct solvable problems: numbers uniform in [1, max_number], target uniform over the integers in
    [min_target, max_target] that have at least `min_solutions` distinct solution texts. Problems whose `key`
    is in `exclude` are skipped (pass the training keys to draw a disjoint test set)."""
    if n < 0 or n_numbers < 1 or max_number < 1 or min_target > max_target or min_solutions < 1:
        raise ValueError(
            f"bad generator settings: n={n}, n_numbers={n_numbers}, max_number={max_number}, "
            f"targets [{min_target}, {max_target}], min_solutions={min_solutions}"
        )
    rng = random.Random(seed)
    out: list[CountdownProblem] = []
    seen = set(exclude)
    for _ in range(max_tries):
        if len(out) == n:
            return out
        nums = tuple(rng.randint(1, max_number) for _ in range(n_numbers))
        counts = reachable_targets(nums, min_target, max_target)
        targets = sorted(t for t, c in counts.items() if c >= min_solutions)
        if not targets:
            continue
        p = CountdownProblem(rng.choice(targets), nums)
        if p.key in seen:
            continue
        seen.add(p.key)
        out.append(p)
    if len(out) < n:
        raise ValueError(
            f"found only {len(out)} of {n} distinct problems in {max_tries} tries; widen the number/target ranges"
        )
    return out


# --------------------------------------------------------------------------- supervised data


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
