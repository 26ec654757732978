"""Run folders for every reproduction script: config, seed and versions recorded; resumable; no silent overwrite."""

from __future__ import annotations

import dataclasses
import json
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


class RunExistsError(RuntimeError):
    """A finished result is already at the target path and overwriting was not asked for."""


def versions() -> dict[str, str]:
    """Versions of the packages a result depends on."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for mod in ("torch", "numpy", "scipy", "transformers", "trl", "sentence_transformers", "setpo"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional packages
            continue
    return out


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: Path, obj: Any) -> None:
    """Write `obj` as indented JSON (dataclasses, numpy scalars and paths converted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable(obj), indent=2, sort_keys=True) + "\n")


class RunDir:
    """A results folder for one run: `config.json` (config, seed, versions) plus one file per finished step.

    A step whose marker file exists is skipped on the next call (resume). Starting a run whose folder holds
    a different config raises `RunExistsError` unless ``overwrite=True``, which clears the folder first.
    """

    def __init__(self, path: str | Path, config: Any, overwrite: bool = False):
        self.path = Path(path)
        cfg = _jsonable(config)
        cfg_file = self.path / "config.json"
        if cfg_file.exists():
            old = json.loads(cfg_file.read_text())
            if old.get("config") != cfg and not overwrite:
                raise RunExistsError(
                    f"{self.path} holds a run with a different config; pass --overwrite to replace it "
                    "or choose another --out folder"
                )
            if overwrite:
                shutil.rmtree(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        if not cfg_file.exists():
            write_json(cfg_file, {"config": cfg, "versions": versions(), "started": time.strftime("%Y-%m-%d %H:%M:%S")})

    def done(self, step: str) -> bool:
        """True when `step` finished in an earlier call."""
        return (self.path / "steps" / f"{step}.json").exists()

    def load(self, step: str) -> Any:
        """The result recorded for a finished step."""
        return json.loads((self.path / "steps" / f"{step}.json").read_text())

    def save(self, step: str, result: Any) -> None:
        """Record a finished step's result (written last, so a crash leaves the step to redo)."""
        tmp = self.path / "steps" / f".{step}.json.tmp"
        write_json(tmp, result)
        tmp.replace(self.path / "steps" / f"{step}.json")


PAPER_FIGURES = Path(__file__).resolve().parent.parent / "paper_figures"


def publish(files: list[Path], dest: Path) -> Path:
    """Copy finished figures/tables, and the data file beside each PNG, into `dest` (asked for by --publish)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in map(Path, files):
        for sib in [f] + [f.with_suffix(s) for s in (".csv", ".json") if f.suffix == ".png"]:
            if sib.exists():
                shutil.copy2(sib, dest / sib.name)
    return dest


def save_figure(fig, path: str | Path, data: Any, overwrite: bool = True) -> Path:
    """Save a matplotlib figure as PNG with its data beside it (`.csv` for a DataFrame, else `.json`)."""
    path = Path(path).with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not overwrite:
        raise RunExistsError(f"{path} exists; pass overwrite=True to replace it")
    fig.savefig(path, dpi=150, bbox_inches="tight")
    if hasattr(data, "to_csv"):
        data.to_csv(path.with_suffix(".csv"), index=False)
    else:
        write_json(path.with_suffix(".json"), data)
    return path
