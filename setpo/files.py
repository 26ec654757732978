"""Local files: rows of .jsonl, .json (a list of records) or .parquet; YAML without duplicate keys; the rule of
where a command may write (`check_out`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not valid JSON ({e}); replace it with an intact copy") from None
        if not isinstance(data, list):
            raise ValueError(f"{path} must hold a JSON list of records")
        return data
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            return pd.read_parquet(path).to_dict(orient="records")
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(
                f"{path} is not a readable parquet file ({first}); replace it with an intact copy"
            ) from None
    raise ValueError(f"unsupported file type {path.suffix!r} for {path}; use .jsonl, .json or .parquet")


# ---------------------------------------------------------------------------------------------------------------
# where a command may write: one rule for every --out, --report and --json

#: The file in a folder that says which command writes there (and, for a run, which files it wrote).
RUN_MARK = ".setpo-run.json"


class OutError(ValueError):
    """An output path this command may not write to, or results it may not replace (message says what to do)."""


def marked_command(folder: Path) -> str | None:
    """The command that `folder`'s RUN_MARK names ("" for a mark without one); None without a readable mark."""
    try:
        mark = json.loads((Path(folder) / RUN_MARK).read_text())
    except (OSError, ValueError):
        return None
    return str(mark.get("command") or "") if isinstance(mark, dict) else None


def check_out(
    path: str | Path,
    command: str,
    *,
    flag: str = "--out",
    owns: Callable[[Path], bool] | None = None,
    is_file: bool = False,
    overwrite: bool = False,
) -> Path:
    """`path` as a Path when `command` may write there; else `OutError` naming `flag` and what to do.

    The rule of every command that writes: an empty string (the current folder, unsaid) is refused; a folder
    output must be a folder that is new, empty, or holds output of the same `command` (its RUN_MARK names the
    command, or `owns(folder)` says so); a file output must not be a folder, and a file already there is replaced
    only with ``overwrite``.
    """
    if isinstance(path, str) and not path.strip():
        raise OutError(f"{flag} is an empty string; name a {'file' if is_file else 'folder'} (for this folder, '.')")
    path = Path(path)
    if is_file:
        if path.is_dir():
            raise OutError(f"{flag} {path} is a folder; name a file")
        if path.parent.exists() and not path.parent.is_dir():
            raise OutError(f"{flag} {path}: {path.parent} is a file, not a folder; name a file in a folder")
        if path.exists() and not overwrite:
            raise OutError(f"{flag} {path} exists; pass --overwrite to replace it, or name a new file")
        return path
    if path.exists() and not path.is_dir():
        raise OutError(f"{flag} {path} is a file, not a folder; name a new or empty folder")
    if not path.is_dir() or not any(p for p in path.iterdir() if not p.name.startswith(RUN_MARK.rsplit(".", 1)[0])):
        return path  # new, or empty but for the bookkeeping of a run that never wrote anything
    mark = marked_command(path)
    if mark == command or (mark is None and owns is not None and owns(path)):
        return path
    held = f"a setpo run of {mark!r}" if mark else f"no setpo run of {command} (no {RUN_MARK})"
    raise OutError(
        f"{flag} {path} is not empty and holds {held}; refusing to write into it or delete anything there: "
        "choose a new or empty folder"
    )


def read_yaml(path: str | Path) -> Any:
    """The content of a YAML file (safe loader); a key given twice in one mapping is a ValueError naming it."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            if key in seen:
                raise ValueError(f"{path}: key {key!r} is given twice (line {key_node.start_mark.line + 1}); keep one")
            seen.add(key)
        return loader.construct_mapping(node)

    UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(Path(path).read_text(), Loader=UniqueKeys)  # noqa: S506 - a SafeLoader subclass
