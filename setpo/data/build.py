"""Build verl-format parquet files from raw dataset splits (the library side of `python -m setpo.data.prepare`).

Each split goes to ``DIR/<dataset>/<split>.parquet``; ``DIR/manifest.json`` records where every file came from,
its rows' digest and the file's own digest. The source is read on every call: an existing file made from the
same request is kept only when it is readable, has the source's row count and both digests still match;
otherwise it is rebuilt (and the reason reported). A file made from a different request is refused unless
--overwrite. Files are written with one fixed arrow schema per task (`row_schema`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from setpo._validate import check_int, check_mapping
from setpo.data.load import DatasetUnavailableError, load_split
from setpo.data.records import EXTRA_INFO_FIELDS, META_FIELDS, build_record
from setpo.data.sources import SPECS, get_spec
from setpo.files import read_table

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


def row_schema(task: str):
    """The arrow schema of prepared rows: the same for every dataset of a task (extra_info fields included)."""
    import pyarrow as pa

    s = pa.string()
    if task == "countdown":
        truth = pa.struct([("target", pa.int64()), ("numbers", pa.list_(pa.int64()))])
    else:
        truth = s
    fields = {"split": s, "index": pa.int64(), "problem": s, "answers": pa.list_(s)} | {f: s for f in META_FIELDS}
    return pa.schema(
        [
            ("data_source", s),
            ("prompt", pa.list_(pa.struct([("role", s), ("content", s)]))),
            ("ability", s),
            ("reward_model", pa.struct([("style", s), ("ground_truth", truth)])),
            ("extra_info", pa.struct([(f, fields[f]) for f in EXTRA_INFO_FIELDS])),
        ]
    )


def write_parquet(records: list[dict], path: Path, task: str | None = None) -> None:
    """Write rows to parquet atomically (tmp file then rename); with `task`, in that task's fixed `row_schema`."""
    pd = _check_pandas()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if task is None:
        pd.DataFrame.from_records(records).to_parquet(tmp, index=False)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records, schema=row_schema(task)), tmp)
    tmp.replace(path)


def _digest_rows(records: list[dict]) -> str:
    return hashlib.sha256(json.dumps(records, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stale_reason(path: Path, entry: dict, rows_digest: str, n_rows: int) -> str | None:
    """Why an existing prepared file cannot be kept (None when it can)."""
    import pyarrow.parquet as pq

    if entry.get("rows_sha256") != rows_digest:
        return "the source or the preparation code changed"
    try:
        n_file = pq.read_metadata(path).num_rows
    except Exception as e:  # noqa: BLE001 - any unreadable file is rebuilt, with the reason shown
        return f"the existing file is unreadable ({type(e).__name__})"
    if n_file != n_rows:
        return f"the existing file has {n_file} rows, the source {n_rows}"
    if entry.get("file_sha256") != file_digest(path):
        return "the existing file was modified"
    return None


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
    check_int(limit, "limit", minimum=1, none=True)
    out = Path(out)
    path = out / dataset / f"{split}.parquet"
    manifest = _read_manifest(out, overwrite)
    request = PrepareRequest(dataset, split, limit, None if local_dir is None else str(Path(local_dir).resolve()))
    key = f"{dataset}/{split}"
    old = manifest.get(key)
    same_request = old is not None and old.get("request") == request.__dict__
    if path.exists() and not overwrite and not same_request:
        raise FileExistsError(f"{path} exists from a different request; pass --overwrite to replace it")
    raw, source = load_split(spec, split, local_dir=local_dir, use_hub=use_hub)
    if limit is not None:
        raw = raw[:limit]
    records = [build_record(r, spec, split, i) for i, r in enumerate(raw)]
    if not records:
        raise ValueError(f"{key}: no rows loaded from {source}")
    rows_digest = _digest_rows(records)
    rebuilt = None
    if path.exists() and same_request:
        rebuilt = _stale_reason(path, old, rows_digest, len(records))
        if rebuilt is None:
            return old | {"skipped": True}
    write_parquet(records, path, task=spec.task)
    entry = {
        "path": str(path.relative_to(out)),
        "source": source,
        "rows": len(records),
        "request": request.__dict__,
        "rows_sha256": rows_digest,
        "file_sha256": file_digest(path),
    }
    manifest[key] = entry
    _write_manifest(out, manifest)
    return entry | ({"rebuilt": rebuilt} if rebuilt else {})


def _read_manifest(out: Path, overwrite: bool = False) -> dict:
    f = out / "manifest.json"
    if not f.exists():
        return {}
    try:
        manifest = check_mapping(json.loads(f.read_text()), "the manifest")
    except ValueError as e:
        if overwrite:
            return {}
        raise ValueError(f"{f} is unreadable ({e}); pass --overwrite to rebuild it") from None
    return manifest


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
    from tqdm.auto import tqdm  # imported here: tqdm is not a core dependency

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
