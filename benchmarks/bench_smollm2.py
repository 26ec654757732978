"""Time one SmolLM2 arm-seed of the primes experiment on the published path and on the shared-prefix path.

    python benchmarks/bench_smollm2.py [--steps 30] [--threads 2] [--rounds 1] [--seed 0] [--json PATH [--overwrite]]

An arm-seed: the SetPO arm (ratio 0.3, seed ``--seed``, G 6) trained for ``--steps`` LoRA RL steps with the settings of
`reproduce.smollm2_primes` PROFILES["full"] (4 prompts per step, 8 completion tokens, LoRA r 16), then its
evaluation (12 test windows x n 32 at T 0.5 / top-p 0.9 and at T 1.0 / top-p 1.0). "legacy" is the published path
(`SetPOTrainer`, transformers `generate`); "fast" is `SharedPrefixSetPOTrainer` and `HFGenerator(shared_prefix=True)`.
Both run in this one process, interleaved (legacy, fast, then fast, legacy in the next round), so a drift in load
hits both alike. Stages are wall-clock sums over the steps: generation, reward + credits (the rest of TRL's
scoring pass), reference / old log-probs (TRL's extra no-grad passes: none at beta 0 with one iteration), loss
forward, backward + optimizer (the rest of each step), setup (model load, trainer, adapter merge) and evaluation
sampling.

The FLOP estimate counts matmul work only: 2 N FLOP per token through the N non-embedding weights, 2 V d per
vocabulary projection (V x d head), attention scores and values 4 d_attn t per token at context t; backward through
frozen weights with LoRA = 1 x the forward (activation gradients; LoRA weight gradients add 2 r / d per adapted
matrix, negligible) plus the recomputed head of TRL's fused head. Per path, with B = prompts x G rows, P prompt
tokens, C completion tokens (the measured means), U = distinct prompts:
  legacy step: generate B (P + C) tokens, head B C; loss forward B (P + C) tokens, head B (P + C) (TRL scores every
  position off CUDA); backward the same again plus the head once more;
  fast step: generate U P + B C tokens, head B C; loss forward U P + B C tokens, head B C; backward the same.
  Evaluation: legacy n W (P + C) tokens per decoding, fast W P + n W C (W windows), head n W C.
The two paths draw different samples, so their policies (and completion lengths, which set the cost) drift apart
over the steps: the token counts are printed with the times; compare several seeds before reading a small ratio.
The bound is FLOP / (measured float32 matmul GFLOP/s at the thread count used).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `reproduce` (the arm-seed) lives in the checkout
import torch

from setpo._cli import Parser, run_interruptible
from setpo.files import OutError, check_out

STAGES = ("generation", "reward_credits", "ref_old_logps", "loss_forward", "backward_optimizer", "setup",
          "eval_sampling")  # fmt: skip
PATHS = ("legacy", "fast")


def matmul_gflops(threads: int, shapes=((384, 576, 1536), (192, 576, 49152), (600, 576, 576))) -> dict[str, float]:
    """Measured float32 matmul throughput (GFLOP/s, best of 5) per (m, k, n) shape at ``threads`` threads."""
    torch.set_num_threads(threads)
    out = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(2):
            a @ b
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        out[f"{m}x{k}x{n}"] = 2 * m * k * n / best / 1e9
    return out


@contextmanager
def stage_timers(times: dict[str, float], counts: dict[str, list]):  # noqa: C901 - one wrapper per stage, flat
    """Wrap the trainers' stage methods with wall-clock timers (restored on exit)."""
    from setpo.integrations.trl import SetPOTrainer
    from setpo.integrations.trl.fast_path import SharedPrefixSetPOTrainer

    state = {"scoring": False}

    def wrap(cls, name, key):
        fn = getattr(cls, name)

        def timed(self, *args, **kwargs):
            t0 = time.perf_counter()
            if name == "_generate_and_score_completions":
                state["scoring"] = True
            try:
                out = fn(self, *args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                if name == "_generate_and_score_completions":
                    state["scoring"] = False
                if name != "_get_per_token_logps_and_entropies" or state["scoring"]:
                    times[key] += dt
            if name == "_generate_single_turn":
                counts["prompt_tokens"] += [len(p) for p in args[0]]
                counts["completion_tokens"] += [len(c) for c in out[0]]
                counts["distinct_prompts"].append(len({tuple(p) for p in args[0]}))
            return out

        return timed

    names = {"_generate_single_turn": "generation", "_generate_and_score_completions": "score_total",
             "_get_per_token_logps_and_entropies": "ref_old_logps", "compute_loss": "loss_forward",
             "train": "train_total"}  # fmt: skip
    saved = []
    for cls in (SetPOTrainer, SharedPrefixSetPOTrainer):
        for name, key in names.items():
            if cls is not SetPOTrainer and getattr(cls, name) is getattr(SetPOTrainer, name):
                continue  # inherited: already timed once
            saved.append((cls, name, cls.__dict__.get(name)))
            setattr(cls, name, wrap(cls, name, key))
    try:
        yield
    finally:
        for cls, name, original in saved:
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)


