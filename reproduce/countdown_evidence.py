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
import itertools
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce.common import (
    RunDir,
    RunPlan,
    cpu_rl_args,
    seeds_option,
    write_json,
)
from reproduce.countdown import CountdownProfile, stage_sft
from reproduce.evidence import (
    analyse,
    arms,
    cached_eval,
    checkpoint_callback,
    saved_steps,
    setpo_args,
)
from setpo.tasks.countdown import (
    AnswerEmbedder,
    CountdownProblem,
    canonical,
    extract_answer,
    load_problems,
    make_prompt,
    reachable_targets,
    score_answer,
    solve,
    trl_reward_for,
)

NAME = "countdown_evidence"
#: Countdown reward rule (`setpo.tasks.countdown.reward`) of this experiment and `methods_comparison`: "lenient",
#: the rule their published results used (the last <answer> anywhere, exact arithmetic, 200-character cap), not
#: TinyZero's last-line rule.
REWARD_RULE = "lenient"
COMMAND = "python -m reproduce countdown_evidence --profile {profile}"


@dataclass(frozen=True)
class EvidenceProfile:
    """Sizes of one run of the experiment (the design is in the module docstring)."""

    #: A class constant, not a field, so that run folders written before it existed keep resuming and growing.
    reward_rule: ClassVar[str] = REWARD_RULE

    n_train: int = 1000
    n_test: int = 32
    min_test_solutions: int = 3  # distinct solutions modulo commutativity
    data_seed: int = 0
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    sft_per_problem: int = 4
    sft_steps: int = 1000
    group_sizes: tuple[int, ...] = (7,)
    seeds: int = 2
    rl_steps: int = 24
    prompts_per_step: int = 8
    rl_lr: float = 3e-4
    beta: float = 0.001
    ratios: tuple[float, ...] = (0.1, 0.3)
    placebo_ratio: float = 0.3
    frontier_points: int = 3  # GRPO checkpoints evaluated, evenly spaced over 0..rl_steps
    max_completion_length: int = 32
    eval_n: int = 16
    decodings: tuple[tuple[float, float], ...] = ((0.5, 0.9), (1.0, 1.0))  # (temperature, top_p)
    eval_batch_size: int = 1024
    #: "shipped": the Countdown start of `reproduce.starts` (the default); "train": one trained here with the SFT
    #: fields above (the start differs across CPUs, so results from a trained start are that start's)
    start: str = "shipped"

    def __post_init__(self):
        if self.start not in ("shipped", "train"):
            raise ValueError(f"start must be 'shipped' or 'train', got {self.start!r}")
        for name in ("n_train", "n_test", "sft_steps", "rl_steps", "prompts_per_step", "eval_n", "seeds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if any(G < 3 for G in self.group_sizes):
            raise ValueError(f"group sizes must be >= 3 for the SetPO credits, got {self.group_sizes}")
        if not self.ratios or any(not r > 0 for r in (*self.ratios, self.placebo_ratio)):
            raise ValueError(f"ratios must be > 0, got {self.ratios} and placebo {self.placebo_ratio}")
        if self.placebo_ratio not in self.ratios:
            raise ValueError(f"placebo_ratio {self.placebo_ratio} must be one of ratios {self.ratios} (it is compared)")
        if self.frontier_points < 2:
            raise ValueError(f"frontier_points must be >= 2 (the start and the end), got {self.frontier_points}")

    def sft_profile(self) -> CountdownProfile:
        """The Countdown reproduction's profile with this experiment's data and SFT sizes (its SFT stage is reused)."""
        return replace(
            CountdownProfile(),
            n_train=self.n_train,
            data_seed=self.data_seed,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            sft_per_problem=self.sft_per_problem,
            sft_steps=self.sft_steps,
        )


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


# --------------------------------------------------------------------------- stages


def problem_pool(max_number: int = 9, max_target: int = 30) -> list[CountdownProblem]:
    """Every problem with 3 numbers in 1..max_number and a target in 1..max_target that has >= 2 solutions."""
    pool = []
    for nums in itertools.combinations_with_replacement(range(1, max_number + 1), 3):
        for target, n_solutions in sorted(reachable_targets(nums, 1, max_target).items()):
            if n_solutions >= 2:
                pool.append(CountdownProblem(target, nums))
    return pool


def stage_data(run: RunDir, prof: EvidenceProfile) -> tuple[list[CountdownProblem], list[CountdownProblem]]:
    """Test problems with >= `min_test_solutions` solutions modulo commutativity drawn first, train problems from
    the rest (disjoint); the numbers of each problem in random order."""
    if not run.done("data"):
        rng = random.Random(prof.data_seed)
        pool = problem_pool()
        rng.shuffle(pool)
        rich = [p for p in pool if len({canonical(s, "commutative") for s in solve(p.nums, p.target)})
                >= prof.min_test_solutions]  # fmt: skip
        if len(rich) < prof.n_test or len(pool) - prof.n_test < prof.n_train:
            raise ValueError(f"the pool has {len(rich)} rich problems and {len(pool)} in all; asked for "
                             f"{prof.n_test} test and {prof.n_train} train problems")  # fmt: skip
        test = rich[: prof.n_test]
        keys = {p.key for p in test}
        train = [p for p in pool if p.key not in keys][: prof.n_train]
        for split, problems in (("train", train), ("test", test)):
            rows = [{"target": p.target, "nums": rng.sample(list(p.nums), 3)} for p in problems]
            write_json(run.path / f"{split}.json", rows)
        run.save("data", {"n_train": len(train), "n_test": len(test), "pool": len(pool), "rich": len(rich)})
    return load_problems(run.path / "train.json"), load_problems(run.path / "test.json")


def stage_start(run: RunDir, prof: EvidenceProfile, train: list[CountdownProblem]) -> Path:
    """The start model: the shipped Countdown start (checked against its checksum and the profile's data and model),
    or, with ``start="train"``, one trained here with the profile's SFT recipe."""
    if prof.start == "shipped":
        from reproduce.starts import countdown_start

        return countdown_start(prof)
    return stage_sft(run, prof.sft_profile(), train)


def stage_rl(run: RunDir, prof: EvidenceProfile, sft: Path, train, arm: str, ratio: float, placebo: bool, G: int,
             seed: int, *, method: dict[str, Any] | None = None, embedder: bool | None = None,
             answer_extractor: Callable[[str], Any] | None = None) -> Path:  # fmt: skip
    """One RL run from the start model; GRPO runs also save the frontier checkpoints. Returns the final model.

    ``method`` (an arm of the methods comparison: its SetPOConfig fields) replaces the SetPO fields of ``ratio``
    and ``placebo``; ``embedder`` (default: ratio > 0) gives the trainer the answer embedder (hashed n-grams of the
    answer modulo commutativity), ``answer_extractor`` its answers.
    """
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig, SetPOTrainer
    from setpo.tiny import load_tiny

    name = f"{arm}_g{G}_s{seed}"
    out = run.path / "models" / name
    if run.done(f"rl_{name}"):
        return out
    model, tok = load_tiny(sft)
    model.train()
    rows = [{"prompt": make_prompt(p, "compact"), "target": p.target, "nums": list(p.nums)} for p in train]
    fields = setpo_args(ratio, placebo) if method is None else method
    args = SetPOConfig(**rl_config(prof, G, seed, run.tree(f"trl/{name}"), fields))
    callbacks = []
    if arm == "grpo":
        callbacks.append(checkpoint_callback(set(saved_steps(prof)), run.tree(f"models/{name}_ckpt"), tok))
    t0 = time.perf_counter()
    trainer = SetPOTrainer(
        model=model,
        reward_funcs=[trl_reward_for(prof.reward_rule)],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=callbacks,
        embedder=answer_embedder(prof.reward_rule) if (ratio > 0 if embedder is None else embedder) else None,
        answer_extractor=answer_extractor,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    trainer.model.eval().save_pretrained(run.tree(out))
    tok.save_pretrained(out)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    # a method arm's fields say what it ran; ratio and placebo are the SetPO arms' settings
    arm_fields = {"ratio": ratio, "placebo": placebo} if method is None else {"fields": dict(method)}
    run.save(f"rl_{name}", {"arm": arm, **arm_fields, "G": G, "seed": seed, "wall_s": time.perf_counter() - t0,
                            "log": logs})  # fmt: skip
    return out


def rl_config(prof: EvidenceProfile, G: int, seed: int, output_dir: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """Every SetPOConfig field of one RL run: the shared budget (`cpu_rl_args`) and the arm's own ``fields``."""
    return cpu_rl_args(output_dir, prof.rl_steps, prof.prompts_per_step, G, prof.max_completion_length, prof.rl_lr,
                       seed, beta=prof.beta, setpo_embedder="hashed", **fields)  # fmt: skip


def answer_embedder(rule: str = REWARD_RULE):
    """The kernel's embedder: hashed character n-grams of the <answer> (as `rule` reads it) in canonical form
    modulo commutativity."""
    from setpo.integrations.trl import build_text_embedder

    return AnswerEmbedder(build_text_embedder("hashed"), level="commutative", rule=rule)


def evaluate(model_path: Path, test: list[CountdownProblem], prof: EvidenceProfile) -> dict:
    """Per decoding: per-problem correct counts and distinct correct solutions (mod commutativity), and pass@k."""
    from setpo.eval.generate import HFGenerator, SamplingConfig
    from setpo.metrics import pass_at_k
    from setpo.tiny import load_tiny

    model, tok = load_tiny(model_path)
    prompts = [make_prompt(p, "compact") for p in test]
    ks = [k for k in (2**i for i in range(20)) if k <= prof.eval_n]
    out = {}
    for T, top_p in prof.decodings:
        cfg = SamplingConfig(n=prof.eval_n, temperature=T, top_p=top_p, max_new_tokens=prof.max_completion_length,
                             batch_size=prof.eval_batch_size, seed=0, use_chat_template=False)  # fmt: skip
        samples = HFGenerator(model, tok, cfg, progress=False)(prompts)
        n_correct, n_distinct = [], []
        for row, p in zip(samples, test):
            right = [s for s in row if score_answer(s, p.nums, p.target, rule=prof.reward_rule)[1] == "correct"]
            n_correct.append(len(right))
            n_distinct.append(len({canonical(extract_answer(s, prof.reward_rule), "commutative") for s in right}))
        c = np.asarray(n_correct)
        out[f"T{T:g}_p{top_p:g}"] = {
            "n": prof.eval_n,
            "n_correct": n_correct,
            "n_distinct": n_distinct,
            "pass@k": {str(k): float(np.mean(pass_at_k(prof.eval_n, c, k))) for k in ks},
            "distinct": float(np.mean(n_distinct)),
            "width": int(sum(d >= 2 for d in n_distinct)),
        }
    return out


def stage_eval(run: RunDir, prof: EvidenceProfile, model_path: Path, test, name: str) -> dict:
    return cached_eval(run, name, lambda: evaluate(model_path, test, prof))


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
