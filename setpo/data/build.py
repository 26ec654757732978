"""Build verl-format parquet files from raw dataset splits (the library side of `python -m setpo.data.prepare`).

Each split goes to ``DIR/<dataset>/<split>.parquet``; ``DIR/manifest.json`` records where every file came from.
An existing file made from the same request is kept (resume); a different one is refused unless --overwrite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from setpo.data.load import DatasetUnavailableError, load_split, read_table
from setpo.data.records import build_record
from setpo.data.sources import SPECS, get_spec

DEFAULT_DATASETS = tuple(SPECS)  # everything the training and evaluation scripts read


@dataclass(frozen=True)
class PrepareRequest:
    """What one output file is made from; compared against the manifest to decide skip / refuse."""

    dataset: str
    split: str
    limit: int | None
    local_dir: str | None


def _check_pandas():
    try:
        import pandas as pd
        import pyarrow  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("writing parquet needs pandas and pyarrow: pip install pandas pyarrow") from e
    return pd


def write_parquet(records: list[dict], path: Path) -> None:
    """Write rows to parquet atomically (tmp file then rename)."""
    pd = _check_pandas()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pd.DataFrame.from_records(records).to_parquet(tmp, index=False)
    tmp.replace(path)


def read_prepared(path: str | Path) -> list[dict]:
    """Rows of a prepared parquet file, nested fields as plain Python lists/dicts."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no prepared file at {path}; run `python -m setpo.data.prepare --out DIR` first")
    rows = read_table(path)
    return [json.loads(json.dumps(r, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))) for r in rows]


def prepare_split(
    dataset: str,
    split: str,
    out: str | Path,
    local_dir: str | Path | None = None,
    limit: int | None = None,
    use_hub: bool = True,
    overwrite: bool = False,
) -> dict:
    """Prepare one split; returns its manifest entry (path, source, rows, request)."""
    spec = get_spec(dataset)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit}")
    out = Path(out)
    path = out / dataset / f"{split}.parquet"
    manifest = _read_manifest(out)
    request = PrepareRequest(dataset, split, limit, None if local_dir is None else str(Path(local_dir).resolve()))
    key = f"{dataset}/{split}"
    if path.exists() and not overwrite:
        old = manifest.get(key)
        if old is not None and old.get("request") == request.__dict__:
            return old | {"skipped": True}
        raise FileExistsError(f"{path} exists from a different request; pass --overwrite to replace it")
    raw, source = load_split(spec, split, local_dir=local_dir, use_hub=use_hub)
    if limit is not None:
        raw = raw[:limit]
    records = [build_record(r, spec, split, i) for i, r in enumerate(raw)]
    if not records:
        raise ValueError(f"{key}: no rows loaded from {source}")
    write_parquet(records, path)
    entry = {"path": str(path.relative_to(out)), "source": source, "rows": len(records), "request": request.__dict__}
    manifest[key] = entry
    _write_manifest(out, manifest)
    return entry


def _read_manifest(out: Path) -> dict:
    f = out / "manifest.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _write_manifest(out: Path, manifest: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(out / "manifest.json")


def prepare_datasets(
    out: str | Path,
    datasets: Sequence[str] = DEFAULT_DATASETS,
    splits: Sequence[str] | None = None,
    local_dir: str | Path | None = None,
    limit: int | None = None,
    use_hub: bool = True,
    overwrite: bool = False,
    skip_missing: bool = False,
) -> dict[str, dict]:
    """Prepare every split of every dataset (or only `splits`); returns the manifest entries written or kept.

    ``skip_missing`` reports unavailable splits under "missing" instead of stopping at the first one.
    """
    jobs = [(d, s) for d in datasets for s in get_spec(d).splits if splits is None or s in splits]
    if not jobs:
        raise ValueError(f"nothing to prepare for datasets={list(datasets)} splits={splits}")
    done, missing = {}, {}
    for d, s in tqdm(jobs, desc="prepare", unit="split"):
        try:
            done[f"{d}/{s}"] = prepare_split(d, s, out, local_dir, limit, use_hub, overwrite)
        except DatasetUnavailableError as e:
            if not skip_missing:
                raise
            missing[f"{d}/{s}"] = str(e)
    if missing:
        done["missing"] = missing
    return done
