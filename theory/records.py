"""One record per check: what was checked, on how many instances, the worst error or slack, and the verdict."""

from __future__ import annotations

import math
from collections.abc import Sized
from dataclasses import dataclass
from enum import Enum

import torch


class Verdict(str, Enum):
    """Outcome of one check."""

    PASS = "pass"  # the statement held on every instance (within tolerance)
    FAIL = "fail"  # the statement was violated: a bug in the core, the check, or the statement
    COUNTEREXAMPLE = "counterexample"  # an assumption was dropped and a verified instance breaks the conclusion
    NONE_FOUND = "none found"  # an assumption was dropped and the search found no instance breaking the conclusion
    INFO = "info"  # a measurement (tightness, bias, audit findings) with nothing to pass or fail


@dataclass(frozen=True)
class CheckRecord:
    """The outcome of one check of one result (theorem, lemma, corollary, assumption or table)."""

    result: str  # e.g. "Thm 4.4 = D.3"
    check: str  # what was checked, e.g. "ds_i/dk_it vs autograd of loo_credits"
    kind: str  # proof | symbolic | numeric | property | counterexample | tightness | consistency | audit | input
    instances: int  # random instances, symbolic cases, or examples examined
    metric: str  # meaning of `worst`, e.g. "max abs error", "min slack"
    worst: float  # the worst value of `metric` over the instances
    verdict: Verdict
    expected: Verdict = Verdict.PASS  # the verdict the project expects; any other outcome is a failure
    detail: str = ""
    scope: str = ""  # for symbolic checks and proofs: the group sizes covered, e.g. "G = 3..6" or "all G >= 3"
    table: tuple[tuple, ...] = ()  # the measurements behind the record, where the report prints them as a table

    @property
    def ok(self) -> bool:
        """True when the outcome is the expected one (an INFO record is always fine)."""
        return self.verdict == Verdict.INFO or self.verdict == self.expected


def record(
    result: str,
    check: str,
    kind: str,
    instances: int,
    metric: str,
    worst: float,
    ok: bool,
    detail: str = "",
    scope: str = "",
) -> CheckRecord:
    """PASS when `ok`, else FAIL."""
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return CheckRecord(result, check, kind, instances, metric, float(worst), verdict, detail=detail, scope=scope)


def count_record(
    result: str,
    check: str,
    kind: str,
    instances: int,
    failed: int | Sized,
    metric: str = "non-identities",
    detail: str = "",
    scope: str = "",
) -> CheckRecord:
    """PASS when nothing failed: `failed` is a count, or the list of failed cases (then named in the detail)."""
    count = failed if isinstance(failed, int) else len(failed)
    named = f"failed: {failed}" if count and not isinstance(failed, int) else ""
    detail = "; ".join(x for x in (named, detail) if x)
    return record(result, check, kind, instances, metric, count, count == 0, detail, scope)


def error_record(
    result: str, check: str, kind: str, instances: int, errors, tol: float, detail: str = "", metric: str = ""
) -> CheckRecord:
    """PASS when the largest error is finite and <= tol (an identity or a derivative matched to rounding)."""
    worst = _extreme(errors, max)
    metric = metric or f"max abs error (tol {tol:.0e})"
    return record(result, check, kind, instances, metric, worst, math.isfinite(worst) and worst <= tol, detail)


def slack_record(result: str, check: str, kind: str, instances: int, slacks, tol: float) -> CheckRecord:
    """PASS when the smallest slack of an inequality is >= -tol (slack = bound side minus true side)."""
    worst = _extreme(slacks, min)
    ok = math.isfinite(worst) and worst >= -tol
    return record(result, check, kind, instances, f"min slack (tol {tol:.0e})", worst, ok)


def tightness_record(
    result: str, check: str, instances: int, ratios: torch.Tensor, unit: str, least: bool = False, digits: int = 3
) -> CheckRecord:
    """How tight a bound is: the largest ratio true / bound (smallest when `least`, for ratios bound to be >= 1),
    median, 90th percentile. INFO while every ratio is on the bound's side of 1 (to 1e-9), FAIL otherwise: a ratio
    past 1 means the bound itself is violated."""
    if ratios.numel() == 0 or bool(torch.isnan(ratios).any()):
        raise ValueError(f"{check}: no ratios, or NaN among them")
    median, p90 = torch.quantile(ratios, torch.tensor([0.5, 0.9], dtype=ratios.dtype)).tolist()
    worst = float(ratios.min() if least else ratios.max())
    violated = worst < 1 - 1e-9 if least else worst > 1 + 1e-9
    return CheckRecord(
        result,
        check,
        "tightness",
        instances,
        "min ratio" if least else "max ratio",
        worst,
        Verdict.FAIL if violated else Verdict.INFO,
        detail=f"median {median:.{digits}f}, 90th percentile {p90:.{digits}f} over {ratios.numel()} {unit}"
        + (" (BOUND VIOLATED)" if violated else ""),
    )


def search_record(
    result: str,
    check: str,
    instances: int,
    found: bool,
    worst: float,
    detail: str,
    expect_found: bool,
    metric: str = "worst violation",
) -> CheckRecord:
    """A counterexample search with an assumption dropped: the other outcome than `expect_found` is a failure."""
    if not isinstance(expect_found, bool):
        raise ValueError(f"a search needs an expected outcome (True or False), got {expect_found!r}")
    verdict = Verdict.COUNTEREXAMPLE if found else Verdict.NONE_FOUND
    expected = Verdict.COUNTEREXAMPLE if expect_found else Verdict.NONE_FOUND
    return CheckRecord(result, check, "counterexample", instances, metric, worst, verdict, expected, detail)


def sizes_scope(sizes, letter: str = "G") -> str:
    """'G = 3..6' for consecutive sizes, else 'G = 3, 4, 6'."""
    sizes = sorted(sizes)
    if len(sizes) > 2 and sizes == list(range(sizes[0], sizes[-1] + 1)):
        return f"{letter} = {sizes[0]}..{sizes[-1]}"
    return f"{letter} = " + ", ".join(map(str, sizes))


def _extreme(values, pick) -> float:
    """max or min (`pick`) of a tensor, array, number or nested list; NaN when any value is NaN."""
    vals = [float(v) for v in _flat(values)]
    if not vals:
        raise ValueError("a check produced no values to compare")
    return math.nan if any(math.isnan(v) for v in vals) else pick(vals)


def _flat(values) -> list:
    if hasattr(values, "reshape") and hasattr(values, "tolist"):  # torch tensor or numpy array
        return values.reshape(-1).tolist()
    if isinstance(values, (int, float)):
        return [values]
    out = []
    for v in values:
        out.extend(_flat(v))
    return out
