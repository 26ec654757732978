"""Countdown solution diversity (SetPO paper, Table 3): diversity width and average mode.

* diversity width: number of test problems with >= 2 distinct correct solutions among the samples;
* average mode: mean number of distinct correct solutions over those problems.

"Distinct" is counted at a chosen level of `setpo.tasks.countdown.canonical`: "string" (text without
whitespace), "tree" (same expression, redundant parentheses ignored), "commutative" (operands of + and *
swapped count as one) or "associative" (also regrouping of + - and * /). Correctness and the answer follow a reward rule
(`setpo.tasks.countdown.reward`, TinyZero's by default); an answer that the rule accepts but the parser of
`canonical` does not (TinyZero's rule allows `**`, `//`, decimals and any length) counts by its text without
whitespace at every level.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from setpo._validate import check_callable, check_choice, check_ints, check_len, check_same_len
from setpo.metrics.diversity import check_not_bare_string
from setpo.tasks.countdown.expressions import CanonLevel, canonical
from setpo.tasks.countdown.problems import CountdownProblem
from setpo.tasks.countdown.reward import DEFAULT_RULE, check_rule, extract_answer, problem_of, score_answer

LEVELS: tuple[CanonLevel, ...] = ("string", "tree", "commutative", "associative")


def distinct_correct(
    completions: Sequence[str], problem: CountdownProblem, level: CanonLevel = "tree", rule: str = DEFAULT_RULE
) -> set[str]:
    """Canonical keys (at `level`) of the completions whose answer solves `problem` under the reward `rule`."""
    check_not_bare_string(completions, "completions")
    check_rule(rule)
    keys = set()
    for c in completions:
        if score_answer(c, problem.nums, problem.target, rule=rule)[1] == "correct":
            answer = extract_answer(c, rule)
            try:
                keys.add(canonical(answer, level))
            except ValueError:  # correct for the rule, outside the plain-arithmetic parser
                keys.add("text:" + canonical(answer, "string"))
    return keys


def diversity_width(counts: Sequence[int]) -> int:
    """Number of problems with >= 2 distinct correct solutions (Table 3 "diversity width")."""
    _check_counts(counts)
    return sum(1 for c in counts if c >= 2)


def average_mode(counts: Sequence[int]) -> float:
    """Mean distinct-correct count over the problems counted by `diversity_width` (Table 3 "average mode");
    NaN when no problem has two distinct correct solutions."""
    _check_counts(counts)
    wide = [c for c in counts if c >= 2]
    return sum(wide) / len(wide) if wide else math.nan


def table3_metrics(
    samples: Sequence[Sequence[str]],
    problems: Sequence[CountdownProblem],
    levels: Sequence[CanonLevel] = LEVELS,
    rule: str = DEFAULT_RULE,
) -> dict[str, dict[str, float]]:
    """Width, width share of the problems and average mode at each level, from `samples[i]` = completions of
    `problems[i]` (correct under the reward `rule`); also the per-problem distinct counts."""
    check_len(problems, "problems")
    check_same_len(samples=samples, problems=problems)
    for s in samples:
        check_not_bare_string(s, "each entry of samples")
    out = {}
    for level in levels:
        check_choice(level, "level", LEVELS)
        counts = [len(distinct_correct(s, p, level, rule)) for s, p in zip(samples, problems)]
        out[level] = {
            "width": diversity_width(counts),
            "width_share": diversity_width(counts) / len(problems),
            "average_mode": average_mode(counts),
            "counts": counts,
        }
    return out


def countdown_diversity(
    samples: Sequence[Sequence[str]],
    ground_truths: Sequence[dict],
    levels: Sequence[str] = LEVELS,
    rule: str = DEFAULT_RULE,
) -> dict[str, dict[str, float | int | None]]:
    """Table 3 per canonicalisation level: width (problems with >= 2 distinct correct solutions), its share of
    the problems, and the average mode (mean distinct correct count over those; None when there are none)."""
    metrics = table3_metrics(samples, [problem_of(g) for g in ground_truths], levels, rule)
    return {
        level: {
            "width": m["width"],
            "width_share": m["width_share"],
            "average_mode": None if math.isnan(m["average_mode"]) else m["average_mode"],
        }
        for level, m in metrics.items()
    }


class AnswerEmbedder:
    """Embedder wrapper: embeds the <answer> content of each completion (the whole text when there is none).

    The tags are the same in every completion; leaving them out lets the kernel compare the expressions.
    ``level`` (e.g. "commutative") embeds `canonical(answer, level)` instead, so that `a+b` and `b+a` are one
    solution to the kernel; answers that do not parse are embedded as written. ``rule`` picks the answer as the
    reward rule reads it (`setpo.tasks.countdown.reward`).
    """

    def __init__(self, base, level: CanonLevel | None = None, rule: str = DEFAULT_RULE):
        check_callable(base, "base embedder", " (texts -> (N, d))")
        check_choice(level, "canonical level", (None, "string", "tree", "commutative", "associative"))
        self.base, self.level, self.rule = base, level, check_rule(rule)

    def _text(self, completion: str) -> str:
        answer = extract_answer(completion, self.rule)
        if not answer:
            return completion
        if self.level is None:
            return answer
        try:
            return canonical(answer, self.level)
        except ValueError:
            return answer

    def __call__(self, texts: Sequence[str]):
        return self.base([self._text(t) for t in texts])


def _check_counts(counts: Sequence[int]) -> None:
    check_ints(counts, "counts", minimum=0, kind=numbers.Integral, empty=True)