def arm_seed(path: str, steps: int, work: Path, seed: int = 0) -> dict:
    """Train and evaluate one arm-seed on ``path``; per-stage seconds, token counts and the pass@k it reached."""
    from reproduce.common import RunDir
    from reproduce.smollm2_primes import PROFILES, PROMPT, AnswerOneHot, primes_reward, valid_answer, windows
    from reproduce.tasks.smollm2 import load_policy, sample, train_arm
    from setpo.metrics import pass_at_k

    prof = dataclasses.replace(PROFILES["full"], rl_steps=steps)
    fast = path == "fast"
    times: dict[str, float] = defaultdict(float)
    counts: dict[str, list] = defaultdict(list)
    rows = [{"prompt": PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi} for lo, hi in windows("train", prof.n_test)]
    run = RunDir(work / path, {"bench": path, "steps": steps})
    t0 = time.perf_counter()
    with stage_timers(times, counts):
        adapter = train_arm(run, f"setpo_{path}", rows, [primes_reward], AnswerOneHot(), prof=prof, G=6, seed=seed,
                            ratio=0.3, placebo=False, fast=fast)  # fmt: skip
    t_train = time.perf_counter() - t0
    log = run.load(f"rl_setpo_{path}")["log"]
    t1 = time.perf_counter()
    model, tok = load_policy(adapter)
    times["setup"] += time.perf_counter() - t1 + t_train - times["train_total"]
    tests = windows("test", prof.n_test)
    prompts = [PROMPT.format(lo=lo, hi=hi) for lo, hi in tests]
    passes = {}
    for T, top_p in prof.decodings:
        t1 = time.perf_counter()
        samples = sample(model, tok, prompts, prof.eval_n, T, top_p, prof.max_completion_length, prof.eval_batch_size,
                         fast=fast)  # fmt: skip
        times["eval_sampling"] += time.perf_counter() - t1
        correct = [sum(valid_answer(s, lo, hi) is not None for s in row) for row, (lo, hi) in zip(samples, tests)]
        counts["eval_completion_tokens"] += [len(tok(s, add_special_tokens=False)["input_ids"]) for r in samples
                                             for s in r]  # fmt: skip
        passes[f"T{T:g}"] = {k: float(np.mean(pass_at_k(prof.eval_n, np.asarray(correct), k))) for k in (1, 16)}
    step_rest = times["train_total"] - times["score_total"] - times["loss_forward"]
    stages = {
        "generation": times["generation"],
        "reward_credits": times["score_total"] - times["generation"] - times["ref_old_logps"],
        "ref_old_logps": times["ref_old_logps"],
        "loss_forward": times["loss_forward"],
        "backward_optimizer": step_rest,
        "setup": times["setup"],
        "eval_sampling": times["eval_sampling"],
    }
    eval_prompt = float(np.mean([len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]))
    return {
        "path": path,
        "stages_s": stages,
        "total_s": sum(stages.values()),
        "train_s": t_train,
        "tokens": {
            "prompt": float(np.mean(counts["prompt_tokens"])),
            "completion": float(np.mean(counts["completion_tokens"])),
            "distinct_prompts": float(np.mean(counts["distinct_prompts"])),
            "rows": len(counts["prompt_tokens"]) / steps,
            "eval_prompt": eval_prompt,
            "eval_completion": float(np.mean(counts["eval_completion_tokens"])),
        },
        "final_reward": log[-1]["reward"] if log else None,
        "pass": passes,
    }


def flops(path: str, tok: dict, steps: int, model_dims: dict, windows: int = 12, n: int = 32, decodings: int = 2):
    """Matmul FLOP of one arm-seed on ``path`` from the token counts (formula in the module docstring)."""
    N, Vd, d_attn, L = model_dims["N"], model_dims["Vd"], model_dims["d_attn"], model_dims["layers"]
    B, U, P, C = tok["rows"], tok["distinct_prompts"], tok["prompt"], tok["completion"]

    def fwd(tokens: float, ctx: float) -> float:
        return tokens * (2 * N + 4 * d_attn * L * ctx)

    if path == "legacy":
        gen = fwd(B * (P + C), P + C) + 2 * Vd * B * C
        loss = fwd(B * (P + C), P + C) + 2 * Vd * B * (P + C)
        back = fwd(B * (P + C), P + C) + 2 * 2 * Vd * B * (P + C)
        ev = fwd(n * windows * (tok["eval_prompt"] + tok["eval_completion"]), P + C) + 2 * Vd * n * windows * C
    else:
        gen = fwd(U * P + B * C, P + C) + 2 * Vd * B * C
        loss = fwd(U * P + B * C, P + C) + 2 * Vd * B * C
        back = loss
        ev = fwd(windows * tok["eval_prompt"] + n * windows * tok["eval_completion"], P + C) + 2 * Vd * n * windows * C
    return {"train": steps * (gen + loss + back), "eval": decodings * ev}


