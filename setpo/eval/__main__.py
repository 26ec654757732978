"""CLI: evaluate a checkpoint on prepared benchmarks (`python -m setpo.eval --model PATH --out DIR [--data DIR]`).

Reads DIR/<benchmark>/test.parquet (from `python -m setpo.data.prepare`; without --data the benchmarks are
prepared into OUT/data from --local-dir, by default $SETPO_BENCHMARK_DIR, or the Hub), samples n completions per
problem (vLLM when installed, else transformers; the paper's n: 64, College Math 16), verifies them with
math-verify and writes generations, results and a Pass@1 / pass@k table under --out. A benchmark already
scored with the same settings, the same checkpoint files (paths, sizes, mtimes) and the same rows is not redone.
--out follows `setpo.files.check_out`: a new or empty folder, or one an earlier `python -m setpo.eval` wrote
(its ``.setpo-run.json`` records the request); the tables of a request with other settings are replaced only
with --overwrite. Ctrl-C prints the command that resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

from setpo._cli import Parser, run_interruptible
from setpo.data import EVAL_BENCHMARKS, DatasetUnavailableError, prepare_split, read_prepared
from setpo.eval.generate import SamplingConfig, config_dict, make_generator
from setpo.eval.harness import evaluate_benchmark, math_checker, model_fingerprint, reference_answers, rows_digest
from setpo.eval.tables import REPORTED, pass1_table, pass_at_k_table
from setpo.files import RUN_MARK, OutError, check_out
from setpo.tasks.math.verify import SCORING_RULE, MathVerifier, extracted_answer

#: The paper's samples per problem where they differ from --n (Sec. 5: College Math Avg@16).
PAPER_N = {"college_math": 16}
PROG = "python -m setpo.eval"
COMMAND = "setpo.eval"
#: What a folder written by this command before it kept a RUN_MARK holds.
_OUTPUTS = {"results", "generations", "pass1.md", "passk.md", "data"}


def _earlier_eval(folder: Path) -> bool:
    """`folder` holds only what an evaluation writes, with a result or the data it prepared (an evaluation of a
    version before RUN_MARK, or one stopped while it prepared the benchmarks into OUT/data)."""
    names = {p.name for p in folder.iterdir()}
    made = any((folder / "results").glob("*.json")) or (folder / "data" / "manifest.json").is_file()
    return names <= _OUTPUTS and made


def _check_tables(out: Path, request: dict, overwrite: bool) -> None:
    """Refuse (OutError) to replace pass1.md / passk.md made for another request, unless `overwrite`."""
    try:
        old = json.loads((out / RUN_MARK).read_text()).get("request")
    except (OSError, ValueError, AttributeError):
        old = None
    tables = [t for t in ("pass1.md", "passk.md") if (out / t).exists()]
    if tables and old != request and not overwrite:
        diff = sorted(k for k in request if not isinstance(old, dict) or old.get(k) != request[k])
        why = f"differs in: {', '.join(diff)}" if isinstance(old, dict) else "its settings are not recorded"
        raise OutError(
            f"--out {out} holds {' and '.join(tables)} of an evaluation with other settings ({why}); pass --overwrite "
            "to replace them, or choose another --out"
        )


def _n_overrides(items: list[str], p: argparse.ArgumentParser) -> dict[str, int]:
    out = {}
    for item in items:
        bench, _, value = item.partition("=")
        if bench not in EVAL_BENCHMARKS or not value.isdigit() or int(value) < 1:
            p.error(f"--n-per-benchmark takes BENCH=N with BENCH in {', '.join(EVAL_BENCHMARKS)} and N >= 1: {item!r}")
        out[bench] = int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); Ctrl-C ends in one line with the command that resumes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept = "benchmarks already scored are kept under their results/"
    return run_interruptible(_main, argv, PROG, kept, resumes=True)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    p.add_argument("--data", type=Path, default=None, help="folder written by python -m setpo.data.prepare")
    p.add_argument(
        "--local-dir",
        default=os.environ.get("SETPO_BENCHMARK_DIR") or None,
        help="without --data: local benchmark copies to prepare from (default: $SETPO_BENCHMARK_DIR)",
    )
    p.add_argument("--no-hub", action="store_true", help="without --data: never contact the Hub")
    p.add_argument("--out", required=True, help="output folder: new, empty, or one an earlier run wrote")
    p.add_argument("--benchmarks", nargs="+", default=list(EVAL_BENCHMARKS), choices=list(EVAL_BENCHMARKS))
    p.add_argument("--method", default="model", help="row name in the tables")
    p.add_argument("--n", type=int, default=64, help="samples per problem (default 64, the paper's Avg@64)")
    p.add_argument(
        "--n-per-benchmark",
        nargs="+",
        default=[f"{b}={n}" for b, n in PAPER_N.items()],
        metavar="BENCH=N",
        help="per-benchmark n (default college_math=16; Fig. 8: aime24=256)",
    )
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--max-new-tokens", type=int, default=3072)
    p.add_argument("--batch-size", type=int, default=64, help="sequences per generate call (transformers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark (N >= 1)")
    p.add_argument("--backend", choices=("auto", "vllm", "hf"), default="auto")
    p.add_argument("--verify-workers", type=int, default=0, help="processes for math-verify (0: main process)")
    p.add_argument("--require-boxed", action="store_true", help="score only the last \\boxed{} of each sample")
    p.add_argument("--reported", choices=sorted(REPORTED), default=None, help="paper table to show beside")
    p.add_argument("--overwrite", action="store_true", help="replace results made with other settings")
    return p


def _read_rows(a: argparse.Namespace, p: argparse.ArgumentParser) -> dict[str, list]:
    """The prepared test rows of each benchmark (prepared into ``--out/data`` first when ``--data`` is not given)."""
    data = a.data
    if data is None:
        if a.local_dir is not None and not Path(a.local_dir).is_dir():
            p.error(f"--local-dir {a.local_dir!r} is not a folder (set by --local-dir or $SETPO_BENCHMARK_DIR)")
        data = a.out / "data"
        try:
            for bench in a.benchmarks:
                prepare_split(bench, "test", data, a.local_dir, use_hub=not a.no_hub)
        except (DatasetUnavailableError, FileExistsError, ValueError, OSError) as e:
            p.exit(2, f"error: preparing the benchmarks into {data}: {e}\n")
    missing = [b for b in a.benchmarks if not (data / b / "test.parquet").is_file()]
    if missing:
        p.error(f"no prepared test.parquet under {data} for: {', '.join(missing)} (run python -m setpo.data.prepare)")
    try:
        rows = {b: _checked_rows(data / b / "test.parquet", a.limit) for b in a.benchmarks}
    except (ValueError, OSError) as e:
        p.exit(2, f"{PROG}: error: {e} (python -m setpo.data.prepare --overwrite writes it again)\n")
    return rows


def _checked_rows(path: Path, limit: int | None) -> list[dict]:
    """The first `limit` rows of a prepared file; ValueError naming the file and row when one has no prompt or
    no reference answer."""
    rows = read_prepared(path)[:limit]
    for i, row in enumerate(rows):
        if not isinstance(row.get("prompt"), (str, list)):
            raise ValueError(f"{path} row {i} has no prompt")
        try:
            reference_answers(row)
        except ValueError:
            raise ValueError(f"{path} row {i} has no reference answer") from None
    return rows


def _claim_out(a: argparse.Namespace, p: argparse.ArgumentParser, request: dict) -> None:
    """Refuse the tables of another request, then mark ``--out`` as this request's."""
    try:
        _check_tables(a.out, request, a.overwrite)
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / RUN_MARK).write_text(json.dumps({"setpo_run": 2, "command": COMMAND, "request": request}) + "\n")
    except OutError as e:
        p.exit(2, f"{PROG}: error: {e}\n")
    except OSError as e:
        p.exit(2, f"{PROG}: error: cannot write to --out {a.out}: {e.strerror or e}\n")


