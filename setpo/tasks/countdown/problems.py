"""Countdown problems: the problem type and a loader for TinyZero files."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from setpo._validate import check_int, check_ints
from setpo.files import read_table


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
