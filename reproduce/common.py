"""Run folders for every reproduction script: config, seed and versions recorded; resumable; no silent overwrite.

A run folder holds ``.setpo-run.json``, the list of files the run wrote (each recorded before it is written) and,
while a run writes there, ``.setpo-run.lock`` naming its process. ``--overwrite`` deletes the listed files and
nothing else, and a non-empty folder without that list (a model folder, a project) is never written into. The
command-line helpers here (`Parser`, `out_dir`, `count`, `cli`) give every script one-line errors, a refusal of
``--out ''``, and a one-line message with the resume command on SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from setpo._cli import Parser
from setpo.files import RUN_MARK, OutError, check_out, read_yaml

MANIFEST = RUN_MARK
RUN_FORMAT = 2  # the format of MANIFEST: every file recorded by its writer before it was written
LOCK = ".setpo-run.lock"
PUBLISH_RECORD = ".setpo-published.json"
PAPER_FIGURES = Path(__file__).resolve().parent.parent / "paper_figures"
# Profiles ordered by size; a run of a lower rank never silently replaces published results of a higher one.
PROFILE_RANK = {"smoke": 0, "cpu-smoke": 0, "quick": 1, "full": 2}


#: TRL arguments of every CPU experiment: no logging service, no GPU, no checkpoints, every step logged quietly.
CPU_TRL_ARGS: dict[str, Any] = {
    "report_to": "none",
    "use_cpu": True,
    "bf16": False,
    "save_strategy": "no",
    "logging_steps": 1,
    "disable_tqdm": True,
}


def cpu_rl_args(
    output_dir: Path, steps: int, prompts: int, G: int, max_completion_length: int, lr: float, seed: int, **fields: Any
) -> dict[str, Any]:
    """SetPOConfig fields of a small RL run: `steps` steps of `prompts` groups of `G` samples at temperature 1.0,
    constant learning rate `lr`, `seed` for sampling and data order, `CPU_TRL_ARGS`; `fields` add or replace any."""
    return {
        "output_dir": str(output_dir),
        "max_steps": steps,
        "per_device_train_batch_size": prompts * G,
        "num_generations": G,
        "max_completion_length": max_completion_length,
        "temperature": 1.0,
        "learning_rate": lr,
        "lr_scheduler_type": "constant",
        "seed": seed,
        "data_seed": seed,
        **CPU_TRL_ARGS,
        **fields,
    }


class RunExistsError(RuntimeError):
    """The target folder holds something this run may not use or replace as asked (message says what to do)."""


class UsageError(ValueError):
    """A bad command line or option value (reported as one line without a traceback hint)."""


class PublishError(RuntimeError):
    """Publishing would replace results of a larger profile (pass --force-publish to do it anyway)."""


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
    """Write `obj` as indented JSON (dataclasses, numpy scalars and paths converted), atomically (tmp + rename).

    Inside the folder of an open `RunDir` the file and its temporary file are first recorded as that run's (see
    `RunDir.claim`), so a write cut by a kill leaves no file the run's list does not name."""
    path = Path(path)
    run = _open_run(path)
    if run is not None:
        path = run.claim(path)
        tmp = run.claim(path.with_name(f".{path.name}.tmp"))  # one name: the run's lock makes it the only writer
    else:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(_jsonable(obj), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(content, None), or (None, a one-line description of the damage)."""
    try:
        return json.loads(path.read_text()), None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, f"{type(err).__name__}: {err}".splitlines()[0]


def _is_run_config(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("config"), dict) and isinstance(obj.get("versions"), dict)


def _walk(root: Path) -> list[str]:
    """Relative paths of the files under `root` (not following links), the run's own bookkeeping excluded."""
    files = []
    for base, _, fnames in os.walk(root):
        rel = Path(base).relative_to(root)
        files += [str(rel / f) for f in fnames if not (base == str(root) and f in (MANIFEST, LOCK))]
    return sorted(files)


def _differing_keys(old: Any, new: Any) -> list[str]:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return []
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def is_extension(old: Any, new: Any, keys: tuple[str, ...]) -> bool:
    """`new` differs from `old` only in integer counts among `keys`, all larger or all smaller."""
    diff = _differing_keys(old, new)
    counts = all(
        k in keys and all(isinstance(c.get(k), int) and not isinstance(c.get(k), bool) for c in (old, new))
        for k in diff
    )
    return bool(diff) and counts and len({new[k] > old[k] for k in diff}) == 1


def _grows(old: Any, new: Any, keys: tuple[str, ...]) -> bool:
    """`new` extends `old` (see `is_extension`) with every differing count larger."""
    return is_extension(old, new, keys) and all(new[k] > old[k] for k in _differing_keys(old, new))


def _version_changes(old: dict, now: dict) -> list[str]:
    return [
        f"{k} {old.get(k, '-')} -> {now.get(k, '-')}" for k in sorted(set(old) | set(now)) if old.get(k) != now.get(k)
    ]


def _delete_listed(path: Path, manifest: dict) -> None:
    """Delete the files and trees `manifest` lists under `path` (nothing outside it), then its folders once empty."""
    root = os.path.realpath(path)

    def inside(p: Path) -> bool:
        return os.path.realpath(p.parent).startswith(root + os.sep) or os.path.realpath(p.parent) == root

    for rel in manifest.get("files", ()):
        p = path / rel
        if inside(p) and (p.is_file() or p.is_symlink()):
            p.unlink()
    for rel in manifest.get("trees", ()):
        p = path / rel
        if inside(p) and p.is_symlink():
            p.unlink()
        elif inside(p) and p.is_dir():
            shutil.rmtree(p)
    for rel in sorted(manifest.get("dirs", ()), key=lambda r: len(Path(r).parts), reverse=True):
        p = path / rel
        if p.is_dir() and not p.is_symlink() and inside(p) and not any(p.iterdir()):
            p.rmdir()


class RunDir:
    """A results folder for one run: `config.json` (config, seed, versions) plus one file per finished step.

    A step whose marker file exists is skipped on the next call (resume). The run owns exactly the files it
    wrote: each writer (its `write_json`, `write_text`, `write_csv`, `torch_save`; this module's `write_json` and
    `save_figure` inside its folder; `claim` for any other) adds the file to ``.setpo-run.json`` and flushes that
    list before the file is written, so after a kill the list still names everything the killed call may have
    written. A folder that another library fills
    (``save_pretrained``, a trainer's output) is claimed whole with `tree`. A file already in the folder and not
    on the list is never written over: the writer refuses. ``overwrite=True`` deletes the listed files, the listed
    trees and the folders the run created once empty, and names every other file it keeps.

    Starting a run raises `RunExistsError` when the folder is not empty and holds no run of this `command`,
    holds a run with a different or damaged config and ``overwrite`` is false, or is in use: ``.setpo-run.lock``
    (created exclusively, naming the PID and command) is held by a live process. A lock left by a dead process
    is taken over with a message. Each `save` re-reads config.json and refuses to record a step under a config
    another writer replaced. A resume under other package versions prints them and records them in config.json.
    A folder written by an older setpo (a run config.json but no list, or a list of ``setpo_run`` 1, made by
    watching the folder) is refused whole, with or without ``overwrite``: nothing there is resumed or deleted.

    `extend` names integer config keys that only say how many independent units (seeds) the run has: a config that
    differs from the recorded one in those keys alone opens the run too. With larger values the run grows (its
    finished steps kept, config.json updated, the earlier values listed under "extended_from" with the software
    versions of the units added then); with smaller ones it is read as the first units of the recorded run
    (config.json kept; ``check(..., fewer=False)``, as an experiment's command line uses it, refuses that, since
    its analysis would rewrite the larger run's results).
    """

    def __init__(
        self,
        path: str | Path,
        config: Any,
        overwrite: bool = False,
        extend: tuple[str, ...] = (),
        command: str | None = None,
    ):
        self.path = check_out_dir(path)
        cfg = _jsonable(config)
        self.check(self.path, cfg, overwrite, extend, command=command)
        created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunExistsError(
                f"cannot create the run folder {self.path}: {err.strerror or err}; choose another --out"
            ) from err
        self._lock()
        try:
            manifest = self.check(self.path, cfg, overwrite, extend, command=command)  # again, now that it is ours
            if manifest is not None and overwrite:
                self._clear(manifest)
                manifest = None
        except BaseException:
            self._unlock()
            if created and not any(self.path.iterdir()):
                self.path.rmdir()
            raise
        manifest = manifest or {}
        self.command = command or manifest.get("command") or "reproduce"
        self._files: set[str] = set(manifest.get("files", ()))
        self._dirs: set[str] = set(manifest.get("dirs", ()))
        self._trees: set[str] = set(manifest.get("trees", ()))
        _OPEN_RUNS.append(self)
        self._write_manifest()  # before anything else, so an interrupted start is still recognised as a run
        self._recorded = self._open_config(cfg, extend)

    # -- the files it owns ------------------------------------------------------------------------------------

    def _rel(self, path: str | Path) -> str:
        """`path` (relative to the run folder, or inside it) as the run's relative name."""
        p = Path(path)
        if p.is_absolute() or p.parts[: len(self.path.parts)] == self.path.parts:
            try:
                p = Path(os.path.abspath(p)).relative_to(os.path.abspath(self.path))
            except ValueError:
                raise ValueError(f"{path} is not inside the run folder {self.path}") from None
        if not p.parts or ".." in p.parts:
            raise ValueError(f"{path} is not a file inside the run folder {self.path}")
        return str(p)

    def owns(self, rel: str) -> bool:
        """True when the run wrote (or claimed) `rel`, itself or as part of a claimed tree."""
        parts = Path(rel).parts
        return rel in self._files or any(parts[: len(Path(t).parts)] == Path(t).parts for t in self._trees)

    def claim(self, path: str | Path, tree: bool = False) -> Path:
        """Record `path` (relative to the run folder, or inside it) as the run's, flush the list, and return the
        full path to write to; the parent folders are created (and recorded when new). With `tree`, a folder whose
        whole content is the run's. A path already there that the run did not write is refused."""
        rel = self._rel(path)
        full = self.path / rel
        if not self.owns(rel):
            if full.exists() or full.is_symlink():
                raise RunExistsError(
                    f"{full} is in the run folder but was not written by this run; refusing to replace it: move it "
                    f"elsewhere, then run the same command again to resume"
                )
            (self._trees if tree else self._files).add(rel)
            new_dirs = [str(Path(*Path(rel).parts[:i])) for i in range(1, len(Path(rel).parts))]
            self._dirs |= {d for d in new_dirs if not (self.path / d).exists()}
            self._write_manifest()
        (full if tree else full.parent).mkdir(parents=True, exist_ok=True)
        return full

    def tree(self, path: str | Path) -> Path:
        """`claim` a folder that another library fills (a model's ``save_pretrained``, a trainer's output)."""
        return self.claim(path, tree=True)

    def write_json(self, path: str | Path, obj: Any) -> Path:
        """Write `obj` as JSON to `path` in the run folder (see `write_json`), recorded first."""
        full = self.claim(path)
        write_json(full, obj)
        return full

    def write_text(self, path: str | Path, text: str) -> Path:
        """Write `text` to `path` in the run folder, recorded first."""
        full = self.claim(path)
        full.write_text(text)
        return full

    def write_csv(self, path: str | Path, df: Any, **kwargs: Any) -> Path:
        """Write a DataFrame as CSV to `path` in the run folder (``index=False`` unless given), recorded first."""
        full = self.claim(path)
        df.to_csv(full, **{"index": False, **kwargs})
        return full

    def torch_save(self, obj: Any, path: str | Path) -> Path:
        """``torch.save`` `obj` to `path` in the run folder, recorded first."""
        import torch

        full = self.claim(path)
        torch.save(obj, full)
        return full

    def _clear(self, manifest: dict) -> None:
        """Delete the files and trees of `manifest`, then the folders it created once empty; name what is kept."""
        _delete_listed(self.path, manifest)
        kept = _walk(self.path)
        if kept:
            print(
                f"--overwrite: kept {len(kept)} file(s) in {self.path} that the run did not write: {', '.join(kept)}",
                file=sys.stderr,
            )

    def _write_manifest(self) -> None:
        write_json(
            self.path / MANIFEST,
            {
                "setpo_run": RUN_FORMAT,
                "command": self.command,
                "files": sorted(self._files),
                "dirs": sorted(self._dirs),
                "trees": sorted(self._trees),
            },
        )

    # -- config and lock ---------------------------------------------------------------------------------------

    def _open_config(self, cfg: dict, extend: tuple[str, ...]) -> Any:
        """Write config.json for a new run, grow or note other versions for a resumed one; the config recorded."""
        cfg_file = self.path / "config.json"
        now = versions()
        if not cfg_file.exists():
            self.write_json(cfg_file, {"config": cfg, "versions": now, "started": time.strftime("%Y-%m-%d %H:%M:%S")})
            return cfg
        old, _ = _read_json(cfg_file)  # checked: a run's config, equal to `cfg` or extended by it
        record = dict(old)
        if extend and _grows(old["config"], cfg, extend):
            grown = {k: old["config"][k] for k in _differing_keys(old["config"], cfg)}
            at = {"at": time.strftime("%Y-%m-%d %H:%M:%S"), "versions": now}  # of the units added now
            record.update(config=cfg, extended_from=[*old.get("extended_from", []), {**grown, **at}])
        last = ([old["versions"]] + [r["versions"] for r in old.get("resumed_under", []) if isinstance(r, dict)])[-1]
        changes = _version_changes(last, now)
        if changes:
            print(f"{self.path}: resuming under other package versions: {'; '.join(changes)}", file=sys.stderr)
            at = {"at": time.strftime("%Y-%m-%d %H:%M:%S"), "versions": now}
            record["resumed_under"] = [*old.get("resumed_under", []), at]
        if record != old:
            self.write_json(cfg_file, record)
        return record["config"]

    def _lock(self) -> None:
        """Take the folder's lock (see the class docstring), or raise `RunExistsError` naming its holder."""
        lock = self.path / LOCK
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command_line(), "since": time.time()}
        tmp = self.path / f".{LOCK}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(me) + "\n")
        try:
            for _ in range(3):
                try:
                    os.link(tmp, lock)  # exclusive: fails when the lock exists
                    return
                except FileExistsError:
                    holder = _read_lock(lock)
                    if holder is None:
                        continue  # released meanwhile
                    if _alive(holder, self.path):
                        raise RunExistsError(_in_use(self.path, holder)) from None
                    print(
                        f"{self.path}: taking over the lock of PID {holder['pid']} ({holder.get('command', '?')}), "
                        "which is no longer running",
                        file=sys.stderr,
                    )
                    stale = self.path / f".{LOCK}.{os.getpid()}.stale"
                    try:
                        os.replace(lock, stale)
                        stale.unlink()
                    except FileNotFoundError:
                        pass
            raise RunExistsError(f"{self.path}: could not take {LOCK}; another run keeps taking it: try again")
        finally:
            tmp.unlink(missing_ok=True)

    def _unlock(self) -> None:
        holder = _read_json(self.path / LOCK)[0] if (self.path / LOCK).is_file() else None
        if isinstance(holder, dict) and holder.get("pid") == os.getpid():
            (self.path / LOCK).unlink(missing_ok=True)

    # -- resumable steps ---------------------------------------------------------------------------------------

    @staticmethod
    def check(
        path: str | Path,
        config: Any,
        overwrite: bool = False,
        extend: tuple[str, ...] = (),
        fewer: bool = True,
        command: str | None = None,
    ) -> dict | None:
        """Raise `RunExistsError` when a run of `command` (None: of any experiment) with `config` may not start in
        `path`; return its file list, if any.

        ``fewer=False`` also refuses a config with smaller `extend` counts than the recorded run (reading its first
        units is fine, analysing them in its folder would rewrite its results). Writes nothing, so every experiment
        of ``reproduce quick`` can be checked before the first one runs.
        """
        path = check_out_dir(path)
        cfg = _jsonable(config)
        manifest = _inspect(path, command)
        if manifest is None:
            return None
        cfg_file = path / "config.json"
        if not cfg_file.exists():
            return manifest
        old, damage = _read_json(cfg_file)
        if not damage and not _is_run_config(old):
            damage = "not a run's config: no 'config' and 'versions' mappings"
        if damage and not overwrite:
            raise RunExistsError(
                f"{cfg_file} is damaged ({damage}); the folder holds a setpo run: pass --overwrite to delete "
                "that run's files and start again, or choose another --out folder"
            )
        if not damage and old["config"] != cfg and not overwrite:
            if is_extension(old["config"], cfg, extend):
                if fewer or _grows(old["config"], cfg, extend):
                    return manifest
                counts = ", ".join(f"{k} {old['config'][k]}" for k in _differing_keys(old["config"], cfg))
                raise RunExistsError(
                    f"{path} holds a larger run ({counts}); a run of fewer would rewrite its results from fewer: "
                    "ask for the same counts (or more, to grow it), or choose another --out folder"
                )
            keys = ", ".join(_differing_keys(old["config"], cfg)[:6])
            raise RunExistsError(
                f"{path} holds a run with a different config (differs in: {keys}); pass --overwrite to delete "
                "that run's files (nothing else in the folder), or choose another --out folder"
            )
        return manifest

    def close(self) -> None:
        """End this call: the lock is released (the file list is already complete)."""
        if self in _OPEN_RUNS:
            _OPEN_RUNS.remove(self)
        self._unlock()

    def finished_steps(self) -> int:
        """How many steps are recorded as finished."""
        return len(list((self.path / "steps").glob("*.json"))) if (self.path / "steps").is_dir() else 0

    def done(self, step: str) -> bool:
        """True when `step` finished in an earlier call."""
        return (self.path / "steps" / f"{step}.json").exists()

    def load(self, step: str) -> Any:
        """The result recorded for a finished step."""
        path = self.path / "steps" / f"{step}.json"
        obj, damage = _read_json(path)
        if damage:
            raise RunExistsError(f"{path} is damaged ({damage}); delete that file to redo the step")
        return obj

    def save(self, step: str, result: Any) -> Any:
        """Record a finished step's result (written last, so a crash leaves the step to redo), after checking that
        config.json still holds this run's config; returns the result as `load` reads it back (keys sorted), so
        that tables built from a fresh step have the columns of a resumed one."""
        cfg_file = self.path / "config.json"
        now, damage = _read_json(cfg_file) if cfg_file.is_file() else (None, "missing")
        if damage or not _is_run_config(now) or now["config"] != self._recorded:
            why = damage or (
                "not a run's config"
                if not _is_run_config(now)
                else "differs in: " + ", ".join(_differing_keys(self._recorded, now["config"])[:6])
            )
            raise RunExistsError(
                f"{cfg_file} changed while this run wrote into {self.path} ({why}); step {step!r} is not saved: "
                "another run or a person wrote there; check the folder, then rerun (--overwrite starts again)"
            )
        self.write_json(Path("steps") / f"{step}.json", result)
        return json.loads(json.dumps(_jsonable(result), sort_keys=True))


