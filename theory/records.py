"""One record per check: what was checked, on how many instances, the worst error or slack, and the verdict."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
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
    seconds: float = 0.0
    scope: str = ""  # for symbolic checks and proofs: the group sizes covered, e.g. "G = 3..6" or "all G >= 3"

    @property
    def ok(self) -> bool:
        """True when the outcome is the expected one (an INFO record is always fine)."""
        return self.verdict == Verdict.INFO or self.verdict == self.expected


def error_record(
    result: str,
    check: str,
    kind: str,
    instances: int,
    errors,
    tol: float,
    detail: str = "",
    metric: str = "",
    scope: str = "",
) -> CheckRecord:
    """PASS when the largest error is finite and <= tol (an identity or a derivative matched to rounding)."""
    worst = _max(errors)
    verdict = Verdict.PASS if math.isfinite(worst) and worst <= tol else Verdict.FAIL
    return CheckRecord(
        result,
        check,
        kind,
        instances,
        metric or f"max abs error (tol {tol:.0e})",
        worst,
        verdict,
        detail=detail,
        scope=scope,
    )


def sizes_scope(sizes, letter: str = "G") -> str:
    """'G = 3..6' for consecutive sizes, else 'G = 3, 4, 6'."""
    sizes = sorted(sizes)
    if len(sizes) > 2 and sizes == list(range(sizes[0], sizes[-1] + 1)):
        return f"{letter} = {sizes[0]}..{sizes[-1]}"
    return f"{letter} = " + ", ".join(map(str, sizes))


def slack_record(
    result: str, check: str, kind: str, instances: int, slacks, tol: float, detail: str = "", metric: str = ""
) -> CheckRecord:
    """PASS when the smallest slack of an inequality is >= -tol (slack = bound side minus true side)."""
    worst = _min(slacks)
    verdict = Verdict.PASS if math.isfinite(worst) and worst >= -tol else Verdict.FAIL
    return CheckRecord(
        result, check, kind, instances, metric or f"min slack (tol {tol:.0e})", worst, verdict, detail=detail
    )


def search_record(
    result: str,
    check: str,
    instances: int,
    found: bool,
    worst: float,
    detail: str,
    expect_found: bool | None,
    metric: str = "worst violation",
) -> CheckRecord:
    """A counterexample search with an assumption dropped; `expect_found` None means either outcome is fine."""
    verdict = Verdict.COUNTEREXAMPLE if found else Verdict.NONE_FOUND
    if expect_found is None:
        expected = verdict
    else:
        expected = Verdict.COUNTEREXAMPLE if expect_found else Verdict.NONE_FOUND
    return CheckRecord(result, check, "counterexample", instances, metric, worst, verdict, expected, detail)


def timed(fn: Callable[..., CheckRecord]) -> Callable[..., CheckRecord]:
    """Wrap a check so its record carries its wall-clock time."""

    def wrapper(*args, **kwargs) -> CheckRecord:
        start = time.perf_counter()
        rec = fn(*args, **kwargs)
        return replace(rec, seconds=time.perf_counter() - start)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


def _max(values) -> float:
    if isinstance(values, torch.Tensor):
        return _tensor_extreme(values, torch.max)
    vals = [float(v) for v in _flat(values)]
    if not vals:
        raise ValueError("a check produced no values to compare")
    return math.nan if any(math.isnan(v) for v in vals) else max(vals)


def _min(values) -> float:
    if isinstance(values, torch.Tensor):
        return _tensor_extreme(values, torch.min)
    vals = [float(v) for v in _flat(values)]
    if not vals:
        raise ValueError("a check produced no values to compare")
    return math.nan if any(math.isnan(v) for v in vals) else min(vals)


def _tensor_extreme(t: torch.Tensor, op) -> float:
    if t.numel() == 0:
        raise ValueError("a check produced no values to compare")
    return math.nan if bool(torch.isnan(t).any()) else float(op(t))


def _flat(values):
    if hasattr(values, "reshape") and hasattr(values, "tolist"):  # torch tensor or numpy array
        return values.reshape(-1).tolist()
    if isinstance(values, (int, float)):
        return [values]
    out = []
    for v in values:
        out.extend(_flat(v))
    return out
