"""Rows of local data files: .jsonl, .json (a list of records) or .parquet."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON-lines file (blank lines skipped); a bad line is named by its number."""
    rows = []
    with path.open() as f:
        for ln, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{ln} is not valid JSON ({e.msg})") from None
    return rows


def read_table(path: Path) -> list[dict]:
    """Rows of a .jsonl, .json (list) or .parquet file."""
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if not isinstance(data, list):
            raise ValueError(f"{path} must hold a JSON list of records")
        return data
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict(orient="records")
    raise ValueError(f"unsupported file type {path.suffix!r} for {path}; use .jsonl, .json or .parquet")
