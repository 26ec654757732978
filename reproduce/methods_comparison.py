"""Diversity methods side by side: which lies above GRPO's frontier? Countdown with a tiny LM, paired over seeds.

    python -m reproduce methods_comparison --profile smoke|quick|full [--seeds N] [--out DIR] [--overwrite] [--publish]

Design (fixed before the runs; the profile sets the sizes). The task, start model, data, evaluation and GRPO
frontier are the Countdown evidence experiment's (`reproduce.tasks.countdown`, shared, not copied): a tiny
char-level LM after 1000 SFT steps, 3 numbers in 1..9, held-out test problems with >= 3 distinct solutions modulo
commutativity, n samples per test problem at (T 0.5, top-p 0.9) and (T 1.0, top-p 1.0).

Arms: all from the same start, same seeds (seed s: same data order, same sampling RNG), same RL budget (steps x
prompts x G, lr, beta, T 1.0 unless stated). Each arm is one ``SetPOConfig`` (``diversity_method=NAME``,
``diversity_method_kwargs``); the parameters and why:

* ``grpo``: plain GRPO (``setpo_lambda=0``); its checkpoints trace the frontier.
* ``setpo_r0.3``: SetPO with lambda set every step so that mean|lambda s| / mean|A_bar| = 0.3 (the evidence
  experiment's arm); kernel: hashed character n-grams of the <answer> in canonical form modulo commutativity.
* GAPO: not applicable. Its frequency reward replaces the task reward by 1 - (f - 1/L) over a known, small set V of
  valid answers with a uniform target (list selection); Countdown's reward is a verifier (0 / 0.1 format / 1) and
  its valid set is not given to the learner. GAPO runs on its own task in ``gapo_lists`` and ``smollm2_lists``.
* ``dra_grpo``: R_i / (1 + sum_{j != i} sim) within the group (the paper's form, ``scope="group"``), on the SetPO
  arm's embeddings. ``clamp=True`` (negative cosines read as 0): the hashed embedder is signed, so raw cosines can
  be negative and the paper's denominator could reach 0; its dense text embeddings give almost only positive ones.
  DRA-GRPO has no coefficient.
* ``darling``: classes = equality of the <answer> in canonical form modulo commutativity (the trainer's
  ``answer_extractor``), diversity floored at 0.1 (the public code's floor, in the spec); no coefficient.
* ``diver``: lam * 1[correct] * (1 - mean pairwise sentence-BLEU) added to the reward, correct rollouts only (the
  paper's default). ``tokenization="char"``: completions have no spaces, so word BLEU compares one-token strings.
  lam: calibrated (below), at most 1, which keeps the bonus at most the task reward; the bonus rides on the correct
  rollouts' reward and the group z-score removes all of it but its spread among correct rollouts, so it may fall
  short of SetPO's size (an earlier measurement on this start: 0.007 of GRPO's advantage at lam 1, 0.031 at 30).
* ``dqo``: alpha * (log det K - log det K_{-i}), K = L + I (the spec's form, ``ridge=1``), on the SetPO arm's
  embeddings, added to the reward. alpha: calibrated (the spec gives no default).
* ``passk``: the analytic pass@k advantage with k = 4 (given), replacing GRPO's.
* ``entropy``: TRL's ``entropy_coef`` via ``diversity_method="entropy_bonus"``. coef: calibrated (no default in
  the spec).
* ``grpo_t1.3``: GRPO sampling its rollouts at T 1.3 (the zero-code baseline; TRL also divides the logits of the
  loss by the temperature, so this is GRPO on the tempered policy, evaluated untempered like every arm).
Correct (passk's and DIVER's input) = reward > 0.5, i.e. the answer hits the target (0.1 is the format score).

Calibration ("comparable in size to SetPO at ratio 0.3"; `calibrate`, before any RL run, saved in
``term_sizes.json``), on the start model's rollouts: G per train prompt at T 1.0 with the training completion
length, the first ``calibration_prompts`` train prompts. A term's size is mean|A_method - A_grpo| / mean|A_grpo| over
the groups whose task rewards differ; in groups whose rewards are all equal a term added before the z-score becomes
the whole advantage at unit scale whatever its coefficient, which the file reports as ``equal_groups_moved``. The
target is SetPO's own size in that quotient on the same rollouts, lambda set as the trainer sets it (mean|lambda s|
/ mean|A_bar| = 0.3 over all rows, equal-reward groups included, so inside the unequal groups SetPO's term is
smaller than 0.3). DQO's alpha and DIVER's lam: the value on the grid 10^(k/4), k = -8..16 (capped at 1 for DIVER),
whose size is closest to the target in ratio; where none reaches it, the smallest within 90% of the largest size
(``reached_target: false``). The entropy bonus: ||grad(coef H)|| / ||grad(policy-gradient loss)||, both token
means, is linear in coef, so coef = target / (its value at coef 1), two significant figures. The methods without a
coefficient (DRA-GRPO, DARLING, pass@k) run as they come; their sizes are reported.

Metrics: pass@1, pass@k (k = 1, 2, ..., n), distinct correct solutions per problem (modulo commutativity), and
wall time per RL step (TRL's ``step_time``: generation, scoring, method, loss and update) per arm.
Statistics: per-seed paired differences, 95% percentile bootstrap CI over seeds, exact sign-flip p (and Holm's
adjustment over the methods of one decoding).
Decision rule, per decoding and method, on pass@n (n = the largest k): frontier gap = the method's pass@n minus
GRPO's frontier at the method's pass@1 on the same seed's GRPO path (start + checkpoints + end; the most pass@n the
path reaches at pass@1 >= the method's, `reproduce.stats.frontier_at`); "lies above GRPO's frontier" is confirmed if
the gap's CI lies above 0, refuted if at or below 0, inconclusive otherwise. Reported beside it, without a verdict:
pass@1, pass@n and distinct minus GRPO's end point (the cost and the raw gain), the median seconds per step (per
run, mean over seeds), the seconds the method's own code took per step, and the step-time ratio to GRPO only for
arms timed alongside GRPO in one uninterrupted process (`reproduce.comparison.comparison(timed_with_grpo=)`): a run
resumed across calls meets different machine load, so the published comparisons give the methods' own seconds and
no ratio (interleaved overhead: `python -m reproduce overhead`). Regime check: GRPO's end minus the
start in pass@n (when RL lowers pass@n, the start is on the frontier and "less RL" alone lies on it: the table says
so).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce.common import RunDir, RunPlan, seeds_option, write_json
from reproduce.comparison import (
    ARMS,
    CORRECT_THRESHOLD,
    COUNTDOWN,
    SETPO_RATIO,
    Arm,
    analyse,
    calibrate,
    calibrated_arms,
    entropy_gradient_ratio,
)
from reproduce.evidence import saved_steps
from reproduce.tasks import countdown
from reproduce.tasks.countdown import REWARD_RULE, EvidenceProfile, answer_embedder, stage_data, stage_eval
from setpo.tasks.countdown import (
    CountdownProblem,
    canonical,
    extract_answer,
    make_prompt,
    score_answer,
)

NAME = "methods_comparison"
COMMAND = "python -m reproduce methods_comparison --profile {profile}"


@dataclass(frozen=True)
class MethodsProfile(EvidenceProfile):
    """The evidence experiment's sizes plus the arms run (GRPO first: it is the frontier) and the calibration size."""

    ratios: tuple[float, ...] = (SETPO_RATIO,)
    placebo_ratio: float = SETPO_RATIO  # the evidence profile's check; this experiment runs no placebo
    arms: tuple[str, ...] = tuple(ARMS)
    calibration_prompts: int = 64

    def __post_init__(self):
        super().__post_init__()
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown:
            raise ValueError(f"unknown arm(s) {unknown}; arms are {list(ARMS)}")
        if not self.arms or self.arms[0] != "grpo" or len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms must start with 'grpo' (the frontier) and not repeat, got {self.arms}")
        if self.calibration_prompts < 1:
            raise ValueError(f"calibration_prompts must be >= 1, got {self.calibration_prompts}")


