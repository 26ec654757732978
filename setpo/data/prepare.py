"""CLI: ``python -m setpo.data.prepare --out DIR [--datasets ...] [--splits ...] [--local-dir ...] [--limit N]``.

Writes DIR/<dataset>/<split>.parquet (verl format) and DIR/manifest.json; exit status 0 when every requested
split was written or kept, 1 when some were missing (with --skip-missing), 2 on an error. ``--local-dir``
defaults to ``$SETPO_BENCHMARK_DIR`` when that is set.
"""

from __future__ import annotations

import argparse
import os
import sys

from setpo.data.build import DEFAULT_DATASETS, prepare_datasets
from setpo.data.load import DatasetUnavailableError
from setpo.data.sources import SPECS, source_table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m setpo.data.prepare",
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
    if not a.out.strip():
        p.error("--out must name a folder")
    if a.limit is not None and a.limit < 1:
        p.error(f"--limit must be a positive integer, got {a.limit}")
    if a.local_dir is not None and not os.path.isdir(a.local_dir):
        p.error(f"--local-dir {a.local_dir!r} is not a folder (set by --local-dir or $SETPO_BENCHMARK_DIR)")
    try:
        result = prepare_datasets(
            a.out, a.datasets, a.splits, a.local_dir, a.limit, not a.no_hub, a.overwrite, a.skip_missing
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