_OPEN_RUNS: list[RunDir] = []


def _open_run(path: Path) -> RunDir | None:
    """The open run whose folder holds `path` (its own MANIFEST and LOCK excepted), if any."""
    target = os.path.abspath(path)
    for run in reversed(_OPEN_RUNS):
        root = os.path.abspath(run.path)
        if target.startswith(root + os.sep) and Path(target).name not in (MANIFEST, LOCK):
            return run
    return None


def _claim_open(path: Path) -> Path:
    """`path`, recorded first as a file of the open run whose folder holds it (if any; see `RunDir.claim`)."""
    run = _open_run(path)
    return path if run is None else run.claim(path)


def _mkparent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _command_line() -> str:
    """This process's command line, as typed (``python -m PACKAGE ...`` for a package's ``__main__``)."""
    if not sys.argv or not sys.argv[0]:
        return "python"
    first = Path(sys.argv[0])
    head = f"python -m {first.parent.name}" if first.name == "__main__.py" else f"python {sys.argv[0]}"
    return " ".join([head, *map(shlex.quote, sys.argv[1:])])


def _read_lock(lock: Path) -> dict | None:
    """The holder a lock file names; None when there is no lock; `RunExistsError` for a damaged one."""
    try:
        text = lock.read_text()
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(text)
    except json.JSONDecodeError:
        holder = None
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        raise RunExistsError(f"{lock} is damaged (no PID); if no run writes into {lock.parent}, delete it")
    return holder


