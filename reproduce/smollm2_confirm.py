"""Does SetPO help a real pretrained LM? A pre-registered confirmatory experiment: SmolLM2-135M-Instruct naming primes.

    python -m reproduce smollm2_confirm --profile full [--out DIR]     # the experiment (resumable, shows progress)
    python -m reproduce smollm2_confirm --profile pilot                # the pilot that chose the test windows and n

Pre-registration (written and committed before any run of the full profile; its results land in a later commit)

* Model, task and training: those of the published pilot, `smollm2_primes --profile full` (SmolLM2-135M-Instruct,
  LoRA r 16 on q, k, v, o; "Name a prime number between lo and hi." with train windows of widths 20 and 40 at every
  lo in 0..95; reward 1 for a prime strictly inside; 30 RL steps x 4 prompts, G = 6, lr 2e-4, beta 0, sampling at
  T 1.0 in training). One change: the shared-prefix path (`SharedPrefixSetPOTrainer` and shared-prefix sampling in
  the evaluation; `fast=True`), which samples from the same distribution with another random stream and makes an
  arm-seed about twice as cheap (`benchmarks/bench_smollm2.py`). The code path is frozen from the first seed.
* Arms, from the same start, same budget: GRPO; SetPO+GRPO with lambda set every step so that
  mean|lambda s| / mean|A_bar| = 0.3; the placebo at 0.3 (the same credits permuted across groups). Kernel: a
  one-hot of the answer (its first integer), as in the pilot.
* Seeds: 20 per arm, seeds 200..219, fixed here; disjoint from the pilot's seeds 0..4 (and the window pilot's
  5 and 6), which are not pooled.
* Evaluation: the test windows and n chosen by the window pilot below (`WINDOWS`, `EVAL_N`); every arm's end point
  and GRPO's checkpoints (steps 0 = the start, 10, 20, 30) at the paper's decoding, T 0.5 / top-p 0.9; GRPO's end
  point also at T 0.7, 1.0 and 1.2 (top-p 1.0).
* Metric: pass@k with k = n/2 (pass@1 with it; the full pass@k curve, k = 1..n/2, per arm in `passk_curve.csv`).
* GRPO's frontier, per seed: the most pass@(n/2) its points reach at pass@1 >= x, the points joined by straight
  lines (`reproduce.stats.frontier_at`): the start, GRPO's checkpoints and end at T 0.5, and GRPO's end at T 0.7,
  1.0 and 1.2: "less RL" and "sample hotter" are both GRPO's knobs.
* Hypotheses (`reproduce.confirm`), one family of two (Holm), decided by `reproduce.stats.decide` (exact two-sided
  sign-flip p, Holm-adjusted < 0.05, and both the Student-t 95% CI and the seeds x problems bootstrap interval above
  0; refuted in the opposite direction, or when both intervals end below the minimum useful effect 0.02):
  - H1 (primary): SetPO at T 0.5 / top-p 0.9 lies above GRPO's frontier in pass@(n/2);
  - H2: SetPO beats the placebo at matched pass@1 (SetPO's frontier gap minus the placebo's);
  - H3 (reported, not decided): SetPO's pass@1 minus GRPO's end point at T 0.5, absolute and relative, two-sided.
* Stopping rule: all 60 runs, then one analysis; no interim look (the analysis refuses fewer seeds).
* Power, from the 5 pilot seeds (`paper_figures/smollm2_primes`, T 0.5, pass@16 of 32, GRPO's end at T 1.0 added
  to its frontier as this design does): H1's gap -0.115 (SD 0.044; every seed below), H2's +0.151 (SD 0.173).
  With 20 seeds and a two-sided t-test at 0.025 (Holm's first step; noncentral t) power is 1.00 to see H1's pilot
  effect (in its direction, below 0) and 0.92 for H2 (0.83 with 16 seeds); at half the effect 0.99 and 0.47. So the
  expected outcome of H1 is "refuted": SetPO at T 0.5 loses to GRPO sampled hotter; it is reported as such.
* Controls that can show the effect absent: the placebo (H2); GRPO's own knobs in the frontier (H1).

The window pilot (`--profile pilot`, start and GRPO only, seeds 5 and 6, 32 samples per window at every frontier
point above) chooses the
test windows and n by a rule fixed before it ran: for each candidate set and n in (32, 64), the chance that a GRPO
frontier point sits at pass@(n/2) = 1 (each window's rate from the pilot's counts; a point is at 1 only when every
window is) summed over a seed's points; the candidate with the most windows whose chance is below 1% on every pilot
seed, then the smaller n. Candidates: the published 12 windows of width 30 (`w30`), and 21 windows of width 15 at
lo = 0, 6, ..., 120 (`w15`, neither width a train width; each shares 9 of 15 numbers with a neighbour, against 22 of
30 for the published ones). The pilot's files are `pilot.csv`, `pilot.md` and `pilot_per_problem.csv.gz` in
`paper_figures/smollm2_confirm/`. Its outcome, fixed before the first seed of the full profile: `w15` (21 windows)
with n = 32 (pass@16); every candidate's chance of a frontier at 1 was below 1e-100.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats as sps
from tqdm.auto import tqdm

from reproduce import confirm, evidence
from reproduce.common import RunDir, RunPlan, seeds_option
from reproduce.evidence import cached_eval, per_problem_frame, saved_steps
from reproduce.tasks.primes import PROMPT, TEST_LOS, AnswerOneHot, is_prime, primes_reward, train_rows, valid_answer
from reproduce.tasks.smollm2 import load_policy, sample, train_arm

NAME = "smollm2_confirm"
COMMAND = "python -m reproduce smollm2_confirm --profile {profile}"
PAPER = confirm.PAPER
#: the candidate test-window sets of the window pilot: (lo, hi) pairs
CANDIDATES = {
    "w30": tuple((lo, lo + 30) for lo in TEST_LOS),
    "w15": tuple((lo, lo + 15) for lo in range(0, 121, 6)),
}
ARMS = (("grpo", 0.0, False), ("setpo_r0.3", 0.3, False), ("placebo_r0.3", 0.3, True))


@dataclass(frozen=True)
class ConfirmProfile:
    """The pre-registered sizes (module docstring); seeds run first_seed .. first_seed + seeds - 1."""

    windows: str = "w15"
    n_windows: int = 21
    eval_n: int = 32
    seeds: int = 20
    first_seed: int = 200
    group_sizes: tuple[int, ...] = (6,)
    rl_steps: int = 30
    prompts_per_step: int = 4
    rl_lr: float = 2e-4
    lora_r: int = 16
    max_completion_length: int = 8
    frontier_points: int = 4
    sweep: tuple[tuple[float, float], ...] = ((0.7, 1.0), (1.0, 1.0), (1.2, 1.0))  # GRPO's end, besides T 0.5
    eval_batch_size: int = 192
    fast: bool = True
    pilot: bool = False  # start and GRPO only, every candidate window, every decoding; writes the pilot files

    def __post_init__(self):
        if self.windows not in (*CANDIDATES, "all") or not 1 <= self.n_windows:
            raise ValueError(f"windows must be one of {sorted(CANDIDATES)} or 'all', got {self.windows!r}")
        if self.seeds < 1 or self.rl_steps < 1 or self.frontier_points < 2 or self.eval_n < 2:
            raise ValueError("seeds >= 1, rl_steps >= 1, frontier_points >= 2 and eval_n >= 2 are needed")


PROFILES = {
    "smoke": ConfirmProfile(n_windows=2, eval_n=4, seeds=2, group_sizes=(3,), rl_steps=2, prompts_per_step=2,
                            lora_r=2, max_completion_length=4, frontier_points=2, sweep=((1.0, 1.0),)),
    "pilot": ConfirmProfile(windows="all", n_windows=99, eval_n=32, seeds=2, first_seed=5, pilot=True),
    "full": ConfirmProfile(windows="w15", eval_n=32),  # the window pilot's choice (pilot.md)
}  # fmt: skip


def test_windows(prof: ConfirmProfile) -> list[tuple[int, int]]:
    """The profile's test windows: a candidate set (its first n_windows), or the union of all for the pilot."""
    if prof.windows == "all":
        return sorted({w for ws in CANDIDATES.values() for w in ws})[: prof.n_windows]
    return list(CANDIDATES[prof.windows][: prof.n_windows])