PROFILES = {
    "smoke": MethodsProfile(
        n_train=40, n_test=4, hidden_size=16, num_layers=1, num_heads=2, sft_per_problem=1, sft_steps=4,
        group_sizes=(3,), seeds=2, rl_steps=2, prompts_per_step=2, frontier_points=2, max_completion_length=8,
        eval_n=4, decodings=((1.0, 1.0),), arms=("grpo", "darling", "dra_grpo"), calibration_prompts=4, start="train",
    ),
    "quick": MethodsProfile(
        n_test=16, seeds=2, rl_steps=8, prompts_per_step=4, frontier_points=3, eval_n=16, decodings=((1.0, 1.0),),
        calibration_prompts=16,
    ),
    "full": MethodsProfile(
        n_test=128, sft_per_problem=8, group_sizes=(7,), seeds=10, rl_steps=60, prompts_per_step=16,
        frontier_points=5, eval_n=64,
    ),
}  # fmt: skip


def run_arms(prof: MethodsProfile) -> list[Arm]:
    """The profile's arms, GRPO first."""
    return [ARMS[a] for a in prof.arms]


def commutative_answer(completion: str, rule: str = REWARD_RULE) -> str | None:
    """The <answer> of a completion (as the reward `rule` reads it) in canonical form modulo commutativity (as
    written if it does not parse)."""
    answer = extract_answer(completion, rule)
    if not answer:
        return None
    try:
        return canonical(answer, "commutative")
    except ValueError:
        return answer


