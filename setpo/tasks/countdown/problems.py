"""Countdown problems: the problem type, a generator of solvable problems and a loader for TinyZero files."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from setpo._validate import check_int, check_ints
from setpo.files import read_table
from setpo.tasks.countdown.solver import reachable_targets


@dataclass(frozen=True)
class CountdownProblem:
    """One problem: reach `target` from `nums`, each used exactly once."""

    target: int
    nums: tuple[int, ...]

    def __post_init__(self):
        check_int(self.target, "target")
        object.__setattr__(self, "nums", check_ints(self.nums, "nums", minimum=0))

    @property
    def key(self) -> tuple[int, tuple[int, ...]]:
        """Identity up to the order of the numbers (used to keep train and test disjoint)."""
        return self.target, tuple(sorted(self.nums))


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


def load_problems(path: str | Path, limit: int | None = None, n_numbers: int | None = None) -> list[CountdownProblem]:
    """Problems from a TinyZero-style file (.jsonl/.json/.parquet rows with `target` and `nums`).

    `n_numbers` keeps only problems with that many numbers; `limit` keeps the first `limit` of those.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Countdown data file not found: {path}")
    out = []
    for i, row in enumerate(read_table(path)):
        if "target" not in row or "nums" not in row:
            raise ValueError(f"{path} row {i} needs 'target' and 'nums', found {sorted(row)}")
        p = CountdownProblem(_whole(row["target"], path, i), tuple(_whole(x, path, i) for x in row["nums"]))
        if n_numbers is None or len(p.nums) == n_numbers:
            out.append(p)
        if limit is not None and len(out) >= limit:
            break
    return out


def _whole(value, path: Path, row: int) -> int:
    """`value` as an int when it is a whole number (3, 3.0, "3"); a file's 3.7 is refused, not truncated."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not number.is_integer():
        raise ValueError(f"{path} row {row}: target and nums must be whole numbers, got {value!r}")
    return int(number)