def seeds_of(prof: ConfirmProfile) -> list[int]:
    return list(range(prof.first_seed, prof.first_seed + prof.seeds))


def design(prof: ConfirmProfile) -> confirm.Design:
    return confirm.Design(G=prof.group_sizes[0], rl_steps=prof.rl_steps, n=prof.eval_n, seeds=prof.seeds,
                          sweep=tuple(confirm.dec_name(T, p) for T, p in prof.sweep))  # fmt: skip


def evaluate(adapter: Path | None, prof: ConfirmProfile, decodings) -> dict:
    """Per decoding: per-window valid counts and distinct valid primes of ``eval_n`` samples."""
    model, tok = load_policy(adapter)
    tests = test_windows(prof)
    prompts = [PROMPT.format(lo=lo, hi=hi) for lo, hi in tests]
    out = {}
    for T, top_p in decodings:
        samples = sample(model, tok, prompts, prof.eval_n, T, top_p, prof.max_completion_length, prof.eval_batch_size,
                         fast=prof.fast)  # fmt: skip
        answers = [[valid_answer(s, lo, hi) for s in row] for row, (lo, hi) in zip(samples, tests)]
        out[confirm.dec_name(T, top_p)] = {
            "n": prof.eval_n,
            "n_correct": [sum(a is not None for a in row) for row in answers],
            "n_distinct": [len({a for a in row if a is not None}) for row in answers],
            "examples": [row[:4] for row in samples[:3]],
        }
    return out


