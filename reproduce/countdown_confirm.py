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
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce import countdown_evidence as ce
from reproduce import evidence
from reproduce.common import RunDir, RunPlan, UsageError, save_figure, seeds_option
from reproduce.contrast import (
    ProblemTable,
    apply_rule,
    contrast_row,
    end_diff,
    frontier_gap,
    frontier_values,
    minus,
    per_seed_values,
)
from reproduce.evidence import per_problem_frame, saved_steps

NAME = "countdown_confirm"
COMMAND = "python -m reproduce countdown_confirm --profile {profile}"
PAPER = "T0.5_p0.9"
FAMILY, MIN_EFFECT = "H1-H2", 0.02


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


def dec_name(T: float, top_p: float) -> str:
    return f"T{T:g}_p{top_p:g}"


def seeds_of(prof: ConfirmProfile) -> list[int]:
    return list(range(prof.first_seed, prof.first_seed + prof.seeds))


def contrasts(per_problem, prof: ConfirmProfile):
    """H1, H2 (one Holm family), H3 and the descriptive contrasts, from the per-problem counts."""
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    P, G, n = table.n_problems, prof.group_sizes[0], prof.eval_n
    K = f"pass@{evidence.decision_k(n)}"
    seeds = table.seeds("grpo", G, prof.rl_steps, PAPER)
    if len(seeds) != prof.seeds:
        raise UsageError(f"the design fixes {prof.seeds} seeds; {len(seeds)} are done: no interim analysis")
    start = ("start", 0, -1, 0, PAPER)
    hot = [dec_name(T, p) for T, p in prof.sweep]
    paths = [p + [("grpo", G, s, prof.rl_steps, d) for d in hot]
             for p, s in zip(evidence.frontier_paths(table, G, PAPER, seeds, prof.rl_steps, start), seeds)]  # fmt: skip
    end = {a: [(a, G, s, prof.rl_steps, PAPER) for s in seeds] for a in ("grpo", "setpo_r0.3", "placebo_r0.3")}
    row = {"G": G, "decoding": PAPER}
    out = []
    for arm in ("setpo_r0.3", "placebo_r0.3"):
        for k in [evidence.decision_k(n)] + [k for k in evidence.report_ks(n) if k != evidence.decision_k(n)]:
            y = f"pass@{k}"
            front = frontier_values(table, paths, end[arm], "pass@1", y)
            h1 = arm == "setpo_r0.3" and y == K
            out.append(contrast_row(frontier_gap(table, paths, end[arm], "pass@1", y), P, arm=arm, base=front,
                                    ceiling=front, family=FAMILY if h1 else None, min_effect=MIN_EFFECT if h1 else None,
                                    claim=("H1: " if h1 else "") + f"{arm} lies above GRPO's frontier (checkpoints "
                                    "and temperature sweep)", metric=f"{y} gap", **row))  # fmt: skip
    matched = minus(frontier_gap(table, paths, end["setpo_r0.3"], "pass@1", K),
                    frontier_gap(table, paths, end["placebo_r0.3"], "pass@1", K))  # fmt: skip
    h2 = "H2: setpo_r0.3 beats placebo_r0.3 at matched pass@1"
    out.append(contrast_row(matched, P, family=FAMILY, min_effect=MIN_EFFECT, arm="setpo_r0.3",
                            metric=f"{K} gap minus placebo's", claim=h2, **row))  # fmt: skip
    for metric in dict.fromkeys(("pass@1", K, "distinct")):
        for arm in ("setpo_r0.3", "placebo_r0.3"):
            h3 = "H3: " if metric == "pass@1" and arm == "setpo_r0.3" else ""
            out.append(contrast_row(end_diff(table, end[arm], end["grpo"], metric), P, arm=arm, metric=metric,
                                    base=per_seed_values(table, end["grpo"], metric),
                                    claim=f"{h3}{arm} minus GRPO end point", **row))  # fmt: skip
        out.append(contrast_row(end_diff(table, end["setpo_r0.3"], end["placebo_r0.3"], metric), P, metric=metric,
                                base=per_seed_values(table, end["placebo_r0.3"], metric), arm="setpo_r0.3",
                                claim="setpo_r0.3 minus placebo_r0.3 (raw)", **row))  # fmt: skip
    for d in hot:
        hotter = [("grpo", G, s, prof.rl_steps, d) for s in seeds]
        out.append(contrast_row(end_diff(table, end["setpo_r0.3"], hotter, K), P, arm="setpo_r0.3", metric=K,
                                claim=f"setpo_r0.3 minus GRPO end point sampled at {d}", **row))  # fmt: skip
    return pd.DataFrame(apply_rule(out))


