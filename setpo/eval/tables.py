"""Tables 1-2 of the paper (Pass@1 per benchmark + Avg) and side-by-side tables of measured vs reported numbers."""

from __future__ import annotations

import math
from typing import Mapping

from setpo._validate import check_choice, check_str

PAPER_COLUMNS = ("gsm8k", "math500", "college_math", "amc23", "aime24", "aime25")
#: How `scale` is named in errors: it must say what was measured, so measured and reported numbers stay apart.
_SCALE = "scale (the measured run: model, data, steps, seeds)"
COLUMN_TITLES = {
    "gsm8k": "GSM8K",
    "math500": "MATH500",
    "college_math": "College",
    "amc23": "AMC23",
    "aime24": "AIME24",
    "aime25": "AIME25",
    "minerva": "Minerva",
    "olympiadbench": "Olympiad",
}

_METHODS = ("base model", "GRPO", "GSPO", "DAPO", "SetPO+GRPO", "SetPO+GSPO", "SetPO+DAPO")
_T1 = (
    (53.4, 48.1, 19.4, 41.3, 9.9, 4.0, 29.4),
    (89.1, 73.5, 42.2, 53.5, 15.4, 9.7, 47.2),
    (89.5, 73.0, 45.0, 57.7, 17.4, 7.9, 48.4),
    (92.2, 77.6, 47.1, 59.6, 21.7, 11.0, 51.7),
    (92.2, 80.8, 48.3, 60.5, 21.6, 13.6, 52.8),
    (91.6, 75.7, 47.2, 60.9, 21.1, 10.1, 51.1),
    (93.0, 79.2, 49.5, 62.3, 25.3, 13.5, 53.8),
)
_T2 = (
    (39.4, 36.4, 6.6, 29.5, 4.6, 1.8, 19.7),
    (83.0, 67.2, 43.1, 47.5, 11.5, 8.2, 43.4),
    (83.5, 67.2, 43.0, 48.8, 11.1, 5.6, 43.2),
    (85.9, 69.5, 44.3, 50.1, 12.0, 6.6, 44.7),
    (86.9, 72.9, 45.7, 51.3, 13.4, 9.7, 46.7),
    (85.0, 69.4, 44.7, 50.6, 13.2, 7.4, 45.2),
    (86.6, 71.7, 46.5, 53.2, 13.4, 8.9, 46.7),
)


def _table(values) -> dict[str, dict[str, float]]:
    return {m: dict(zip((*PAPER_COLUMNS, "avg"), row)) for m, row in zip(_METHODS, values)}


# Reported Pass@1 (%), as printed (Avg@64; College Math Avg@16; 5 seeds). Printed inconsistencies are kept as
# printed: DAPO 7B Avg 51.7 although its cells average to 51.53; SetPO+GSPO 1.5B Avg 45.2 against 45.05.
REPORTED: dict[str, dict[str, dict[str, float]]] = {
    "Qwen2.5-Math-7B": _table(_T1),  # Table 1
    "Qwen2.5-Math-1.5B": _table(_T2),  # Table 2
}
REPORTED_TABLE = {"Qwen2.5-Math-7B": "Table 1", "Qwen2.5-Math-1.5B": "Table 2"}


def paper_average(row: Mapping[str, float | None]) -> float | None:
    """Avg as the paper defines it: the mean of the six Table 1-2 columns; None if any is missing."""
    vals = [row.get(c) for c in PAPER_COLUMNS]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
        return None
    return sum(vals) / len(vals)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def pass1_table(
    measured: Mapping[str, Mapping[str, float]],
    scale: str,
    reported_model: str | None = "Qwen2.5-Math-1.5B",
    columns: tuple[str, ...] = PAPER_COLUMNS,
) -> str:
    """Markdown: measured Pass@1 (%) per method beside the paper's reported row for the same method.

    ``measured[method][benchmark]`` is Pass@1 in percent; benchmarks not evaluated show "-", and Avg is shown
    only when all six paper columns are present. ``scale`` (model size, data, steps, seeds) heads the table so
    measured and reported numbers cannot be mistaken for one another.
    """
    check_str(scale, _SCALE)
    check_choice(reported_model, "reported model", [*REPORTED, None])
    head = ["method", "source", *(COLUMN_TITLES.get(c, c) for c in columns), "Avg"]
    lines = [
        f"Measured: {scale}.",
        f"Reported: paper {REPORTED_TABLE[reported_model]}, {reported_model}, Avg@64 over 5 seeds."
        if reported_model
        else "",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    paper = REPORTED.get(reported_model, {}) if reported_model else {}
    for method, row in measured.items():
        avg = paper_average(row) if columns == PAPER_COLUMNS else None
        cells = [_fmt(row.get(c)) for c in columns]
        lines.append(f"| {method} | measured | " + " | ".join(cells) + f" | {_fmt(avg)} |")
        if method in paper:
            rep = paper[method]
            lines.append(
                f"| {method} | paper | " + " | ".join(_fmt(rep.get(c)) for c in columns) + f" | {_fmt(rep['avg'])} |"
            )
    return "\n".join(ln for ln in lines if ln is not None) + "\n"


def pass_at_k_table(results: Mapping[str, Mapping[str, dict]], scale: str) -> str:
    """Markdown: pass@k (%) per method and benchmark, one row per (method, benchmark), k as columns."""
    check_str(scale, _SCALE)
    ks = sorted({int(k) for per in results.values() for r in per.values() for k in r["pass@k"]})
    lines = [f"Measured: {scale}.", "", "| method | benchmark | n | " + " | ".join(f"k={k}" for k in ks) + " |"]
    lines.append("|" + "---|" * (3 + len(ks)))
    for method, per in results.items():
        for bench, r in per.items():
            pk = {int(k): v for k, v in r["pass@k"].items()}
            cells = [_fmt(100 * pk[k]) if k in pk else "-" for k in ks]
            lines.append(f"| {method} | {COLUMN_TITLES.get(bench, bench)} | {r['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