# --------------------------------------------------------------------------- stages


def stage_rl(run: RunDir, prof: MethodsProfile, sft: Path, train: list[CountdownProblem], arm: Arm, G: int,
             seed: int) -> Path:  # fmt: skip
    """One RL run of `arm` from the start model (`tasks.countdown.stage_rl` with the arm's fields)."""
    return countdown.stage_rl(run, prof, sft, train, arm.name, 0.0, False, G, seed, method=arm.config_fields(),
                                       embedder=arm.embedder,
                                       answer_extractor=commutative_answer if arm.answers else None)  # fmt: skip


def arm_config(prof: MethodsProfile, arm: Arm, G: int, seed: int, output_dir: Path) -> dict[str, Any]:
    """Every SetPOConfig field of one run of `arm` (as `stage_rl` builds it)."""
    return countdown.rl_config(prof, G, seed, output_dir, arm.config_fields())


def calibration_batch(model_path: Path, problems: Sequence[CountdownProblem], G: int, max_new_tokens: int,
                      seed: int = 0):  # fmt: skip
    """The start model's rollouts (G per Countdown problem at T 1.0, as in training) as a ``GroupBatch``, and
    ``entropy_ratio(A)``."""
    from setpo.eval.generate import HFGenerator, SamplingConfig
    from setpo.methods import GroupBatch
    from setpo.tiny import load_tiny

    model, tok = load_tiny(model_path)
    prompts = [make_prompt(p, "compact") for p in problems]
    cfg = SamplingConfig(n=G, temperature=1.0, top_p=1.0, max_new_tokens=max_new_tokens, batch_size=1024, seed=seed,
                         use_chat_template=False)  # fmt: skip
    samples = HFGenerator(model, tok, cfg, progress=False)(prompts)
    texts = [s for row in samples for s in row]
    rewards = torch.tensor([score_answer(s, p.nums, p.target, rule=REWARD_RULE)[0] for row, p in zip(samples, problems)
                            for s in row],
                           dtype=torch.float64)  # fmt: skip
    batch = GroupBatch.from_rows(
        rewards, G, texts=texts, answers=[commutative_answer(t) for t in texts], correct=rewards > CORRECT_THRESHOLD,
        embeddings=torch.as_tensor(np.asarray(answer_embedder(REWARD_RULE)(texts)), dtype=torch.float64),
    )  # fmt: skip
    return batch, lambda adv: entropy_gradient_ratio(model, tok, prompts, samples, adv)


def stage_calibration(run: RunDir, prof: MethodsProfile, sft: Path, train: list[CountdownProblem]) -> dict:
    """`calibrate` the profile's arms on the start model (G = the first group size), saved once; the file
    ``term_sizes.json`` is written from the saved step on every call."""
    if not run.done("term_sizes"):
        batch, entropy = calibration_batch(sft, train[: prof.calibration_prompts], prof.group_sizes[0],
                                           prof.max_completion_length)  # fmt: skip
        run.save("term_sizes", {"prompts": prof.calibration_prompts, **calibrate(batch, prof.arms, entropy)})
    sizes = run.load("term_sizes")
    write_json(run.path / "term_sizes.json", sizes)
    return sizes


# --------------------------------------------------------------------------- entry point


def _execute(args: argparse.Namespace, prof: MethodsProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    train, test = stage_data(run, prof)
    sft = countdown.stage_start(run, prof, train)
    sizes = stage_calibration(run, prof, sft, train)
    evals = {("start", 0, -1, 0): stage_eval(run, prof, sft, test, "start")}
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in calibrated_arms(prof.arms, sizes)]
    for G, seed, arm in tqdm(grid, desc=NAME, unit="run"):
        final = stage_rl(run, prof, sft, train, arm, G, seed)
        name = f"{arm.name}_g{G}_s{seed}"
        evals[(arm.name, G, seed, prof.rl_steps)] = stage_eval(run, prof, final, test, name)
        if arm.name == "grpo":
            for step in saved_steps(prof):
                ckpt = run.path / "models" / f"{name}_ckpt" / f"step{step}"
                evals[(arm.name, G, seed, step)] = stage_eval(run, prof, ckpt, test, f"{name}_step{step}")

    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}{seeds_option(args)}`. "
        f"{prof.seeds} seeds per arm, paired by seed; "
        f"{prof.n_test} test problems x n={prof.eval_n}; RL {prof.rl_steps} steps x {prof.prompts_per_step} prompts "
        f"x G; start: tiny char-level LM after {prof.sft_steps} SFT steps."
    )
    # Runs resume across calls under different load: no whole-step ratio to GRPO (see the docstring).
    files = analyse(run, prof, evals, sizes, setting, report=COUNTDOWN, timed_with_grpo=())
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 1, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