def passk_curve(per_problem, prof: ConfirmProfile):
    """pass@k for k = 1..n/2 of every arm's end point at the paper's decoding and of the start: per seed and mean."""
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    w = np.full((1, table.n_problems), 1.0 / table.n_problems)
    rows = []
    for key in table.columns:
        if key[4] == PAPER and (key[0] == "start" or key[3] == prof.rl_steps):
            for k in range(1, evidence.decision_k(prof.eval_n) + 1):
                rows.append({"arm": key[0], "seed": key[2], "k": k,
                             "pass@k": float(table.mean(w, key, f"pass@{k}")[0])})  # fmt: skip
    return pd.DataFrame(rows)


def figure(run: RunDir, prof: ConfirmProfile, per_problem) -> Path:
    """GRPO's frontier points (mean over seeds) with SetPO and the placebo on it, (pass@1, pass@n/2) at T 0.5."""
    import matplotlib.pyplot as plt
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    K = f"pass@{evidence.decision_k(prof.eval_n)}"
    w = np.full((1, table.n_problems), 1.0 / table.n_problems)
    pts = pd.DataFrame([{"arm": k[0], "seed": k[2], "step": k[3], "decoding": k[4],
                         "pass@1": float(table.mean(w, k, "pass@1")[0]), K: float(table.mean(w, k, K)[0])}
                        for k in table.columns])  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 4.5))
    path = pts[(pts.arm == "grpo") & (pts.decoding == PAPER)].groupby("step")[["pass@1", K]].mean()
    start = pts[pts.arm == "start"]
    ax.plot([start["pass@1"].iloc[0], *path["pass@1"]], [start[K].iloc[0], *path[K]], "-o", color="C0",
            label="GRPO: start and checkpoints, T 0.5")  # fmt: skip
    hot = pts[(pts.arm == "grpo") & (pts.decoding != PAPER)].groupby("decoding")[["pass@1", K]].mean()
    ax.plot(hot["pass@1"], hot[K], "s", color="C0", mfc="none", label="GRPO end, hotter sampling")
    for d, r in hot.iterrows():
        ax.annotate(d.split("_")[0], (r["pass@1"], r[K]), fontsize=7)
    for arm, c in (("setpo_r0.3", "C1"), ("placebo_r0.3", "C2")):
        e = pts[(pts.arm == arm) & (pts.decoding == PAPER)]
        ax.plot(e["pass@1"], e[K], ".", color=c, alpha=0.3)
        ax.plot(e["pass@1"].mean(), e[K].mean(), "D", color=c, ms=8, label=f"{arm} (seeds, mean)")
    ax.set_xlabel("pass@1")
    ax.set_ylabel(K)
    ax.set_title(f"Countdown, G = {prof.group_sizes[0]}, {prof.seeds} seeds", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = save_figure(fig, run.path / "frontier", pts)
    plt.close(fig)
    return out


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
    con = contrasts(per_problem, prof)
    run.write_csv("contrasts.csv", con)
    run.write_csv("passk_curve.csv", passk_curve(per_problem, prof))
    setting = (f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. Pre-registered design in the "
               f"module docstring; {prof.seeds} seeds per arm ({prof.first_seed}..{prof.first_seed + prof.seeds - 1}), "
               f"paired by seed; {prof.n_test} test problems x n={prof.eval_n}; TinyZero's reward rule; RL "
               f"{prof.rl_steps} steps x {prof.prompts_per_step} prompts; the shipped start.")  # fmt: skip
    files = [figure(run, prof, per_problem),
             evidence.summary_table(run, con, "Does SetPO help on Countdown? (pre-registered)", setting),
             run.path / "per_problem.csv.gz", run.path / "results.csv", run.path / "contrasts.csv",
             run.path / "passk_curve.csv"]  # fmt: skip
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 1, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
