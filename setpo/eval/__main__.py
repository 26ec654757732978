"""CLI: evaluate a checkpoint on prepared benchmarks (`python -m setpo.eval --model PATH --data DIR --out DIR`).

Reads DIR/<benchmark>/test.parquet (from `python -m setpo.data.prepare`), samples n completions per problem
(vLLM when installed, else transformers), verifies them with math-verify and writes generations, results and
a Pass@1 / pass@k table under --out. A benchmark already scored with the same settings is not redone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from setpo.data import EVAL_BENCHMARKS, read_prepared
from setpo.eval.generate import SamplingConfig, config_dict, make_generator
from setpo.eval.harness import evaluate_benchmark, math_checker
from setpo.eval.tables import REPORTED, pass1_table, pass_at_k_table
from setpo.eval.verify import MathVerifier


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m setpo.eval", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    p.add_argument("--data", required=True, type=Path, help="folder written by python -m setpo.data.prepare")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--benchmarks", nargs="+", default=list(EVAL_BENCHMARKS), choices=list(EVAL_BENCHMARKS))
    p.add_argument("--method", default="model", help="row name in the tables")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--max-new-tokens", type=int, default=3072)
    p.add_argument("--batch-size", type=int, default=64, help="sequences per generate call (transformers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    p.add_argument("--backend", choices=("auto", "vllm", "hf"), default="auto")
    p.add_argument("--verify-workers", type=int, default=0, help="processes for math-verify (0: main process)")
    p.add_argument("--require-boxed", action="store_true", help="score only the last \\boxed{} of each sample")
    p.add_argument("--reported", choices=sorted(REPORTED), default=None, help="paper table to show beside")
    p.add_argument("--overwrite", action="store_true", help="replace results made with other settings")
    a = p.parse_args(argv)

    sampling = SamplingConfig(a.n, a.temperature, a.top_p, a.max_new_tokens, a.batch_size, a.seed)
    missing = [b for b in a.benchmarks if not (a.data / b / "test.parquet").is_file()]
    if missing:
        p.error(f"no prepared test.parquet under {a.data} for: {', '.join(missing)} (run python -m setpo.data.prepare)")
    generate = make_generator(a.model, sampling, backend=a.backend)
    results = {}
    for bench in a.benchmarks:
        rows = read_prepared(a.data / bench / "test.parquet")[: a.limit]
        cfg = {"model": a.model, "sampling": config_dict(sampling), "limit": a.limit, "require_boxed": a.require_boxed}
        checker = math_checker(MathVerifier(require_boxed=a.require_boxed), workers=a.verify_workers)
        results[bench] = evaluate_benchmark(bench, rows, generate, a.out, cfg, checker, overwrite=a.overwrite)
        print(f"{bench}: Avg@{sampling.n} = {100 * results[bench]['avg@n']:.1f}% over {results[bench]['problems']}")
    scale = f"{a.model}, n={a.n}, T={a.temperature}, top-p={a.top_p}, seed {a.seed}, limit {a.limit or 'none'}"
    pass1 = {a.method: {b: 100 * r["avg@n"] for b, r in results.items()}}
    (a.out / "pass1.md").write_text(pass1_table(pass1, scale, reported_model=a.reported))
    (a.out / "passk.md").write_text(pass_at_k_table({a.method: results}, scale))
    print((a.out / "pass1.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
