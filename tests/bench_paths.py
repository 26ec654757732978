"""Where the tests find the benchmark copies: $SETPO_BENCHMARK_DIR when set, else the copies shipped with the tests.

tests/fixtures/benchmarks.tar.xz holds the test splits the tests read (see tests/fixtures/README.md), unpacked once
per archive version into the temporary folder, so every test runs on any fresh clone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

ARCHIVE = Path(__file__).resolve().parent / "fixtures" / "benchmarks.tar.xz"
COMPLETE = ".complete"


def unpack_shipped_copies(archive: Path = ARCHIVE, parent: Path | None = None) -> Path:
    """The archive's files in ``parent/setpo-benchmarks-<digest>``, unpacked on first use (parallel workers too)."""
    if not archive.is_file():
        raise FileNotFoundError(f"shipped benchmark copies missing: {archive} (part of the repository's tests/)")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    dest = parent / f"setpo-benchmarks-{digest}"
    if (dest / COMPLETE).is_file():
        return dest
    work = Path(tempfile.mkdtemp(prefix=f"{dest.name}.", dir=parent))
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work, filter="data")
        else:  # Python < 3.10.12 has no extraction filters; the archive is the repository's own
            tar.extractall(work)  # noqa: S202
    (work / COMPLETE).touch()
    try:
        work.rename(dest)  # atomic: a reader never sees a half-written folder
    except OSError:  # another worker finished first
        shutil.rmtree(work, ignore_errors=True)
    if not (dest / COMPLETE).is_file():
        raise RuntimeError(f"could not unpack {archive} into {dest}")
    return dest


BENCH = Path(os.environ["SETPO_BENCHMARK_DIR"]) if os.environ.get("SETPO_BENCHMARK_DIR") else unpack_shipped_copies()
if not BENCH.is_dir():
    raise FileNotFoundError(f"SETPO_BENCHMARK_DIR={BENCH} is not a folder; unset it to use the shipped copies")
# Marks the tests that read BENCH; they never skip (the shipped copies are always there).
needs_bench = pytest.mark.usefixtures("bench_dir")  # the fixture is defined in tests/conftest.py
