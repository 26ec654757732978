"""Raw rows of a dataset split, from a local copy or from the Hub, with a clear error when neither is reachable."""

from __future__ import annotations

import re
from pathlib import Path

from setpo._validate import check_choice
from setpo.data.sources import DatasetSpec, HubSource
from setpo.files import read_jsonl, read_table


class DatasetUnavailableError(RuntimeError):
    """A split is neither in the local folder nor loadable from the Hub."""


def local_path(local_dir: str | Path, spec: DatasetSpec, split: str) -> Path | None:
    """The local file of a split (``<local_dir>/<folder>/<split>.{jsonl,json,parquet}``), or None."""
    folder = Path(local_dir) / spec.local_folder
    for ext in (".jsonl", ".json", ".parquet"):
        p = folder / f"{split}{ext}"
        if p.is_file():
            return p
    return None


def _norm_ws(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _attach_minerva_answers(rows: list[dict], answers_file: Path) -> None:
    """Minerva's local answers live in a side file keyed by problem text; attach them as row["answer"]."""
    by_problem = {_norm_ws(r["problem"]): r["answer"] for r in read_jsonl(answers_file)}
    for r in rows:
        ans = by_problem.get(_norm_ws(r.get("problem", "")))
        if ans is not None and "answer" not in r:
            r["answer"] = ans


def load_local(local_dir: str | Path, spec: DatasetSpec, split: str) -> tuple[list[dict], str] | None:
    """Rows and source description from the local copy, or None when the split is not there."""
    path = local_path(local_dir, spec, split)
    if path is None:
        return None
    rows = read_table(path)
    if spec.answer_format == "minerva":
        side = path.parent / "answers.jsonl"
        if side.is_file():
            _attach_minerva_answers(rows, side)
    return rows, str(path)


def load_hub(source: HubSource) -> tuple[list[dict], str]:
    """Rows from the Hub through `datasets.load_dataset` (honours HF_HUB_OFFLINE)."""
    import datasets

    kwargs = {"split": source.split}
    if source.data_files:
        kwargs["data_files"] = {source.split: source.data_files}
    args = (source.name,) if source.config is None else (source.name, source.config)
    ds = datasets.load_dataset(*args, **kwargs)
    if source.rows is not None:
        start, stop = source.rows
        if stop > len(ds):
            raise ValueError(f"{source.name} has {len(ds)} rows, fewer than the requested range {start}:{stop}")
        ds = ds.select(range(start, stop))
    desc = f"hub:{source.name}" + (f"/{source.config}" if source.config else "") + f"[{source.split}]"
    return ds.to_list(), desc


def load_split(
    spec: DatasetSpec, split: str, local_dir: str | Path | None = None, use_hub: bool = True
) -> tuple[list[dict], str]:
    """Rows of one split and where they came from: the local copy when present, else the Hub."""
    check_choice(split, f"split of dataset {spec.key!r}", list(spec.hub))
    tried = []
    if local_dir is not None:
        found = load_local(local_dir, spec, split)
        if found is not None:
            return found
        tried.append(f"no file {Path(local_dir) / spec.local_folder / split}.{{jsonl,json,parquet}}")
    if use_hub:
        try:
            return load_hub(spec.hub[split])
        except Exception as e:  # noqa: BLE001 - any Hub/network failure becomes one clear error
            tried.append(f"Hub dataset {spec.hub[split].name!r} unreachable ({type(e).__name__}: {str(e)[:200]})")
    else:
        tried.append("Hub loading disabled")
    note = (
        " This split is Hub-only (the shipped local benchmark copies do not include it); put a copy at "
        f"<local-dir>/{spec.local_folder}/{split}.jsonl or allow Hub access."
        if spec.hub_only(split)
        else ""
    )
    raise DatasetUnavailableError(f"cannot load {spec.key}/{split}: " + "; ".join(tried) + "." + note)