def stage_eval(run: RunDir, prof: ConfirmProfile, adapter: Path | None, name: str, decodings) -> dict:
    return cached_eval(run, name, lambda: evaluate(adapter, prof, decodings))


def stage_arms(run: RunDir, prof: ConfirmProfile) -> dict:
    """Every arm's run and evaluations, keyed (arm, G, seed, step); the start under ("start", 0, -1, 0)."""
    paper, sweep = [(0.5, 0.9)], list(prof.sweep)
    evals = {("start", 0, -1, 0): stage_eval(run, prof, None, "start", paper)}
    G = prof.group_sizes[0]
    arms = ARMS[:1] if prof.pilot else ARMS
    for seed, (arm, ratio, placebo) in tqdm([(s, a) for s in seeds_of(prof) for a in arms], desc=NAME, unit="run"):
        name = f"{arm}_g{G}_s{seed}"
        grpo = arm == "grpo"
        final = train_arm(run, name, train_rows(), [primes_reward], AnswerOneHot() if ratio > 0 else None, prof=prof,
                          G=G, seed=seed, ratio=ratio, placebo=placebo, save_steps=saved_steps(prof) if grpo else (),
                          meta={"arm": arm})  # fmt: skip
        evals[(arm, G, seed, prof.rl_steps)] = stage_eval(run, prof, final, name, paper + sweep if grpo else paper)
        for step in saved_steps(prof) if grpo else ():
            ckpt = run.path / "adapters" / f"{name}_ckpt" / f"step{step}"
            evals[(arm, G, seed, step)] = stage_eval(run, prof, ckpt, f"{name}_step{step}", paper)
    return evals


def results_frame(per_problem):
    """One row per evaluated model and decoding: pass@1, pass@(n/2) and distinct, means over the test windows."""
    from setpo.metrics import pass_at_k

    rows = []
    for (arm, G, seed, step, dec), g in per_problem.groupby(["arm", "G", "seed", "step", "decoding"], sort=False):
        n, c = g.n.to_numpy(), g.n_correct.to_numpy()
        k = evidence.decision_k(int(n.max()))
        rows.append({"arm": arm, "G": G, "seed": seed, "step": step, "decoding": dec,
                     "pass@1": float(np.mean(pass_at_k(n, c, 1))), f"pass@{k}": float(np.mean(pass_at_k(n, c, k))),
                     "distinct": float(g.n_distinct.mean())})  # fmt: skip
    import pandas as pd

    return pd.DataFrame(rows)


# -- the window pilot ---------------------------------------------------------------------------------------------


def chance_at_one(c: np.ndarray, m: int, n: int) -> float:
    """P(pass@(n/2) of n samples = 1 in every window): each window needs >= n/2 + 1 valid samples, its rate taken
    as (c + 1/2) / (m + 1) from c valid of the pilot's m (windows independent)."""
    p = (np.asarray(c, dtype=np.float64) + 0.5) / (m + 1)
    return float(np.prod(sps.binom.sf(n - evidence.decision_k(n), n, p)))


