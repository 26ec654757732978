"""Does SetPO beat GRPO's frontier and a placebo? Countdown with a tiny LM, paired over seeds.

    python -m reproduce countdown_evidence --profile quick|full|replication [--seeds N] [--out DIR] [--overwrite]
        [--publish]

Design (fixed before the runs; the profile sets the sizes)
* Start: the shipped Countdown start (`reproduce.starts`, the default; ``start="train"`` trains one here with the
  same recipe): a tiny char-level LM (setpo.tiny) given a supervised warm-up on biased solutions (1000 steps: starts
  trained for 250-800 steps were too weak for GRPO to improve at any k in a one-seed calibration), from which
  GRPO raises pass@1; the regime check below says whether it also raises pass@k at large k.
* Data: 3 numbers in 1..9, targets <= 30; train problems with >= 2 solutions; held-out test problems with
  >= 3 distinct solutions modulo commutativity (so there is diversity to keep).
* Arms, all from the same start, same RL budget, same seeds (seed s: same data order, same sampling RNG):
  GRPO; SetPO+GRPO with lambda set every step so that mean|lambda s| / mean|A_bar| = r for r in `ratios`;
  a placebo at r = `placebo_ratio` (the same credits permuted across groups: same size, no diversity signal).
* Kernel: hashed character n-grams of the <answer> expression in canonical form modulo commutativity.
* G = 7 (main) and G = 3 (replication) in the full profile. The ``replication`` profile is the full profile's
  G = 7 arms at r = 0.3 (GRPO, SetPO, placebo) alone: for re-testing the main claims from a start trained
  elsewhere (the SFT start differs across CPUs; see the README), same decision rule.
* GRPO's frontier: GRPO checkpoints at `frontier_points` evenly spaced steps (step 0 = the start) are evaluated
  like every arm's end point; per seed they trace a (pass@1, pass@n) path.
* Evaluation: n samples per test problem at the paper's decoding (T 0.5, top-p 0.9) and at T 1.0 (Table 3).
* Metrics: pass@1, pass@k for k = 1, 2, 4, ..., n, mean number of distinct correct solutions per problem
  (modulo commutativity), diversity width (problems with >= 2 of them). Per-problem counts are saved.
* Statistics: per-seed paired differences, 95% percentile bootstrap CI over seeds, exact sign-flip p-value.
* Decision rule, per G and decoding, on pass@n (n = the largest k):
  - frontier gap = arm's pass@n minus GRPO's frontier at the arm's pass@1 on the same seed's GRPO path (the most
    pass@n the path, checkpoints joined by straight lines, reaches at pass@1 >= the arm's: `stats.frontier_at`; the
    first published analysis read the line at the arm's pass@1 itself, see the README's correction); "SetPO beats
    GRPO's frontier": confirmed if the gap's CI lies above 0, refuted if it lies at or below 0, inconclusive
    otherwise;
  - "SetPO beats the placebo": the same on SetPO(r) minus placebo(r) in pass@n, at r = placebo_ratio;
  - the pass@1 cost is reported as SetPO minus GRPO's end point, with its CI;
  - regime check: GRPO's end point minus the start in pass@n; if its CI is not above 0, the table says that
    RL did not help at large k here and the frontier comparison is read with that caveat.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce.common import (
    RunPlan,
    seeds_option,
)
from reproduce.evidence import (
    analyse,
    arms,
    saved_steps,
)
from reproduce.tasks.countdown import EvidenceProfile, stage_data, stage_eval, stage_rl, stage_start

NAME = "countdown_evidence"
COMMAND = "python -m reproduce countdown_evidence --profile {profile}"


PROFILES = {
    "smoke": EvidenceProfile(
        n_train=40, n_test=4, hidden_size=16, num_layers=1, num_heads=2, sft_per_problem=1, sft_steps=4,
        group_sizes=(3,), seeds=2, rl_steps=2, prompts_per_step=2, frontier_points=2, max_completion_length=8,
        eval_n=4, decodings=((1.0, 1.0),), ratios=(0.3,), start="train",
    ),
    "quick": EvidenceProfile(),
    "full": EvidenceProfile(
        n_test=128, sft_per_problem=8, group_sizes=(7, 3), seeds=10, rl_steps=60, prompts_per_step=16,
        frontier_points=5, eval_n=64,
    ),
}  # fmt: skip
PROFILES["replication"] = replace(PROFILES["full"], group_sizes=(7,), ratios=(0.3,))


# --------------------------------------------------------------------------- entry point


def _execute(args: argparse.Namespace, prof, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    train, test = stage_data(run, prof)
    sft = stage_start(run, prof, train)
    evals = {("start", 0, -1, 0): stage_eval(run, prof, sft, test, "start")}
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in arms(prof)]
    for G, seed, (arm, ratio, placebo) in tqdm(grid, desc=NAME, unit="run"):
        final = stage_rl(run, prof, sft, train, arm, ratio, placebo, G, seed)
        name = f"{arm}_g{G}_s{seed}"
        evals[(arm, G, seed, prof.rl_steps)] = stage_eval(run, prof, final, test, name)
        if arm == "grpo":
            for step in saved_steps(prof):
                ckpt = run.path / "models" / f"{name}_ckpt" / f"step{step}"
                evals[(arm, G, seed, step)] = stage_eval(run, prof, ckpt, test, f"{name}_step{step}")

    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. "
        f"{prof.seeds} seeds per arm, paired by seed; "
        f"{prof.n_test} test problems x n={prof.eval_n}; RL {prof.rl_steps} steps x {prof.prompts_per_step} prompts; "
        f"start: tiny char-level LM after {prof.sft_steps} SFT steps."
    )
    files = analyse(run, prof, evals, "Does SetPO beat GRPO's frontier and a placebo? (Countdown, tiny LM)", setting)
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 1, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
