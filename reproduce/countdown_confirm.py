"""Does SetPO help on Countdown? A pre-registered confirmatory experiment from the shipped start.

    python -m reproduce countdown_confirm --profile full --threads 1 [--out DIR]

Pre-registration (written and committed before any of its runs; the results land in a later commit)

* Start: the shipped Countdown SFT start (`reproduce.starts`, the default of `countdown_evidence`), the same data
  split as `countdown_evidence`'s full profile (1000 train problems, 128 held-out test problems with >= 3 distinct
  solutions modulo commutativity).
* Reward: TinyZero's `compute_score` rule (`setpo.tasks.countdown`, rule "tinyzero"): last line only, format score
  0.1. The pilot (below) scored with the lenient rule; the rule is the paper's, so it is the one confirmed here.
* Arms, G = 7, all from the start, same budget as the pilot (60 RL steps x 16 prompts, lr 3e-4, beta 0.001):
  GRPO; SetPO+GRPO with lambda set every step so that mean|lambda s| / mean|A_bar| = 0.3; the placebo at 0.3 (the
  same credits permuted across groups: the same size, no diversity signal). Kernel: hashed character n-grams of the
  answer in canonical form modulo commutativity (the pilot's).
* Seeds: 20 per arm, seeds 100..119, fixed here; disjoint from the pilot's seeds 0..9, which are not pooled.
* Evaluation: n = 64 samples per test problem. Every arm's end point and GRPO's checkpoints (steps 0 = the start,
  15, 30, 45, 60) at the paper's decoding, T 0.5 / top-p 0.9; GRPO's end point also at T 0.7, 1.0 and 1.2 (top-p
  1.0): sampling hotter is GRPO's other knob for pass@k.
* Metric: pass@32 of 64 samples (k = n/2). The pilot chooses it: on the 10 pilot seeds GRPO's frontier at pass@32
  at T 0.5 is at most 0.698 (the start's) and at T 1.0 at most 0.818 on every seed, far from the ceiling 1,
  so the chance of a frontier at 1 is below 1%; pass@64 would be one Bernoulli per problem. The full pass@k curve,
  k = 1..32, is reported per arm (`passk_curve.csv`).
* GRPO's frontier, per seed: the most pass@32 its points reach at pass@1 >= x, the points joined by straight lines
  (`reproduce.stats.frontier_at`): the start, GRPO's checkpoints and end at T 0.5, and GRPO's end at T 0.7, 1.0, 1.2.
* Hypotheses, one family of two (Holm), decided by the rule of `reproduce.stats.decide` (exact two-sided sign-flip p,
  Holm-adjusted < 0.05, and both the Student-t 95% CI and the seeds x problems bootstrap interval above 0; refuted
  in the opposite direction, or when both intervals end below the minimum useful effect 0.02 pass@32):
  - H1 (primary): SetPO at T 0.5 / top-p 0.9 lies above GRPO's frontier in pass@32;
  - H2: SetPO beats the placebo at matched pass@1: SetPO's frontier gap minus the placebo's.
  - H3 (reported, not decided): SetPO's pass@1 minus GRPO's end point at T 0.5, absolute and relative, two-sided,
    with its t-CI and exact p.
* Stopping rule: all 60 runs, then one analysis; no interim look. The analysis refuses to run on fewer seeds than
  the design's, so no verdict can be printed before the end.
* Power, from the pilot (`paper_figures/countdown_evidence`, G = 7, T 0.5, pass@32, 10 seeds; its frontier had no
  temperature sweep): H1's gap had mean +0.029 and SD 0.070 (d = 0.42), H2's matched contrast +0.064 and SD 0.086
  (d = 0.74). With 20 seeds and a two-sided t-test at 0.025 (Holm's first step; noncentral t), power is 0.31 for H1
  and 0.80 for H2 at the pilot's effect, and 0.09 / 0.24 at half of it (16 seeds: 0.24 / 0.68). H1 is the hard
  one: a refuted or inconclusive H1 is an expected outcome, and it is reported as such.
* Control that can show the effect is absent: the placebo (H2), and GRPO's own knobs (less RL, hotter sampling)
  in the frontier (H1).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, replace
from typing import ClassVar

import torch
from tqdm.auto import tqdm

from reproduce import confirm, evidence
from reproduce.common import RunPlan, seeds_option
from reproduce.evidence import per_problem_frame, saved_steps
from reproduce.tasks import countdown as ce

NAME = "countdown_confirm"
COMMAND = "python -m reproduce countdown_confirm --profile {profile}"
PAPER = confirm.PAPER


@dataclass(frozen=True)
class ConfirmProfile(ce.EvidenceProfile):
    """The pre-registered sizes (module docstring); seeds run first_seed .. first_seed + seeds - 1."""

    reward_rule: ClassVar[str] = "tinyzero"
    first_seed: int = 100
    sweep: tuple[tuple[float, float], ...] = ((0.7, 1.0), (1.0, 1.0), (1.2, 1.0))  # GRPO's end, besides T 0.5


PROFILES = {
    "smoke": ConfirmProfile(
        n_train=40, n_test=4, hidden_size=16, num_layers=1, num_heads=2, sft_per_problem=1, sft_steps=4,
        group_sizes=(3,), seeds=2, rl_steps=2, prompts_per_step=2, frontier_points=2, max_completion_length=8,
        eval_n=4, decodings=((0.5, 0.9),), ratios=(0.3,), start="train", sweep=((1.0, 1.0),),
    ),
    "full": ConfirmProfile(
        n_test=128, sft_per_problem=8, group_sizes=(7,), seeds=20, rl_steps=60, prompts_per_step=16,
        frontier_points=5, eval_n=64, decodings=((0.5, 0.9),), ratios=(0.3,),
    ),
}  # fmt: skip


def seeds_of(prof: ConfirmProfile) -> list[int]:
    return list(range(prof.first_seed, prof.first_seed + prof.seeds))


def design(prof: ConfirmProfile) -> confirm.Design:
    return confirm.Design(G=prof.group_sizes[0], rl_steps=prof.rl_steps, n=prof.eval_n, seeds=prof.seeds,
                          sweep=tuple(confirm.dec_name(T, p) for T, p in prof.sweep))  # fmt: skip


def _execute(args: argparse.Namespace, prof: ConfirmProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()
    train, test = ce.stage_data(run, prof)
    start = ce.stage_start(run, prof, train)
    evals = {("start", 0, -1, 0): ce.stage_eval(run, prof, start, test, "start")}
    sweep = replace(prof, decodings=prof.sweep)
    arms = [("grpo", 0.0, False), ("setpo_r0.3", 0.3, False), ("placebo_r0.3", 0.3, True)]
    G = prof.group_sizes[0]
    for seed, (arm, ratio, placebo) in tqdm([(s, a) for s in seeds_of(prof) for a in arms], desc=NAME, unit="run"):
        final = ce.stage_rl(run, prof, start, train, arm, ratio, placebo, G, seed)
        name = f"{arm}_g{G}_s{seed}"
        evals[(arm, G, seed, prof.rl_steps)] = ce.stage_eval(run, prof, final, test, name)
        if arm == "grpo":
            evals[(arm, G, seed, prof.rl_steps)] |= ce.stage_eval(run, sweep, final, test, f"{name}_sweep")
            for step in saved_steps(prof):
                ckpt = run.path / "models" / f"{name}_ckpt" / f"step{step}"
                evals[(arm, G, seed, step)] = ce.stage_eval(run, prof, ckpt, test, f"{name}_step{step}")
    per_problem = per_problem_frame(evals)
    run.write_csv("per_problem.csv.gz", per_problem, compression=evidence.GZIP)
    run.write_csv("results.csv", evidence.results_frame(prof, evals))
    d = design(prof)
    con = confirm.contrasts(per_problem, d)
    run.write_csv("contrasts.csv", con)
    run.write_csv("passk_curve.csv", confirm.passk_curve(per_problem, d))
    setting = (f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. Pre-registered design in the "
               f"module docstring; {prof.seeds} seeds per arm ({prof.first_seed}..{prof.first_seed + prof.seeds - 1}), "
               f"paired by seed; {prof.n_test} test problems x n={prof.eval_n}; TinyZero's reward rule; RL "
               f"{prof.rl_steps} steps x {prof.prompts_per_step} prompts; the shipped start.")  # fmt: skip
    files = [confirm.figure(run, per_problem, d, f"Countdown, G = {d.G}, {prof.seeds} seeds"),
             evidence.summary_table(run, con, "Does SetPO help on Countdown? (pre-registered)", setting),
             run.path / "per_problem.csv.gz", run.path / "results.csv", run.path / "contrasts.csv",
             run.path / "passk_curve.csv"]  # fmt: skip
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 1, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
