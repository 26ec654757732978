"""`python -m reproduce NAME [options]` runs one experiment; `python -m reproduce quick|full` runs them all.

NAME is a module of this package exposing `main(argv)`; `python -m reproduce NAME --help` lists its options.
In `quick|full`, extra options go to every experiment that has them (`--seeds N` means seeds 0..N-1 everywhere,
`--out DIR` gives each experiment its own DIR/<name>); every experiment's options and run folder are checked
before the first one starts, a failing experiment does not stop the others, and a summary ends the run.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from reproduce.common import _OPEN_RUNS, UsageError, _user_errors, cli

# Experiments the all-in-one profiles run, in order (module names under reproduce/).
EXPERIMENTS = [
    "countdown_evidence",
    "smollm2_primes",
    "smollm2_lists",
    "methods_comparison",
    "smollm2_methods",
    "credit_scale",
    "toy_bandit",
    "countdown",
    "overhead",
    "gapo_lists",
]
AVAILABLE = EXPERIMENTS + ["math_pipeline", "countdown_confirm", "smollm2_confirm"]
PROG = "python -m reproduce"
_NUMBER = re.compile(r"^-\d|^-\.\d")


def _option_groups(rest: list[str]) -> list[tuple[str, list[str]]]:
    """[(option, its tokens)] of an option list; a leading value with no option is refused."""
    groups: list[tuple[str, list[str]]] = []
    for tok in rest:
        if tok.startswith("-") and not _NUMBER.match(tok) and tok != "-":
            groups.append((tok.split("=", 1)[0], [tok]))
        elif groups:
            groups[-1][1].append(tok)
        else:
            raise UsageError(f"unexpected argument {tok!r}: options start with --")
    return groups


def _accepts(parser, option: str) -> bool:
    names = [o for o in parser._option_string_actions if o.startswith("--")]  # noqa: SLF001 - argparse's table
    return option in names or sum(n.startswith(option) for n in names) == 1


def _plan(profile: str, rest: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Per experiment, the options it is given; and notes on options an experiment does not have."""
    groups = _option_groups(rest)
    if any(opt in ("--profile", "-h", "--help") for opt, _ in groups):
        raise UsageError(f"'{PROG} {profile}' sets --profile itself and takes no --help; see '{PROG} NAME --help'")
    if any(opt == "--print-config" for opt, _ in groups):
        raise UsageError(f"'{PROG} {profile}' runs experiments; see '{PROG} NAME --profile {profile} --print-config'")
    parsers = {exp: importlib.import_module(f"reproduce.{exp}").build_parser() for exp in EXPERIMENTS}
    unknown = sorted({opt for opt, _ in groups if not any(_accepts(p, opt) for p in parsers.values())})
    if unknown:
        raise UsageError(f"no experiment has option(s) {', '.join(unknown)}; see '{PROG} NAME --help'")
    argvs, notes = {}, []
    for exp, parser in parsers.items():
        argv = ["--profile", profile]
        for opt, toks in groups:
            if not _accepts(parser, opt):
                notes.append(f"{exp} has no {opt}: not passed to it")
            elif opt == "--out":
                # one folder per experiment, so that --overwrite in one never touches another's files
                values = toks[0].split("=", 1)[1:] + toks[1:]
                if len(values) != 1:
                    raise UsageError("--out takes one folder")
                argv += ["--out", str(Path(values[0]) / exp) if values[0].strip() else ""]
            else:
                argv += toks
        argvs[exp] = argv
    return argvs, notes


def _prepare_all(argvs: dict[str, list[str]]) -> tuple[dict[str, Callable[[], int]], dict[str, str]]:
    """Each experiment's runner, prepared (options parsed, folders checked) before any starts; failures by name."""
    runners: dict[str, Callable[[], int]] = {}
    bad: dict[str, str] = {}
    for exp, argv in argvs.items():
        try:
            runners[exp] = importlib.import_module(f"reproduce.{exp}").prepare(argv)
        except SystemExit as err:  # argparse has printed its one-line error
            bad[exp] = f"bad options (exit {err.code})"
        except Exception as err:  # noqa: BLE001 - reported per experiment, one line each
            bad[exp] = " ".join(str(err).split()) or type(err).__name__
            print(f"{PROG} {exp}: error: {bad[exp]}", file=sys.stderr)
    return runners, bad


def _run_one(exp: str, runner: Callable[[], int]) -> str:
    """Run one prepared experiment: "ok", "exit N" or "failed: ..." (a failure does not stop the others)."""
    n_open = len(_OPEN_RUNS)
    try:
        rc = int(runner() or 0)
        return "ok" if rc == 0 else f"exit {rc}"
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:  # noqa: BLE001 - one failing experiment must not hide the others
        if isinstance(err, _user_errors()) and not os.environ.get("SETPO_TRACEBACK"):
            print(f"{PROG} {exp}: error: {' '.join(str(err).split())}", file=sys.stderr)
        else:
            traceback.print_exc()
        return f"failed: {type(err).__name__}: {' '.join(str(err).split())}"
    finally:
        for run in list(_OPEN_RUNS[n_open:]):
            run.close()


def _all(profile: str, rest: list[str]) -> int:
    argvs, notes = _plan(profile, rest)
    runners, bad = _prepare_all(argvs)
    if bad:
        print(f"{PROG} {profile}: nothing started; fix: " + "; ".join(f"{k}: {v}" for k, v in bad.items()))
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    results: dict[str, str] = {}
    for exp, runner in runners.items():
        t0 = time.perf_counter()
        print(f"\n=== reproduce {exp} --profile {profile} ===", flush=True)
        results[exp] = _run_one(exp, runner)
        print(f"=== {exp}: {results[exp]}, {time.perf_counter() - t0:.0f} s ===", flush=True)
    print("\nsummary: " + "; ".join(f"{k} {v}" for k, v in results.items()))
    failed = [k for k, v in results.items() if v != "ok"]
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch to one experiment, or run the profile's experiments one after another."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("experiments:", ", ".join(AVAILABLE))
        print("profiles: quick (CPU-scale, minutes), full (longer CPU runs); extra options are passed to each")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name in ("quick", "full"):
        return cli(lambda a: _all(name, a), rest, prog=f"{PROG} {name}")
    if name not in AVAILABLE:
        print(f"{PROG}: error: unknown experiment {name!r}; available: {', '.join(AVAILABLE)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"reproduce.{name}")
    return cli(module.main, rest, prog=f"{PROG} {name}")


if __name__ == "__main__":
    raise SystemExit(main())
