"""Build verl-format rows: data_source, prompt (chat list), ability, reward_model, extra_info."""

from __future__ import annotations

import math
from typing import Any

from setpo.data.prompts import countdown_prompt, math_prompt
from setpo.data.sources import DatasetSpec
from setpo.eval.extract import extract_boxed, extract_gsm8k_answer


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


def answers_of(row: dict, spec: DatasetSpec) -> list[str]:
    """All acceptable reference answers of a math row (first one is the canonical ground truth)."""
    fmt = spec.answer_format
    if fmt == "gsm8k":
        return [extract_gsm8k_answer(_first(row, spec.answer_fields, "answer", spec))]
    if fmt == "minerva" and "answer" not in row and "solution" in row:
        boxed = extract_boxed(row["solution"])
        if boxed is None:
            raise ValueError(f"{spec.key}: solution has no \\boxed{{}} answer and no answer field")
        return [boxed]
    value = _first(row, spec.answer_fields, "answer", spec)
    if hasattr(value, "tolist"):  # numpy arrays / scalars read back from parquet
        value = value.tolist()
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    out = [_answer_str(v) for v in values]
    out = [a for a in dict.fromkeys(out) if a]
    if not out:
        raise ValueError(f"{spec.key}: empty reference answer in row {str(row)[:120]}")
    return out


def _extras(row: dict, spec: DatasetSpec) -> dict[str, str | None]:
    return {f: (None if row.get(f) is None else str(row.get(f))) for f in spec.extra_fields}


def build_record(row: dict, spec: DatasetSpec, split: str, index: int) -> dict:
    """One verl row from one raw row."""
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
            "extra_info": {"split": split, "index": index},
        }
    problem = str(_first(row, spec.problem_fields, "problem", spec))
    answers = answers_of(row, spec)
    return {
        "data_source": spec.key,
        "prompt": [{"role": "user", "content": math_prompt(problem)}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answers[0]},
        "extra_info": {"split": split, "index": index, "problem": problem, "answers": answers, **_extras(row, spec)},
    }