def _alive(holder: dict, path: Path) -> bool:
    """Whether the process a lock of `path` names still runs (a lock of this process: while one of its open runs
    writes into `path`; another machine's: assumed, as it cannot be checked from here)."""
    if holder.get("host") not in (None, socket.gethostname()):
        return True
    if holder["pid"] == os.getpid():
        return any(os.path.realpath(r.path) == os.path.realpath(path) for r in _OPEN_RUNS)
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_use(path: Path, holder: dict) -> str:
    host = holder.get("host")
    where = f" on {host}" if host not in (None, socket.gethostname()) else ""
    return (
        f"{path} is in use by PID {holder['pid']}{where} ({holder.get('command', '?')}); wait for that run to end, "
        f"or choose another --out folder (if PID {holder['pid']}{where} is no setpo run, delete {path / LOCK})"
    )


def _inspect(path: Path, command: str | None = None) -> dict | None:
    """The run file list of `path`; None for a new or empty folder; `RunExistsError` for a folder that is not a
    run of `command`, a damaged list, or a run in use."""
    if not path.exists():
        return None
    if not path.is_dir():
        raise RunExistsError(f"{path} exists and is not a folder; choose another --out")
    holder = _read_lock(path / LOCK)
    if holder is not None and _alive(holder, path):
        raise RunExistsError(_in_use(path, holder))
    marker = path / MANIFEST
    if marker.is_file():
        manifest, damage = _read_json(marker)
        mark = manifest.get("command") if isinstance(manifest, dict) else None
        if mark not in (None, "reproduce") and command is not None and mark != command:
            raise RunExistsError(
                f"{path} holds a run of {mark!r}, not of {command!r}; refusing to write into it or delete anything "
                "there: choose another --out folder"
            )
        if damage or not isinstance(manifest, dict) or not {"files", "dirs"} <= set(manifest):
            raise RunExistsError(
                f"{marker} is damaged ({damage or 'not a run file list'}); it says which files the run wrote, so "
                "nothing is deleted: remove the folder yourself if it holds only that run, or choose another --out"
            )
        version = manifest.get("setpo_run")
        if version != RUN_FORMAT:
            why = f"its list of files is of format {version!r}, not {RUN_FORMAT}"
            raise RunExistsError(
                _older_run(path, "its list of files was made by watching the folder" if version == 1 else why)
            )
        return manifest
    if _is_run_config(_read_json(path / "config.json")[0] if (path / "config.json").is_file() else None):
        raise RunExistsError(_older_run(path, f"it kept no {MANIFEST}"))
    try:
        check_out(path, command or "reproduce")  # a new or empty folder passes; any other is refused
    except OutError as err:
        raise RunExistsError(str(err)) from None
    return None


