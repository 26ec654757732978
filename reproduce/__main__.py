"""`python -m reproduce NAME [options]` runs one experiment; `python -m reproduce quick|full` runs them all.

NAME is a module of this package exposing `main(argv)`; `python -m reproduce NAME --help` lists its options.
"""

from __future__ import annotations

import importlib
import sys
import time

# Experiments the all-in-one profiles run, in order (module names under reproduce/).
EXPERIMENTS = ["toy_bandit", "countdown", "overhead", "gapo_lists"]
AVAILABLE = EXPERIMENTS + ["math_pipeline", "countdown_evidence", "credit_scale", "smollm2_primes"]


def _run(name: str, argv: list[str]) -> int:
    module = importlib.import_module(f"reproduce.{name}")
    return int(module.main(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("experiments:", ", ".join(AVAILABLE))
        print("profiles: quick (CPU-scale, minutes), full (longer CPU runs); extra options are passed to each")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name in ("quick", "full"):
        failed = []
        for exp in EXPERIMENTS:
            t0 = time.perf_counter()
            print(f"\n=== reproduce {exp} --profile {name} ===", flush=True)
            rc = _run(exp, ["--profile", name, *rest])
            print(f"=== {exp}: exit {rc}, {time.perf_counter() - t0:.0f} s ===", flush=True)
            if rc:
                failed.append(exp)
        if failed:
            print("failed:", ", ".join(failed))
        return 1 if failed else 0
    if name not in AVAILABLE:
        print(f"unknown experiment {name!r}; available: {', '.join(AVAILABLE)}", file=sys.stderr)
        return 2
    return _run(name, rest)


if __name__ == "__main__":
    raise SystemExit(main())
