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

import torch

from reproduce import evidence
from reproduce.common import (
    RunPlan,
    seeds_option,
)
from reproduce.evidence import (
    analyse,
)
from reproduce.tasks.smollm2 import PRIMES_COMMAND, PRIMES_NAME, PRIMES_PROFILES, stage_arms

NAME = PRIMES_NAME
COMMAND = PRIMES_COMMAND
PROFILES = PRIMES_PROFILES  # tasks.smollm2: `smollm2_methods` extends these runs


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