def _older_run(path: Path, why: str) -> str:
    """The refusal of a run folder written by an older setpo, whose record of the run's own files is missing or
    unreliable: nothing there is resumed, replaced or deleted."""
    return (
        f"{path} holds a run of an older setpo ({why}), so which files are the run's is not known: it is neither "
        "resumed nor cleared by --overwrite; move out any file of yours, delete the folder, and run again (or "
        "choose another --out folder)"
    )


def check_out_dir(path: str | Path) -> Path:
    """`path` as a Path; an empty string (which would mean the current folder) is refused by `check_out`, which
    `RunDir.check` applies in full once the folder is known."""
    if isinstance(path, str) and not path.strip():
        check_out(path, "reproduce")
    return Path(path)


def out_dir(value: str) -> Path:
    """argparse type of --out: refuses an empty string."""
    try:
        return check_out_dir(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def count(value: str) -> int:
    """argparse type of counts such as --seeds N (seeds 0..N-1): an integer >= 1."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return n


def add_run_options(p: argparse.ArgumentParser, name: str) -> None:
    """The run-folder options every experiment shares: --out, --overwrite, --publish, --force-publish."""
    p.add_argument("--out", type=out_dir, default=None, help=f"run folder (default runs/{name}/<profile>)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="delete the files an earlier run wrote in --out (only those) and start again",
    )
    p.add_argument("--publish", action="store_true", help=f"copy figures and tables to paper_figures/{name}/")
    p.add_argument(
        "--force-publish",
        action="store_true",
        help="with --publish: replace published results even when this run is smaller (profile, seeds, steps)",
    )


def seeds_option(args: argparse.Namespace) -> str:
    """`` --seeds N`` when the command line set it, else "": for the command a report names."""
    seeds = getattr(args, "seeds", None)
    return "" if seeds is None else f" --seeds {seeds}"


def default_out(name: str, label: str, **overrides: Any) -> Path:
    """runs/<name>/<label>, with any command-line overrides in the folder name so they never meet the preset."""
    suffix = "".join(f"_{k}{v}" for k, v in overrides.items() if v is not None)
    return Path("runs") / name / f"{label}{suffix}"


# ---------------------------------------------------------------------------------------------------------------
# the experiment harness: one parser, one config file format, one checked run plan, one end of run


def experiment_parser(
    name: str,
    doc: str,
    profiles: dict[str, Any],
    *,
    seeds: str | None = None,
    config: str | None = None,
    threads: int | None = None,
) -> Parser:
    """The options of ``python -m reproduce NAME``: --profile; with `config` (its help) --config FILE (its fields set
    on top of --profile's, see `chosen_config`) and --print-config; with `seeds` (its help) --seeds N; with
    `threads` (the default) --threads; the run-folder options. The experiment adds its own options to the parser
    returned."""
    p = Parser(prog=f"python -m reproduce {name}", description=doc.strip().splitlines()[0])
    p.add_argument("--profile", choices=sorted(profiles), default="quick")
    if config is not None:
        p.add_argument("--config", type=Path, default=None, help=f"{config}; its fields replace those of --profile")
        p.add_argument(
            "--print-config",
            action="store_true",
            help="print the chosen profile (with --config, --seeds and the like applied) as YAML that --config "
            "reads back, and run nothing",
        )
    if seeds is not None:
        p.add_argument("--seeds", type=count, default=None, help=seeds)
    if threads is not None:
        p.add_argument("--threads", type=count, default=threads, help="torch CPU threads")
    add_run_options(p, name)
    return p


def _plain(obj: Any) -> Any:
    """Tuples as lists, all the way down (YAML's safe dumper writes no tuples)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _yaml_value(value: Any, kind: str) -> Any:
    """A YAML value for a field of type `kind`: lists become tuples for tuple fields, and '5e-3' (a string to
    YAML 1.1) becomes a float where a number is expected."""

    def num(v: Any) -> Any:
        if isinstance(v, str) and "float" in kind:
            try:
                return float(v)
            except ValueError:
                return v
        return v

    if isinstance(value, list):
        items = [num(v) for v in value]
        return tuple(items) if kind.startswith("tuple") else items
    return num(value)


def read_config(path: str | Path, cls: type, what: str, base: Any = None) -> Any:
    """A `cls` dataclass from a YAML mapping of its fields, on top of `base` (default: the class defaults).

    An unknown or repeated field, or a file that is not a mapping, is a ValueError naming the file (`what` names
    the config).
    """
    values = read_yaml(path)
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise ValueError(f"{path} must hold a mapping of {what} fields")
    kinds = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise ValueError(f"unknown {what} field(s) in {path}: {unknown}")
    values = {k: _yaml_value(v, kinds[k]) for k, v in values.items()}
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def config_yaml(cfg: Any, header: str) -> str:
    """YAML text of a dataclass config (fields in order), under `header` as comment lines; `read_config` reads it
    back to an equal config."""
    comments = "".join(f"# {line}\n" for line in header.splitlines())
    return comments + yaml.safe_dump(_plain(dataclasses.asdict(cfg)), sort_keys=False)


def chosen_config(
    p: argparse.ArgumentParser,
    args: argparse.Namespace,
    profiles: dict[str, Any],
    what: str,
    *,
    seeds: Callable[[Any, int], Any] | None = None,
) -> Any:
    """The config of parsed options: --profile's (default quick) with the fields --config FILE names replaced, then
    --seeds N through ``seeds(config, N)``: the one rule of --profile with --config in every experiment. A missing
    or bad file or value is a one-line usage error naming it."""
    config_file = getattr(args, "config", None)
    if config_file is not None and not config_file.is_file():
        p.error(f"--config {config_file}: no such file")
    try:
        cfg = profiles[args.profile]
        if config_file is not None:
            cfg = read_config(config_file, type(cfg), what, cfg)
        else:
            cfg = dataclasses.replace(cfg)  # a copy: some configs are mutable
        if seeds is not None and getattr(args, "seeds", None) is not None:
            cfg = seeds(cfg, args.seeds)
    except yaml.YAMLError as err:
        p.error(_yaml_error(config_file, err))
    except (ValueError, TypeError) as err:
        p.error(" ".join(str(err).split()))
    return cfg


def _yaml_error(path: Path, err: yaml.YAMLError) -> str:
    """A YAML syntax error of --config FILE as one line naming the file, the line and what to do."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or " ".join(str(err).split())
    return (
        f"--config {path} is not valid YAML ({problem}{where}); fix that line, or start from the file "
        "--print-config writes"
    )


def print_config(cfg: Any, name: str, args: argparse.Namespace) -> Callable[[], int]:
    """The run of --print-config: the config as YAML for --config FILE; runs nothing."""
    source = getattr(args, "config", None) or f"profile {args.profile}"
    header = f"{name}: {type(cfg).__name__} fields ({source})\nrun with: python -m reproduce {name} --config FILE"
    return lambda: print(config_yaml(cfg, header), end="") or 0


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A checked run: its folder and the config recorded there, and what --publish copies where."""

    out: Path
    config: dict[str, Any]
    overwrite: bool
    label: str  # the profile (or config file) a published result is recorded under
    size: dict[str, int]  # what a published result's scale is judged by (see `check_publish`)
    dest: Path | None  # paper_figures/<name> with --publish, else None
    force: bool = False  # --force-publish: replace larger published results
    extend: tuple[str, ...] = ()  # config counts a resumed run may change (see `RunDir`)
    command: str | None = None  # "reproduce NAME", recorded in the run folder

    @classmethod
    def check(
        cls,
        args: argparse.Namespace,
        name: str,
        label: str,
        config: dict[str, Any],
        size: dict[str, int],
        figures: Path,
        folder: str | None = None,
        extend: tuple[str, ...] = (),
        **overrides: Any,
    ) -> RunPlan:
        """The plan of parsed options, with the run folder (default runs/<name>/<folder or label><overrides>) and
        any publish to `figures`/<name> checked; writes nothing. `overrides` default to --seeds."""
        overrides = overrides or {"seeds": getattr(args, "seeds", None)}
        out = args.out or default_out(name, folder or label, **overrides)
        command = f"reproduce {name}"
        RunDir.check(out, config, args.overwrite, extend, fewer=False, command=command)  # its analysis writes there
        dest = Path(figures) / name if args.publish else None
        if dest is not None:
            check_publish(dest, label, size, args.force_publish)
        return cls(out, config, args.overwrite, label, size, dest, args.force_publish, extend, command)

    def start(self) -> RunDir:
        """Open the run folder (see `RunDir`)."""
        return RunDir(self.out, self.config, overwrite=self.overwrite, extend=self.extend, command=self.command)

    def finish(self, run: RunDir, t0: float, report: Path, files: list[Path], **timing: Any) -> int:
        """The end of a run: timing.json (wall time since `t0`, and `timing`), the run's file list closed, `report`
        printed, and with --publish `files` copied."""
        wall = time.perf_counter() - t0
        write_json(run.path / "timing.json", {"wall_s_this_call": wall, **timing})
        run.close()
        print(Path(report).read_text())
        print(f"wall time {wall:.1f} s; results in {run.path}")
        if self.dest is not None:
            print(f"published to {publish(files, self.dest, self.label, self.size, self.force)}")
        return 0


def progress_callback(bar) -> Any:
    """A TrainerCallback that advances the tqdm `bar` once per optimiser step."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            bar.update(1)

    return Progress()


# ---------------------------------------------------------------------------------------------------------------
# publishing


def check_publish(dest: Path, profile: str | None, size: dict[str, int] | None, force: bool = False) -> None:
    """Raise `PublishError` when results in `dest` come from a larger profile than (`profile`, `size`)."""
    if force or profile is None:
        return
    dest = Path(dest)
    if not dest.is_dir() or not any(p for p in dest.iterdir() if p.name != PUBLISH_RECORD):
        return
    record, damage = _read_json(dest / PUBLISH_RECORD) if (dest / PUBLISH_RECORD).is_file() else (None, "none")
    if not isinstance(record, dict):
        # results published before records were kept are the committed full-profile ones
        if PROFILE_RANK.get(profile, -1) < PROFILE_RANK["full"]:
            raise PublishError(
                f"{dest} holds published results with no profile record (the committed full-profile results); "
                f"this run is profile {profile!r}: pass --force-publish to replace them anyway"
            )
        return
    old_profile, old_size = record.get("profile"), record.get("size") or {}
    smaller = [k for k, v in (size or {}).items() if k in old_size and v < old_size[k]]
    if old_profile in PROFILE_RANK and profile in PROFILE_RANK and PROFILE_RANK[profile] < PROFILE_RANK[old_profile]:
        smaller.insert(0, "profile")
    if smaller:
        now = ", ".join(f"{k} {v}" for k, v in (size or {}).items())
        then = ", ".join(f"{k} {v}" for k, v in old_size.items())
        raise PublishError(
            f"{dest} holds results of profile {old_profile!r} ({then}); this run is {profile!r} ({now}), smaller in "
            f"{', '.join(smaller)}: pass --force-publish to replace them anyway"
        )


def publish(
    files: list[Path],
    dest: Path,
    profile: str | None = None,
    size: dict[str, int] | None = None,
    force: bool = False,
) -> Path:
    """Copy finished figures/tables, and the data file beside each PNG, into `dest` (asked for by --publish).

    With `profile` given, results of a larger run already in `dest` are not replaced unless `force` (see
    `check_publish`), and `dest/.setpo-published.json` records the profile and sizes published.
    """
    dest = Path(dest)
    check_publish(dest, profile, size, force)
    dest.mkdir(parents=True, exist_ok=True)
    for f in map(Path, files):
        for sib in [f] + [f.with_suffix(s) for s in (".csv", ".json") if f.suffix == ".png"]:
            if sib.exists():
                shutil.copy2(sib, dest / sib.name)
    if profile is not None:
        write_json(dest / PUBLISH_RECORD, {"profile": profile, "size": size or {}})
    return dest


def save_figure(fig, path: str | Path, data: Any, overwrite: bool = True) -> Path:
    """Save a matplotlib figure as PNG with its data beside it (`.csv` for a DataFrame, else `.json`); inside an
    open run's folder each file is recorded as the run's before it is written (see `RunDir.claim`)."""
    path = Path(path).with_suffix(".png")
    if path.exists() and not overwrite:
        raise RunExistsError(f"{path} exists; pass overwrite=True to replace it")
    fig.savefig(_mkparent(_claim_open(path)), dpi=150, bbox_inches="tight")
    if hasattr(data, "to_csv"):
        data.to_csv(_mkparent(_claim_open(path.with_suffix(".csv"))), index=False)
    else:
        write_json(path.with_suffix(".json"), data)
    return path


# ---------------------------------------------------------------------------------------------------------------
# command-line entry: one-line errors, interrupts that say what was kept


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the run stops between Python statements."""


# Errors a user can cause (bad values, missing or unwritable paths, damaged files): one line, no traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    RunExistsError,
    PublishError,
    ValueError,
    TypeError,
    OSError,
)


def _user_errors() -> tuple[type[BaseException], ...]:
    extra: list[type[BaseException]] = []
    try:
        import yaml

        extra.append(yaml.YAMLError)
    except ImportError:  # pragma: no cover - yaml is a dependency
        pass
    try:
        from setpo.data import DatasetUnavailableError

        extra.append(DatasetUnavailableError)
    except ImportError:  # pragma: no cover
        pass
    try:
        from safetensors import SafetensorError  # a damaged model file in a run folder

        extra.append(SafetensorError)
    except ImportError:  # pragma: no cover - safetensors comes with transformers
        pass
    return USER_ERRORS + tuple(extra)


def resume_command(prog: str, argv: list[str]) -> str:
    """The command that resumes a run: the same arguments, without the ones that would delete or republish."""
    keep = [a for a in argv if a not in ("--overwrite", "--force-publish")]
    return " ".join([prog, *map(shlex.quote, keep)])


def _on_sigterm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise Terminated()


def cli(main: Callable[[list[str]], int], argv: list[str] | None = None, prog: str = "python -m reproduce") -> int:
    """Run `main(argv)` as a command: user errors as one line (exit 2), SIGINT / SIGTERM as one line saying what
    was kept and how to resume (exit 130 / 143). SETPO_TRACEBACK=1 shows the full traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    n_open = len(_OPEN_RUNS)
    try:
        return int(main(argv) or 0)
    except (KeyboardInterrupt, Terminated) as err:
        code = 130 if isinstance(err, KeyboardInterrupt) else 143
        kept = _kept(n_open)
        print(
            f"\ninterrupted ({'SIGINT' if code == 130 else 'SIGTERM'}): {kept}; resume with: "
            f"{resume_command(prog, argv)}",
            file=sys.stderr,
            flush=True,
        )
        return code
    except _user_errors() as err:
        if os.environ.get("SETPO_TRACEBACK"):
            raise
        print(f"{prog}: error: {_user_error_line(err)}", file=sys.stderr, flush=True)
        return 2
    except (MemoryError, RuntimeError) as err:
        if os.environ.get("SETPO_TRACEBACK") or not _out_of_memory(err):
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        print(f"{prog}: error: out of memory ({first}); ask for a smaller profile or fewer seeds", file=sys.stderr)
        return 2
    finally:
        for run in list(_OPEN_RUNS[n_open:]):
            try:
                run.close()
            except OSError:
                pass
        del _OPEN_RUNS[n_open:]
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


MAX_ERROR_CHARS = 400  # a user error's text beyond this is cut (an error line, not a dump)


def _user_error_line(err: BaseException) -> str:
    """A user error as one line: its text (torch's C++ frames cut off), what to do for a damaged model file or a
    size too large, its type unless it is ours."""
    text = str(err)
    for frames in ("Exception raised from ", "frame #0"):  # torch appends its C++ stack to some messages
        text = text.split(frames, 1)[0]
    msg = " ".join(text.split()) or type(err).__name__
    msg += '"' if msg.count('"') % 2 else ""  # a quote the cut left open
    if len(msg) > MAX_ERROR_CHARS:
        msg = msg[: MAX_ERROR_CHARS - 4] + " ..."
    if "overflow" in msg.lower():
        msg += "; a size is too large for this machine: ask for a smaller profile or fewer seeds"
    if type(err).__name__ == "SafetensorError":
        msg += "; a model file in the run folder is damaged: delete that model's step under steps/ to redo it"
    if not isinstance(err, (RunExistsError, PublishError, UsageError, OutError)):
        msg = f"{msg} ({type(err).__name__}; SETPO_TRACEBACK=1 shows where)"
    return msg


def _out_of_memory(err: BaseException) -> bool:
    """A MemoryError, or torch's RuntimeError for an allocation it cannot make (its text ends in C++ frames)."""
    return isinstance(err, MemoryError) or "can't allocate memory" in str(err) or "out of memory" in str(err)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _kept(n_open: int) -> str:
    runs = _OPEN_RUNS[n_open:]
    if not runs:
        return "nothing was written yet"
    parts = [f"{r.path} ({r.finished_steps()} finished step(s); an unfinished step is redone)" for r in runs]
    return "kept " + "; ".join(parts)