def _main(argv: list[str]) -> int:
    p = _parser()
    a = p.parse_args(argv)

    if a.limit is not None and a.limit < 1:
        p.error(f"--limit must be a positive number of problems, got {a.limit}")
    if a.seed < 0 or a.verify_workers < 0:
        p.error("--seed and --verify-workers must be >= 0")
    n_for = {b: a.n for b in a.benchmarks} | {
        b: n for b, n in _n_overrides(a.n_per_benchmark, p).items() if b in a.benchmarks
    }
    try:
        sampling = SamplingConfig(a.n, a.temperature, a.top_p, a.max_new_tokens, a.batch_size, a.seed)
    except ValueError as e:
        p.error(str(e))
    request = {
        "model": a.model,
        "benchmarks": a.benchmarks,
        "n": n_for,
        "sampling": config_dict(sampling),
        "limit": a.limit,
        "require_boxed": a.require_boxed,
        "method": a.method,
        "reported": a.reported,
    }
    try:
        a.out = check_out(a.out, COMMAND, owns=_earlier_eval)
    except OutError as e:
        p.exit(2, f"{PROG}: error: {e}\n")
    rows = _read_rows(a, p)
    _claim_out(a, p, request)
    model_key = model_fingerprint(a.model)
    try:
        generate = make_generator(a.model, sampling, backend=a.backend)
    except (OSError, ValueError, ImportError) as e:
        p.exit(2, f"error: cannot load the model {a.model!r}: {e}\n")
    except Exception as e:  # noqa: BLE001 - safetensors' error type is known only once the module is loaded
        if type(e).__name__ != "SafetensorError" or os.environ.get("SETPO_TRACEBACK"):
            raise
        p.exit(
            2,
            f"{PROG}: error: a weights file of the model {a.model!r} is damaged ({' '.join(str(e).split())[:120]}); "
            "copy or save the checkpoint again\n",
        )
    results = {}
    for bench in a.benchmarks:
        bench_sampling = config_dict(sampling) | {"n": n_for[bench]}
        cfg = {
            "model": a.model,
            "model_files": model_key,
            "data": rows_digest(rows[bench]),
            "sampling": bench_sampling,
            "limit": a.limit,
            "require_boxed": a.require_boxed,
            "scoring": SCORING_RULE,
        }
        checker = math_checker(MathVerifier(require_boxed=a.require_boxed), workers=a.verify_workers)
        gen = generate.with_n(n_for[bench]) if hasattr(generate, "with_n") else generate
        try:
            results[bench] = evaluate_benchmark(
                bench, rows[bench], gen, a.out, cfg, checker, overwrite=a.overwrite,
                extract=partial(extracted_answer, require_boxed=a.require_boxed),
            )  # fmt: skip
        except FileExistsError as e:
            p.exit(2, f"error: {e}\n")
        r = results[bench]
        print(f"{bench}: Avg@{r['n']} = {100 * r['avg@n']:.1f}% over {r['problems']} problems")
    ns = ", ".join(f"{b} {n}" for b, n in n_for.items() if n != a.n)
    scale = (
        f"{a.model}, n={a.n}{f' ({ns})' if ns else ''}, T={a.temperature}, top-p={a.top_p}, seed {a.seed}, "
        f"limit {a.limit or 'none'}"
    )
    pass1 = {a.method: {b: 100 * r["avg@n"] for b, r in results.items()}}
    (a.out / "pass1.md").write_text(pass1_table(pass1, scale, reported_model=a.reported))
    (a.out / "passk.md").write_text(pass_at_k_table({a.method: results}, scale))
    print((a.out / "pass1.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
