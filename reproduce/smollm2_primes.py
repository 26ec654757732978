"""Does SetPO beat GRPO's frontier and a placebo on a real pretrained LM? SmolLM2-135M-Instruct naming primes.

    python -m reproduce smollm2_primes --profile quick|full [--seeds N] [--out DIR] [--overwrite] [--publish]

Design (fixed before the runs; the profile sets the sizes)
* Model: SmolLM2-135M-Instruct (the offline copy, `setpo.models`), trained with LoRA (r 16 on q, k, v, o).
* Task: "Name a prime number between lo and hi. / The prime number is " (plain text, no chat template: short
  prompts keep a CPU step affordable). The first integer of the completion is the answer; reward 1 when it is a
  prime strictly between lo and hi, else 0. Many answers are valid (about 7 primes per window of 30), the model
  is narrow (about 1 distinct valid answer in 16 samples) and often wrong (pass@1 about 0.1): chosen by
  measuring candidate tasks (sums, multiples, primes) on this model.
* Train windows: widths 20 and 40 at every lo in 0..95; test windows: width 30 at 12 fixed lo (no test prompt
  is a training prompt).
* Arms from the same start, same seeds, same budget: GRPO; SetPO+GRPO with lambda set every step so that
  mean|lambda s| / mean|A_bar| = r for r in `ratios`; a placebo at `placebo_ratio` (credits permuted across groups).
* Kernel: a one-hot hashed embedding of the answer (its first integer; the text when there is none), so the
  kernel says "same answer" or not.
* GRPO's frontier: GRPO's LoRA adapter saved at `frontier_points` evenly spaced steps and evaluated.
* Evaluation: n samples per test window at T 0.5 / top-p 0.9 (the paper's) and T 1.0 / top-p 1.0.
* Metrics: pass@1, pass@k (k = 1, 2, 4, ..., n), distinct valid primes per window, width (windows with >= 2).
* Statistics and decision rule: as in `reproduce.evidence` (paired over seeds, bootstrap CI, sign-flip test;
  frontier gap and SetPO minus placebo in pass@n decide; the regime check says whether GRPO raised pass@n).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce.common import (
    RunDir,
    RunPlan,
    seeds_option,
)
from reproduce.evidence import (
    analyse,
    arms,
    cached_eval,
    saved_steps,
)
from reproduce.smollm2 import load_policy, sample, train_arm
from reproduce.tasks.primes import PROMPT, TEST_LOS, AnswerOneHot, primes_reward, valid_answer, windows

NAME = "smollm2_primes"
COMMAND = "python -m reproduce smollm2_primes --profile {profile}"


@dataclass(frozen=True)
class PrimesProfile:
    """Sizes of one run of the experiment (the design is in the module docstring)."""

    n_test: int = 12
    group_sizes: tuple[int, ...] = (6,)
    seeds: int = 2
    rl_steps: int = 4
    prompts_per_step: int = 4
    rl_lr: float = 2e-4
    lora_r: int = 16
    ratios: tuple[float, ...] = (0.3,)
    placebo_ratio: float = 0.3
    frontier_points: int = 2
    max_completion_length: int = 8
    eval_n: int = 16
    decodings: tuple[tuple[float, float], ...] = ((0.5, 0.9), (1.0, 1.0))
    eval_batch_size: int = 192

    def __post_init__(self):
        if not 1 <= self.n_test <= len(TEST_LOS):
            raise ValueError(f"n_test must be in 1..{len(TEST_LOS)}, got {self.n_test}")
        if self.placebo_ratio not in self.ratios or any(not r > 0 for r in self.ratios):
            raise ValueError(f"ratios must be > 0 and hold placebo_ratio, got {self.ratios} / {self.placebo_ratio}")
        if min(self.group_sizes) < 3 or self.seeds < 1 or self.rl_steps < 1 or self.frontier_points < 2:
            raise ValueError("group sizes >= 3, seeds >= 1, rl_steps >= 1 and frontier_points >= 2 are needed")


PROFILES = {
    "smoke": PrimesProfile(n_test=2, group_sizes=(3,), seeds=2, rl_steps=1, prompts_per_step=2, max_completion_length=4,
                           eval_n=2, decodings=((1.0, 1.0),), lora_r=2),
    "quick": PrimesProfile(n_test=6, rl_steps=2, eval_n=8),
    "full": PrimesProfile(seeds=5, rl_steps=30, frontier_points=4, eval_n=32),
}  # fmt: skip


def stage_rl(run: RunDir, prof: PrimesProfile, arm: str, ratio: float, placebo: bool, G: int, seed: int) -> Path:
    """One LoRA RL run from the start model; GRPO also saves its frontier adapters. Returns the final adapter."""
    rows = [{"prompt": PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi} for lo, hi in windows("train", prof.n_test)]
    return train_arm(run, f"{arm}_g{G}_s{seed}", rows, [primes_reward], AnswerOneHot(), prof=prof, G=G, seed=seed,
                     ratio=ratio, placebo=placebo, save_steps=saved_steps(prof) if arm == "grpo" else (),
                     meta={"arm": arm})  # fmt: skip


def evaluate(adapter: Path | None, prof: PrimesProfile) -> dict:
    """Per decoding: per-window valid counts and distinct valid primes, pass@k, distinct, width."""
    from setpo.metrics import pass_at_k

    model, tok = load_policy(adapter)
    tests = windows("test", prof.n_test)
    prompts = [PROMPT.format(lo=lo, hi=hi) for lo, hi in tests]
    ks = [k for k in (2**i for i in range(20)) if k <= prof.eval_n]
    out = {}
    for T, top_p in prof.decodings:
        samples = sample(model, tok, prompts, prof.eval_n, T, top_p, prof.max_completion_length, prof.eval_batch_size)
        answers = [[valid_answer(s, lo, hi) for s in row] for row, (lo, hi) in zip(samples, tests)]
        n_correct = [sum(a is not None for a in row) for row in answers]
        n_distinct = [len({a for a in row if a is not None}) for row in answers]
        out[f"T{T:g}_p{top_p:g}"] = {
            "n": prof.eval_n,
            "n_correct": n_correct,
            "n_distinct": n_distinct,
            "pass@k": {str(k): float(np.mean(pass_at_k(prof.eval_n, np.asarray(n_correct), k))) for k in ks},
            "distinct": float(np.mean(n_distinct)),
            "width": int(sum(d >= 2 for d in n_distinct)),
            "examples": [row[:4] for row in samples[:3]],
        }
    return out


def stage_eval(run: RunDir, prof: PrimesProfile, adapter: Path | None, name: str) -> dict:
    return cached_eval(run, name, lambda: evaluate(adapter, prof))


def stage_arms(run: RunDir, prof: PrimesProfile, desc: str = NAME) -> dict:
    """Every arm's runs (resumed where done) and evaluations, GRPO's checkpoints included: evals keyed
    (arm, G, seed, step), the start model under ("start", 0, -1, 0)."""
    evals = {("start", 0, -1, 0): stage_eval(run, prof, None, "start")}
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in arms(prof)]
    for G, seed, (arm, ratio, placebo) in tqdm(grid, desc=desc, unit="run"):
        final = stage_rl(run, prof, arm, ratio, placebo, G, seed)
        name = f"{arm}_g{G}_s{seed}"
        evals[(arm, G, seed, prof.rl_steps)] = stage_eval(run, prof, final, name)
        if arm == "grpo":
            for step in saved_steps(prof):
                ckpt = run.path / "adapters" / f"{name}_ckpt" / f"step{step}"
                evals[(arm, G, seed, step)] = stage_eval(run, prof, ckpt, f"{name}_step{step}")
    return evals


def _execute(args: argparse.Namespace, prof, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    evals = stage_arms(run, prof)

    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. "
        f"SmolLM2-135M-Instruct with LoRA r {prof.lora_r}; "
        f"{prof.seeds} seeds per arm, paired by seed; {prof.n_test} test windows x n={prof.eval_n}; RL "
        f"{prof.rl_steps} steps x {prof.prompts_per_step} prompts, lr {prof.rl_lr:g}."
    )
    files = analyse(run, prof, evals, "Does SetPO beat GRPO's frontier and a placebo? (SmolLM2-135M, primes)", setting)
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 2, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