def pilot_table(per_problem):
    """Per candidate window set, n and pilot seed: the summed chance that a GRPO frontier point sits at 1, and the
    largest pass@(n/2) of those points (the unbiased estimate from the pilot's m samples)."""
    import pandas as pd

    from setpo.metrics import pass_at_k

    wins = sorted({w for ws in CANDIDATES.values() for w in ws})
    rows = []
    for cand, ws in CANDIDATES.items():
        idx = [wins.index(w) for w in ws]
        for n in (32, 64):
            for seed in sorted(s for s in per_problem.seed.unique() if s >= 0):
                pts = per_problem[(per_problem.arm == "start") | (per_problem.seed == seed)]
                chance, top = 0.0, 0.0
                for _, g in pts.groupby(["arm", "step", "decoding"]):
                    c, m = g.sort_values("problem").n_correct.to_numpy()[idx], int(g.n.max())
                    chance += chance_at_one(c, m, n)
                    top = max(top, float(np.mean(pass_at_k(np.full(len(idx), m), c, n // 2))))
                rows.append({"windows": cand, "n_windows": len(ws), "n": n, "k": n // 2, "seed": seed,
                             "chance_at_1": chance, "frontier_max": top})  # fmt: skip
    return pd.DataFrame(rows)


def pilot_choice(table) -> tuple[str, int]:
    """The rule of the design: the candidate with most windows whose chance is < 1% on every seed, then the
    smaller n."""
    ok = table.groupby(["windows", "n_windows", "n"]).chance_at_1.max().reset_index()
    ok = ok[ok.chance_at_1 < 0.01].sort_values(["n_windows", "n"], ascending=[False, True])
    if ok.empty:
        raise ValueError("no candidate keeps the chance of a frontier at 1 below 1%: the design needs new candidates")
    return str(ok.iloc[0].windows), int(ok.iloc[0].n)


def _pilot_files(run: RunDir, per_problem) -> list[Path]:
    table = pilot_table(per_problem)
    run.write_csv("pilot.csv", table)
    cand, n = pilot_choice(table)
    primes = {c: [sum(is_prime(x) for x in range(lo + 1, hi)) for lo, hi in ws] for c, ws in CANDIDATES.items()}
    lines = [
        "# The window pilot of smollm2_confirm (start and GRPO only)",
        "",
        f"Command: `{COMMAND.format(profile='pilot')}`. Each row: a candidate test-window set, n samples, a pilot "
        "seed; the chance that some GRPO frontier point (start, checkpoints, end at T 0.5, end at T 0.7, 1.0, "
        "1.2) sits at pass@(n/2) = 1, summed over the points; the points' largest pass@(n/2) (unbiased "
        "estimate from the pilot's samples). Valid primes per window: "
        + "; ".join(f"{c}: {min(v)}-{max(v)}" for c, v in primes.items()),
        "",
        "| windows | windows (n) | n | k | seed | chance at 1 | largest pass@k |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r.windows} | {r.n_windows} | {r.n} | {r.k} | {r.seed} | {r.chance_at_1:.2e} | {r.frontier_max:.3f} |"
              for r in table.itertuples()]  # fmt: skip
    lines += [
        "",
        f"Rule (module docstring): the most windows with the chance below 1% on every seed, then the "
        f"smaller n. Chosen: **{cand}** ({len(CANDIDATES[cand])} windows), **n = {n}**, pass@{n // 2}.",
    ]
    return [run.write_csv("per_problem.csv.gz", per_problem, compression=evidence.GZIP), run.path / "pilot.csv",
            run.write_text("pilot.md", "\n".join(lines) + "\n")]  # fmt: skip


def _execute(args: argparse.Namespace, prof: ConfirmProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()
    evals = stage_arms(run, prof)
    per_problem = per_problem_frame(evals)
    if prof.pilot:
        files = _pilot_files(run, per_problem)
        return plan.finish(run, t0, run.path / "pilot.md", files)
    d = design(prof)
    run.write_csv("per_problem.csv.gz", per_problem, compression=evidence.GZIP)
    run.write_csv("results.csv", results_frame(per_problem))
    con = confirm.contrasts(per_problem, d)
    run.write_csv("contrasts.csv", con)
    run.write_csv("passk_curve.csv", confirm.passk_curve(per_problem, d))
    setting = (f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. Pre-registered design in the "
               f"module docstring; {prof.seeds} seeds per arm ({prof.first_seed}..{prof.first_seed + prof.seeds - 1}), "
               f"paired by seed; {len(test_windows(prof))} test windows ({prof.windows}) x n={prof.eval_n}; RL "
               f"{prof.rl_steps} steps x {prof.prompts_per_step} prompts, G {d.G}, LoRA r {prof.lora_r}.")  # fmt: skip
    title = f"SmolLM2-135M primes, G = {d.G}, {prof.seeds} seeds"
    files = [confirm.figure(run, per_problem, d, title),
             evidence.summary_table(run, con, "Does SetPO help SmolLM2-135M? (pre-registered)", setting),
             run.path / "per_problem.csv.gz", run.path / "results.csv", run.path / "contrasts.csv",
             run.path / "passk_curve.csv"]  # fmt: skip
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 2, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