def model_dims() -> dict:
    """Non-embedding parameter count N, head size V d, attention width and layers of SmolLM2-135M."""
    from setpo.models import load_pretrained

    model, _ = load_pretrained("smollm2-135m-instruct")
    cfg = model.config
    emb = model.get_input_embeddings().weight.numel()
    total = sum(p.numel() for p in model.parameters())
    return {"N": total - emb, "Vd": emb, "d_attn": cfg.num_attention_heads * cfg.head_dim,
            "layers": cfg.num_hidden_layers}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parsed command line; counts below 1 and a --json the rule of every output refuses end in one line."""
    parser = Parser(prog="python benchmarks/bench_smollm2.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="RL steps per arm-seed (the full profile: 30)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (each times both paths)")
    parser.add_argument("--seed", type=int, default=0, help="the arm-seed's training seed (both paths)")
    parser.add_argument("--json", default=None, help="write the results here (a new file)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.threads < 1:
        parser.error(f"--steps, --rounds and --threads must be >= 1 (got {args.steps}, {args.rounds}, {args.threads})")
    if args.json is not None:  # checked before minutes of training, by the one rule of every output
        try:
            args.json = check_out(args.json, "bench_smollm2", flag="--json", is_file=True, overwrite=args.overwrite)
        except OutError as err:
            parser.exit(2, f"{parser.prog}: error: {err}\n")
    return parser, args


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); Ctrl-C ends in one line with the command that reruns."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_interruptible(_main, argv, "python benchmarks/bench_smollm2.py", "nothing written")


def _main(argv: list[str]) -> int:
    parser, args = parse_args(argv)
    torch.set_num_threads(args.threads)
    gflops = matmul_gflops(args.threads)
    shown = ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in gflops.items())
    print(f"float32 matmul at {args.threads} thread(s): {shown}")
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for path in PATHS if r % 2 == 0 else PATHS[::-1]:
                print(f"round {r + 1}: {path} ...", flush=True)
                results.append({"round": r, **arm_seed(path, args.steps, Path(tmp) / f"r{r}", args.seed)})
    dims = model_dims()
    rate = float(np.median(list(gflops.values()))) * 1e9
    med = {p: {s: float(np.median([x["stages_s"][s] for x in results if x["path"] == p])) for s in STAGES}
           for p in PATHS}  # fmt: skip
    total = {p: float(np.median([x["total_s"] for x in results if x["path"] == p])) for p in PATHS}
    print(f"\nSmolLM2 arm-seed ({args.steps} RL steps + evaluation of 12 windows x n 32 x 2 decodings), "
          f"{args.threads} thread(s), median of {args.rounds} round(s), seconds")  # fmt: skip
    print(f"{'stage':<22}{'legacy':>10}{'fast':>10}{'ratio':>8}")
    for s in STAGES:
        a, b = med["legacy"][s], med["fast"][s]
        print(f"{s:<22}{a:>10.2f}{b:>10.2f}{(a / b if b > 0 else float('nan')):>8.2f}")
    print(f"{'total':<22}{total['legacy']:>10.2f}{total['fast']:>10.2f}{total['legacy'] / total['fast']:>8.2f}")
    fl = {}
    for p in PATHS:
        tok = results[[x["path"] for x in results].index(p)]["tokens"]
        fl[p] = flops(p, tok, args.steps, dims)
        f_all = fl[p]["train"] + fl[p]["eval"]
        print(f"{p}: {f_all / 1e12:.2f} TFLOP (train {fl[p]['train'] / 1e12:.2f}, eval {fl[p]['eval'] / 1e12:.2f}); "
              f"at {rate / 1e9:.0f} GFLOP/s >= {f_all / rate:.1f} s, measured {total[p]:.1f} s "
              f"({f_all / rate / total[p]:.0%} of the matmul bound); tokens {tok}")  # fmt: skip
    for x in results:
        print(f"round {x['round'] + 1} {x['path']}: total {x['total_s']:.1f} s, final reward {x['final_reward']}, "
              f"pass {x['pass']}")  # fmt: skip
    if args.json is not None:
        shown = {k: str(v) for k, v in vars(args).items() if k != "overwrite"}
        report = {"args": shown, "matmul_gflops": gflops, "model": dims,
                  "runs": results, "median_stages_s": med, "median_total_s": total, "flops": fl}  # fmt: skip
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1))
        except OSError as err:
            print(f"{parser.prog}: error: cannot write --json {args.json}: {err.strerror or err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
