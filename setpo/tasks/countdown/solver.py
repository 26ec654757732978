"""Countdown solver: every expression tree over the numbers (exact fractions), its solutions and reachable targets."""

from __future__ import annotations

import itertools
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

from setpo._validate import check_ints
from setpo.tasks.countdown.expressions import Expr, render


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
