"""CLI: ``python -m setpo.data.prepare --out DIR [--datasets ...] [--splits ...] [--local-dir ...] [--limit N]``.

Writes DIR/<dataset>/<split>.parquet (verl format) and DIR/manifest.json; exit status 0 when every requested
split was written or kept, 1 when some were missing (with --skip-missing), 2 on an error. ``--local-dir``
defaults to ``$SETPO_BENCHMARK_DIR`` when that is set. --out follows `setpo.files.check_out`: a new or empty
folder, or one this command wrote. Ctrl-C prints the command that resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from setpo._cli import Parser, run_interruptible
from setpo.data.build import DEFAULT_DATASETS, prepare_datasets
from setpo.data.load import DatasetUnavailableError
from setpo.data.sources import SPECS, source_table
from setpo.files import RUN_MARK, OutError, check_out

PROG = "python -m setpo.data.prepare"
COMMAND = "setpo.data.prepare"


def _earlier_prepare(folder: Path) -> bool:
    """`folder` holds only what this command writes, with its manifest (written before RUN_MARK existed)."""
    names = {p.name for p in folder.iterdir()}
    return (folder / "manifest.json").is_file() and names <= {"manifest.json", *SPECS}


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); Ctrl-C ends in one line with the command that resumes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_interruptible(_main, argv, PROG, "splits already written are kept", resumes=True)


def _main(argv: list[str]) -> int:
    p = Parser(
        prog=PROG,
        description="Write verl-format parquet files DIR/<dataset>/<split>.parquet.",
        epilog="Sources:\n" + source_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--datasets", nargs="+", default=list(DEFAULT_DATASETS), choices=list(SPECS), metavar="NAME")
    p.add_argument("--splits", nargs="+", default=None, help="only these splits (default: all of each dataset)")
    p.add_argument(
        "--local-dir",
        default=os.environ.get("SETPO_BENCHMARK_DIR") or None,
        help="folder of local copies (<folder>/<split>.jsonl), tried first (default: $SETPO_BENCHMARK_DIR)",
    )
    p.add_argument("--limit", type=int, default=None, help="keep the first N rows of each split")
    p.add_argument("--no-hub", action="store_true", help="never contact the Hub (local copies only)")
    p.add_argument("--skip-missing", action="store_true", help="report unavailable splits instead of stopping")
    p.add_argument("--overwrite", action="store_true", help="replace files made from a different request")
    a = p.parse_args(argv)
    try:
        out = check_out(a.out, COMMAND, owns=_earlier_prepare)
    except OutError as e:
        p.exit(2, f"{PROG}: error: {e}\n")
    if a.limit is not None and a.limit < 1:
        p.error(f"--limit must be a positive integer, got {a.limit}")
    if a.local_dir is not None and not os.path.isdir(a.local_dir):
        p.error(f"--local-dir {a.local_dir!r} is not a folder (set by --local-dir or $SETPO_BENCHMARK_DIR)")
    if a.no_hub and a.local_dir is None:
        p.exit(
            2,
            f"{PROG}: error: --no-hub reads local copies only: pass --local-dir FOLDER (or set $SETPO_BENCHMARK_DIR)\n",
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / RUN_MARK).write_text(json.dumps({"setpo_run": 2, "command": COMMAND}) + "\n")
        result = prepare_datasets(
            out, a.datasets, a.splits, a.local_dir, a.limit, not a.no_hub, a.overwrite, a.skip_missing
        )
    except (DatasetUnavailableError, FileExistsError, ValueError, OSError) as e:
        hint = " (--skip-missing writes the available splits)" if isinstance(e, DatasetUnavailableError) else ""
        print(f"error: {e}{hint}", file=sys.stderr)
        return 2
    for key, entry in result.items():
        if key == "missing":
            for k, why in entry.items():
                print(f"MISSING {k}: {why}")
            continue
        state = "kept" if entry.get("skipped") else f"rebuilt ({entry['rebuilt']})" if entry.get("rebuilt") else "wrote"
        print(f"{state} {entry['path']}: {entry['rows']} rows from {entry['source']}")
    return 1 if "missing" in result else 0


if __name__ == "__main__":
    raise SystemExit(main())
