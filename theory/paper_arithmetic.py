"""Audit of the paper's own arithmetic: every Avg column, every printed gain, text-vs-table values, Table 3.

Data: theory/data/paper_tables.json (printed cell values of Tables 1-3, the printed gains we have, values
quoted in the text, and the inconsistencies already known). Arithmetic is exact (decimal).
Rounding rules: an Avg is *consistent* when it equals the mean of its six printed cells rounded half up to
one decimal; *within cell rounding* when it differs but by at most 0.1 (each cell is itself rounded to
0.05, so the unrounded mean can sit 0.05 away, plus 0.05 for rounding the Avg); *inconsistent* beyond
that. A printed gain is compared with the difference of its two printed cells the same way (both are
multiples of 0.1, so at most 0.1 apart is explainable by rounding).
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from pathlib import Path

from theory.records import CheckRecord, record

RESULT = "Paper arithmetic"
NO_GENERAL_PROOF = "an audit of printed numbers"
DATA = Path(__file__).parent / "data" / "paper_tables.json"
TENTH = Decimal("0.1")


@dataclass(frozen=True)
class Item:
    """One audited number."""

    kind: str  # avg | gain | text | setting | table3 | recomputed gain
    label: str
    printed: str
    recomputed: str
    difference: str
    status: str  # consistent | within cell rounding | inconsistent | not printed
    note: str = ""


def load(path: Path = DATA) -> dict:
    """The transcribed tables."""
    return json.loads(Path(path).read_text())


def _d(x) -> Decimal:
    return Decimal(str(x))


def _status(printed: Decimal, exact: Decimal) -> str:
    if printed == exact.quantize(TENTH, ROUND_HALF_UP):
        return "consistent"
    return "within cell rounding" if abs(printed - exact) <= TENTH else "inconsistent"


def _cell(table: dict, row: str, column: str) -> Decimal:
    return _d(table["rows"][row][table["columns"].index(column)])


def audit(data: dict | None = None) -> list[Item]:
    """Every check of the audit, in report order."""
    data = load() if data is None else data
    items: list[Item] = []
    for tid in ("1", "2"):
        table = data["tables"][tid]
        for row in table["rows"]:
            cells = [_cell(table, row, c) for c in table["avg_of"]]
            mean = sum(cells) / len(cells)
            printed = _cell(table, row, "Avg")
            note = ""
            if mean.quantize(Decimal("0.01")) * 100 % 10 == 5 and mean == mean.quantize(Decimal("0.01")):
                half_even = mean.quantize(TENTH, ROUND_HALF_EVEN)
                note = f"exact tie: half-up {mean.quantize(TENTH, ROUND_HALF_UP)}, half-even {half_even}"
            items.append(
                Item(
                    "avg",
                    f"Table {tid} Avg {row}",
                    str(printed),
                    f"{mean:.4f}",
                    f"{printed - mean:+.4f}",
                    _status(printed, mean),
                    note,
                )
            )
    for gain in data["printed_gains"]:
        table = data["tables"][gain["table"]]
        exact = _cell(table, gain["row"], gain["column"]) - _cell(table, gain["baseline"], gain["column"])
        printed = _d(gain["printed"])
        items.append(
            Item(
                "gain",
                f"Table {gain['table']} gain {gain['row']} vs {gain['baseline']} {gain['column']}",
                f"{printed:+}",
                f"{exact:+}",
                f"{printed - exact:+}",
                _status(printed, exact),
            )
        )
    for text in data["text_values"]:
        cell = _cell(data["tables"][text["table"]], text["row"], text["column"])
        printed = _d(text["printed"])
        items.append(
            Item(
                "text",
                text["label"],
                str(printed),
                f"table: {cell}",
                f"{printed - cell:+}",
                "consistent" if printed == cell else "inconsistent",
                text["what"],
            )
        )
    for setting in data["settings"]:
        same = _d(setting["table_value"]) == _d(setting["text_value"])
        items.append(
            Item(
                "setting",
                setting["label"],
                f"table: {setting['table_value']}",
                f"text: {setting['text_value']}",
                "",
                "consistent" if same else "inconsistent",
                setting["what"],
            )
        )
    t3 = data["tables"]["3"]
    for row, (width, mode) in t3["rows"].items():
        ok = _d(mode) >= 2 and int(width) == width
        items.append(
            Item(
                "table3",
                f"Table 3 {row}",
                f"width {width}, mode {mode}",
                "mode >= 2 by definition",
                "",
                "consistent" if ok else "inconsistent",
            )
        )
    for tid in ("1", "2"):
        table = data["tables"][tid]
        for row in table["rows"]:
            if not row.startswith("SetPO+"):
                continue
            base = row.removeprefix("SetPO+")
            gains = [_cell(table, row, c) - _cell(table, base, c) for c in table["columns"]]
            text = ", ".join(f"{c} {g:+}" for c, g in zip(table["columns"], gains))
            items.append(
                Item(
                    "recomputed gain",
                    f"Table {tid} {row} vs {base}",
                    "",
                    text,
                    "",
                    "not printed",
                    "every cell improves" if min(gains) > 0 else "some cell does not improve",
                )
            )
    return items


def inconsistent(items: list[Item]) -> list[str]:
    """Labels of the inconsistent items."""
    return [it.label for it in items if it.status == "inconsistent"]


def check_audit(data: dict | None = None) -> CheckRecord:
    """Recompute everything; PASS when every inconsistency already known is reproduced (so the transcription is
    right); the detail lists all inconsistencies found, new ones marked."""
    data = load() if data is None else data
    items = audit(data)
    found = inconsistent(items)
    known = data["known_inconsistencies"]
    missing = [k for k in known if k not in found]
    new = [f for f in found if f not in known]
    detail = f"inconsistent: {found}; new (not in the known list): {new}"
    if missing:
        detail = f"known inconsistencies NOT reproduced: {missing}; " + detail
    checked = [it for it in items if it.status != "not printed"]
    check = "Avg columns, printed gains, text values, settings, Table 3 (exact decimals)"
    return record(RESULT, check, "audit", len(checked), "inconsistencies", len(found), not missing, detail)


def write(items: list[Item], md_path: Path, csv_path: Path) -> None:
    """Write the audit as markdown (with the rules) and CSV (one row per item)."""
    md_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(items[0])))
        writer.writeheader()
        writer.writerows(asdict(it) for it in items)
    data = load()
    lines = [
        "# Audit of the paper's arithmetic",
        "",
        "Generated by `python -m theory` (theory/paper_arithmetic.py) from `theory/data/paper_tables.json`; "
        f"the same rows are in `{csv_path.name}`.",
        "",
        "Rules (exact decimal arithmetic): an Avg is *consistent* when it equals the mean of its six printed cells "
        "rounded half up to 0.1, *within cell rounding* when it is off by at most 0.1 (the cells are rounded too), "
        "*inconsistent* beyond that. Printed gains are compared with the difference of the two printed cells by the "
        "same rule. Printed gains available to this audit: "
        + "; ".join(
            f"Table {g['table']} {g['row']} vs {g['baseline']} {g['column']} {g['printed']:+}"
            for g in data["printed_gains"]
        )
        + ". Other gains printed in the paper are not in the transcribed data and are not audited.",
        "",
        "## Inconsistencies",
        "",
    ]
    known = data["known_inconsistencies"]
    for it in items:
        if it.status == "inconsistent":
            tag = "known" if it.label in known else "**new**"
            lines.append(f"* {it.label}: printed {it.printed}, recomputed {it.recomputed} ({tag}). {it.note}".rstrip())
    for kind, title in (
        ("avg", "Avg columns"),
        ("gain", "Printed gains"),
        ("text", "Values quoted in the text"),
        ("setting", "Settings"),
        ("table3", "Table 3 (Countdown diversity)"),
        ("recomputed gain", "SetPO gains over each base method (recomputed, not printed)"),
    ):
        rows = [it for it in items if it.kind == kind]
        lines += [
            "",
            f"## {title}",
            "",
            "| item | printed | recomputed | difference | status | note |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {it.label} | {it.printed} | {it.recomputed} | {it.difference} | {it.status} | {it.note} |"
            for it in rows
        ]
    md_path.write_text("\n".join(lines) + "\n")


def run(quick: bool = False) -> list[CheckRecord]:
    """The audit (cheap: the same in quick mode)."""
    return [check_audit()]
