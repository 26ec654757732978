"""python -m theory [--quick] [--only NAME,...] [--report PATH [--overwrite]]: run the checks, print the table,
write the report.

A full run (no --quick, no --only) writes paper_figures/theory_report.md and the arithmetic audit
(paper_figures/paper_arithmetic.md + .csv); partial runs only print unless --report is given. --report follows
`setpo.files.check_out`: a file already there is replaced only with --overwrite. Exit status 1 when any check
has an unexpected outcome, 2 for a bad option or an unwritable report, 130 on Ctrl-C (with the command to rerun).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from setpo._cli import Parser, run_interruptible
from setpo.files import OutError, check_out
from theory import RESULTS, consistency, find, paper_arithmetic, report

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "paper_figures" / "theory_report.md"
ARITHMETIC = ROOT / "paper_figures" / "paper_arithmetic.md"


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); Ctrl-C ends in one line with the command that reruns."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_interruptible(_main, argv, "python -m theory", "no report written")


def _main(argv: list[str]) -> int:
    parser = Parser(prog="python -m theory", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 1,000 instances per check instead of 10,000")
    parser.add_argument("--only", default="", help="comma-separated keys or labels, e.g. thm_4_4,C.5,3.4")
    parser.add_argument("--report", default=None, help="where to write the markdown report (a new file)")
    parser.add_argument("--overwrite", action="store_true", help="replace the --report file if it exists")
    parser.add_argument("--list", action="store_true", help="list the results and exit")
    args = parser.parse_args(argv)
    if args.report is not None:
        try:
            args.report = check_out(args.report, "theory", flag="--report", is_file=True, overwrite=args.overwrite)
        except OutError as err:
            parser.exit(2, f"python -m theory: error: {err}\n")
    if args.list:
        for res in RESULTS:
            print(f"{res.key:18s} {res.title}  (aliases: {', '.join(res.aliases) or '-'})")
        return 0
    try:
        chosen = [find(n) for n in args.only.split(",") if n.strip()] or list(RESULTS)
    except ValueError as err:
        parser.error(str(err))
    full = not args.quick and not args.only
    torch.set_num_threads(1)  # small float64 batches: OpenMP threads only add synchronisation on a busy machine
    start, records = time.perf_counter(), []
    for res in tqdm(chosen, desc="theory checks", unit="result", file=sys.stderr):
        records.extend(res.run(quick=args.quick))
    elapsed = time.perf_counter() - start
    print(report.text_table(records))
    bad = [r for r in records if not r.ok]
    print(f"\n{len(records)} checks in {elapsed:.1f} s, {len(bad)} unexpected outcome(s)")
    for r in bad:
        print(f"  UNEXPECTED: {r.result} / {r.check}: {r.verdict.value} (expected {r.expected.value}) {r.detail}")
    path = args.report or (REPORT if full else None)
    if path is not None:
        command = (
            "python -m theory" + (" --quick" if args.quick else "") + (f" --only {args.only}" if args.only else "")
        )
        statements = {res.title: res.load().__doc__ or "" for res in chosen}
        scopes = {res.load().RESULT: res.scope() for res in chosen}
        extra = consistency.bias_table(records)
        if any(res.key == "arithmetic" for res in chosen):
            items = paper_arithmetic.audit()
            paper_arithmetic.write(items, ARITHMETIC, ARITHMETIC.with_suffix(".csv"))
            extra += [
                "### Paper arithmetic",
                "",
                f"See `{ARITHMETIC.name}`. Inconsistent: " + "; ".join(paper_arithmetic.inconsistent(items)) + ".",
                "",
            ]
            print(f"wrote {ARITHMETIC.relative_to(ROOT)} and {ARITHMETIC.with_suffix('.csv').relative_to(ROOT)}")
        try:
            report.write(path, report.markdown(records, statements, command, extra, scopes))
        except OSError as err:
            print(f"python -m theory: error: cannot write --report {path}: {err.strerror or err}", file=sys.stderr)
            return 2
        print(f"wrote {path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
