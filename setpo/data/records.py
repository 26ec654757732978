"""Build verl-format rows: data_source, prompt (chat list), ability, reward_model, extra_info.

Every row's ``extra_info`` has the same fields and types (`EXTRA_INFO_FIELDS`), whatever the dataset: verl
concatenates validation files (GSM8K + MATH500, MATH500 + AIME24) and `datasets` 3.x / 4.x refuse struct columns
whose fields differ.
"""

from __future__ import annotations

import math
from typing import Any

from setpo.data.sources import SPECS, DatasetSpec
from setpo.tasks.countdown.prompts import countdown_prompt
from setpo.tasks.math.extract import extract_boxed, extract_gsm8k_answer
from setpo.tasks.math.prompts import math_messages

#: Dataset-specific metadata fields, one union for every dataset (strings; None where a dataset lacks one).
META_FIELDS: tuple[str, ...] = tuple(sorted({f for s in SPECS.values() for f in s.extra_fields}))
#: The fixed extra_info schema: split, index, problem, answers (all acceptable golds), then META_FIELDS.
EXTRA_INFO_FIELDS: tuple[str, ...] = ("split", "index", "problem", "answers", *META_FIELDS)

# Gold answers the source spells so that no checker can match them, keyed by (dataset, id field value); the
# accepted answers replace the source's. OlympiadBench 1782: "m_{\max }=n^{2}-n-1" parses to nothing (only the
# exact string matched; it stays accepted as written); 1965: a sentence whose last formula "\mho(a)=0" parsed to
# 0, so \boxed{0} was accepted (the condition on a is not checkable; the function form is kept); 2045: "t(0,4]",
# a typo for the interval (0,4].
GOLD_CORRECTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("olympiadbench", "1782"): ("n^{2}-n-1", "m_{\\max }=n^{2}-n-1"),
    ("olympiadbench", "1965"): ("f(x)=a x+b",),
    ("olympiadbench", "2045"): ("(0,4]",),
}
# Minerva boxes written as Python rather than LaTeX (idx 5, 38, 49): the LaTeX form first, the source kept too.
MINERVA_SPELLINGS: dict[str, str] = {
    "np.arcsin(10/13)": "\\arcsin\\left(\\frac{10}{13}\\right)",
    "-1./3": "-\\frac{1}{3}",
    "-3./2": "-\\frac{3}{2}",
}


def _first(row: dict, fields: tuple[str, ...], what: str, spec: DatasetSpec) -> Any:
    for f in fields:
        value = row
        for part in f.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return value
    raise ValueError(f"{spec.key}: row has no {what} field (looked for {', '.join(fields)}; found {sorted(row)})")


def _answer_str(value: Any) -> str:
    """An answer as text; integral floats (AMC23 stores 27.0) become integers."""
    if isinstance(value, bool):
        raise ValueError(f"boolean answer {value!r}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _as_list(value: Any) -> list:
    if hasattr(value, "tolist"):  # numpy arrays / scalars read back from parquet
        value = value.tolist()
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _minerva_answers(row: dict, spec: DatasetSpec) -> list[str]:
    """Minerva: the last \\boxed{} of the solution is the gold (the asked subproblem's answer, as in the
    Qwen2.5-Math evaluation); answer-field forms are kept only as extra spellings of the same value."""
    boxed = extract_boxed(row["solution"])
    if boxed is None or not boxed.strip():
        raise ValueError(f"{spec.key}: solution has no \\boxed{{}} answer: {str(row['solution'])[-120:]!r}")
    golds = [MINERVA_SPELLINGS[boxed], boxed] if boxed in MINERVA_SPELLINGS else [boxed]
    if row.get("answer") is not None:
        from setpo.tasks.math.verify import MathVerifier  # math-verify is needed only for this cross-check

        same = MathVerifier()
        for a in (_answer_str(v) for v in _as_list(row["answer"])):
            # both directions: an earlier subproblem's answer printed in the prompt must not slip in
            if a and a not in golds and same(f"\\boxed{{{a}}}", golds) and same(f"\\boxed{{{golds[0]}}}", [a]):
                golds.append(a)
    return golds


def answers_of(row: dict, spec: DatasetSpec) -> list[str]:
    """All acceptable reference answers of a math row (first one is the canonical ground truth)."""
    fmt = spec.answer_format
    if fmt == "gsm8k":
        return [extract_gsm8k_answer(_first(row, spec.answer_fields, "answer", spec))]
    if fmt == "minerva" and isinstance(row.get("solution"), str):
        return _minerva_answers(row, spec)
    key = (spec.key, str(row.get("id")))
    if key in GOLD_CORRECTIONS:
        return list(GOLD_CORRECTIONS[key])
    value = _first(row, spec.answer_fields, "answer", spec)
    out = [_answer_str(v) for v in _as_list(value)]
    out = [a for a in dict.fromkeys(out) if a]
    if not out:
        raise ValueError(f"{spec.key}: empty reference answer in row {str(row)[:120]}")
    return out


def _meta(row: dict, spec: DatasetSpec) -> dict[str, str | None]:
    own = set(spec.extra_fields)
    return {f: (None if f not in own or row.get(f) is None else str(row.get(f))) for f in META_FIELDS}


def build_record(row: dict, spec: DatasetSpec, split: str, index: int) -> dict:
    """One verl row from one raw row (extra_info always has the fields of EXTRA_INFO_FIELDS, in that order)."""
    if spec.task == "countdown":
        target, nums = row.get("target"), row.get("nums")
        if target is None or nums is None:
            raise ValueError(f"countdown row needs 'target' and 'nums', found {sorted(row)}")
        nums = [int(n) for n in nums]
        return {
            "data_source": spec.key,
            "prompt": [{"role": "user", "content": countdown_prompt(nums, int(target))}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": {"target": int(target), "numbers": nums}},
            "extra_info": {"split": split, "index": index, "problem": None, "answers": [], **_meta(row, spec)},
        }
    problem = str(_first(row, spec.problem_fields, "problem", spec))
    answers = answers_of(row, spec)
    return {
        "data_source": spec.key,
        "prompt": math_messages(problem),
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answers[0]},
        "extra_info": {"split": split, "index": index, "problem": problem, "answers": answers, **_meta(row, spec)},
    }
