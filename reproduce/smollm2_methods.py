"""Diversity methods side by side on a real pretrained LM: SmolLM2-135M-Instruct naming primes, paired over seeds.

    python -m reproduce smollm2_methods --profile smoke|quick|full [--seeds N] [--out DIR] [--overwrite] [--publish]

Design (fixed before the runs; the profile sets the sizes). The task, model, LoRA, RL budget, evaluation and GRPO
frontier are the SmolLM2 primes experiment's (`reproduce.smollm2_primes`, imported, not copied): name a prime in a
window, reward 1 when the first integer of the completion is a prime inside it; G = 6, 30 steps x 4 prompts, lr 2e-4,
LoRA r 16; 12 held-out windows x 32 samples at (T 0.5, top-p 0.9) and (T 1.0, top-p 1.0); 5 seeds.

Baseline arms: GRPO (with its checkpoints: the frontier), SetPO at ratio 0.3 and the placebo at ratio 0.3 are the
primes experiment's own runs of the same profile and seeds, read from its run folder (and run or resumed there
first when missing): ``runs/smollm2_primes/<profile>``, or ``DIR/smollm2_primes`` when this run's folder is
``DIR/smollm2_methods`` (as ``python -m reproduce quick --out DIR`` lays them out). Its config is checked, so a
baseline of other settings is refused rather than mixed in.

Method arms (the methods comparison's, `reproduce.methods_comparison.ARMS`, same fields, same seeds and budget):
``dra_grpo`` (within-group, clamped), ``darling`` (classes = equal answers, the first integer; floor 0.1),
``diver`` (lam 1, correct only, character BLEU), ``dqo``, ``passk`` (k = 4), ``entropy`` (TRL's entropy bonus) and
``grpo_t1.3`` (sampling at T 1.3). Kernel of SetPO, DRA-GRPO and DQO: the primes experiment's one-hot embedding of
the answer. The two coefficients that have no default are set by a rule fixed here, measured on this model before
any RL run (`term_sizes.json`), so that each term is about SetPO's at ratio 0.3: DQO's alpha and the entropy
coefficient are the value on the grid 10^(k/4), k = -8..16, whose term size is closest to 0.3 (in ratio); where no
value reaches 0.3 (a reward term saturates under the group z-score), the smallest one within 90% of the largest size,
flagged ``reached_target: false``. The size is measured on the start model's rollouts (G per training window at
T 1.0, `calibration_prompts` windows spread over the training set): for DQO mean|A - A_grpo| / mean|A_grpo| over the
groups with unequal rewards, scanned over the grid; for the entropy bonus ||grad(coef H)|| / ||grad L_pg|| over the
LoRA parameters, measured once and linear in coef. DIVER keeps lam 1 (the group z-score removes most of any lam;
see the methods comparison); DRA-GRPO, DARLING and pass@k have no coefficient; their sizes are reported.

Metrics, statistics and decision rule: the methods comparison's (frontier gap in pass@n per method and decoding,
paired by seed, 95% bootstrap CI, exact sign-flip p with Holm's adjustment over the methods of one decoding; pass@1,
pass@n and distinct valid primes minus GRPO's end; seconds per step), with the placebo as one more row: an arm with a
same-sized term and no diversity information, which shows what "any extra term" does to the frontier here.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce import methods_comparison as mc
from reproduce import smollm2_primes as sp
from reproduce.common import RunDir, RunPlan, default_out, write_json
from reproduce.evidence import cached_eval
from reproduce.smollm2 import LORA_TARGETS, load_policy, sample, train_arm

NAME = "smollm2_methods"
COMMAND = "python -m reproduce smollm2_methods --profile {profile}"
METHOD_ARMS = ("dra_grpo", "darling", "diver", "dqo", "passk", "entropy", "grpo_t1.3")
CALIBRATED = {"dqo": "alpha", "entropy": "coef"}  # arm -> the coefficient set by the calibration rule
REPORT = mc.Report(
    "SmolLM2-135M, primes",
    "GAPO: not applicable (no given valid-answer set); it runs on its own task in `smollm2_lists`.",
    "Caveats of scale: a 135M-parameter model with LoRA, short RL runs, one task; the hyperparameters are the papers' "
    "where the spec gives them, else matched to SetPO's term size on this model's start, not tuned per method.",
)


@dataclass(frozen=True)
class MethodsPrimesProfile(sp.PrimesProfile):
    """The primes experiment's sizes, plus the method arms run here and the calibration size."""

    arms: tuple[str, ...] = METHOD_ARMS
    calibration_prompts: int = 32

    def __post_init__(self):
        super().__post_init__()
        unknown = [a for a in self.arms if a not in METHOD_ARMS]
        if unknown or not self.arms or len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms must be distinct names from {list(METHOD_ARMS)}, got {self.arms}")
        if self.calibration_prompts < 1:
            raise ValueError(f"calibration_prompts must be >= 1, got {self.calibration_prompts}")

    def baseline(self) -> sp.PrimesProfile:
        """The primes experiment's profile these sizes extend (its run holds the baseline arms)."""
        return sp.PrimesProfile(**{f.name: getattr(self, f.name) for f in fields(sp.PrimesProfile)})


def _extend(name: str, **changes: Any) -> MethodsPrimesProfile:
    return MethodsPrimesProfile(**{**asdict(sp.PROFILES[name]), **changes})


PROFILES = {
    "smoke": _extend("smoke", arms=("darling", "dqo"), calibration_prompts=16),
    "quick": _extend("quick", arms=("darling", "dqo", "passk", "entropy"), calibration_prompts=8),
    "full": _extend("full", calibration_prompts=64),
}


def answer(text: str) -> str | None:
    """DARLING's class key: the answer (the first integer of the completion), or None when there is none."""
    x = sp.first_integer(text)
    return None if x is None else str(x)


def baseline_out(out: Path, label: str, seeds: int | None) -> Path:
    """The primes experiment's run folder for the baseline arms (module docstring)."""
    out = Path(out)
    if out == default_out(NAME, label, seeds=seeds):
        return default_out(sp.NAME, label, seeds=seeds)
    return out.parent / sp.NAME if out.name == NAME else out / sp.NAME


def coefficient_grid() -> tuple[float, ...]:
    """The coefficients the calibration scans: 10^(k/4) for k = -8..16 (0.01 ... 10^4), two significant figures."""
    return tuple(float(f"{10 ** (k / 4):.2g}") for k in range(-8, 17))


def choose_coefficient(scan: list[tuple[float, float]], target: float = mc.SETPO_RATIO) -> tuple[float, bool]:
    """(coefficient, reached) from a scan of (coefficient, term size), coefficients ascending (module docstring).

    The coefficient whose size is closest to ``target`` in ratio; when no size reaches ``target`` (the term
    saturates: a reward term under the group z-score), the smallest one within 90% of the largest size.
    """
    good = [(c, r) for c, r in scan if r > 0 and math.isfinite(r)]
    if not good:
        raise ValueError("no coefficient gives a term of positive size on the calibration rollouts (no group with "
                         "unequal rewards?): raise calibration_prompts")  # fmt: skip
    top = max(r for _, r in good)
    if top < target:
        return next(c for c, r in good if r >= 0.9 * top), False
    return min(good, key=lambda cr: abs(math.log(cr[1] / target)))[0], True


# --------------------------------------------------------------------------- stages


def stage_baseline(base: RunDir, prof: sp.PrimesProfile) -> dict:
    """The baseline arms in the primes run folder (run or resumed there): evals keyed (arm, G, seed, step)."""
    evals = {("start", 0, -1, 0): sp.stage_eval(base, prof, None, "start")}
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in evidence.arms(prof)]
    for G, seed, (arm, ratio, placebo) in tqdm(grid, desc=f"{NAME}: baseline", unit="run"):
        name = f"{arm}_g{G}_s{seed}"
        final = sp.stage_rl(base, prof, arm, ratio, placebo, G, seed)
        evals[(arm, G, seed, prof.rl_steps)] = sp.stage_eval(base, prof, final, name)
        if arm == "grpo":
            for step in evidence.saved_steps(prof):
                ckpt = base.path / "adapters" / f"{name}_ckpt" / f"step{step}"
                evals[(arm, G, seed, step)] = sp.stage_eval(base, prof, ckpt, f"{name}_step{step}")
    return evals


def calibration_rows(prof: MethodsPrimesProfile) -> list[tuple[int, int]]:
    """`calibration_prompts` training windows spread evenly over the training set."""
    train = sp.windows("train", prof.n_test)
    n = min(prof.calibration_prompts, len(train))
    return [train[round(i * (len(train) - 1) / max(1, n - 1))] for i in range(n)] if n > 1 else train[:1]


def term_sizes(prof: MethodsPrimesProfile, seed: int = 0) -> dict[str, Any]:
    """Term sizes of the method arms at their given parameters, with DQO's alpha and the entropy coef at 1."""
    from peft import LoraConfig, get_peft_model

    from setpo.methods import GroupBatch

    G = prof.group_sizes[0]
    wins = calibration_rows(prof)
    prompts = [sp.PROMPT.format(lo=lo, hi=hi) for lo, hi in wins]
    model, tok = load_policy(None)
    samples = sample(model, tok, prompts, G, 1.0, 1.0, prof.max_completion_length, prof.eval_batch_size)
    texts = [s for row in samples for s in row]
    rewards = torch.tensor(sp.primes_reward(texts, [lo for lo, _ in wins for _ in range(G)],
                                            [hi for _, hi in wins for _ in range(G)]), dtype=torch.float64)  # fmt: skip
    batch = GroupBatch.from_rows(
        rewards, G, texts=texts, answers=[answer(t) for t in texts], correct=rewards > mc.CORRECT_THRESHOLD,
        embeddings=torch.as_tensor(sp.AnswerOneHot()(texts), dtype=torch.float64),
    )  # fmt: skip
    lora = LoraConfig(r=prof.lora_r, lora_alpha=2 * prof.lora_r, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules=LORA_TARGETS)  # fmt: skip
    policy = get_peft_model(model, lora)
    entropy = lambda adv: mc._entropy_gradient_ratio(policy, tok, prompts, samples, adv)  # noqa: E731, SLF001
    arms = [mc.ARMS[a] for a in prof.arms]
    sizes = mc.term_sizes_of(batch, arms, None, entropy)
    for name, key in CALIBRATED.items():
        if name not in prof.arms:
            continue
        grid = coefficient_grid()
        if name == "entropy":  # the gradient-norm ratio is linear in coef: one measurement at coef 1 gives the scan
            at_one = sizes[name]["ratio"] / mc.ARMS[name].kwargs[key]
            scan = [(c, c * at_one) for c in grid]
        else:
            scan = [(c, mc.term_sizes_of(batch, [mc.ARMS[name]], {name: {key: c}})[name]["ratio"]) for c in grid]
        coef, reached = choose_coefficient(scan)
        size = dict(scan)[coef]
        params = {**mc.ARMS[name].kwargs, key: coef}
        sizes[name] = {**sizes[name], "ratio": size, "params": params, "reached_target": reached, "scan": scan}
    return {"prompts": len(prompts), "mean_reward": float(rewards.mean()), **sizes}


def calibrated_arms(prof: MethodsPrimesProfile, sizes: dict[str, Any]) -> list[mc.Arm]:
    """The method arms, with the coefficients the calibration chose (``sizes[arm]["params"]``)."""
    out = []
    for name in prof.arms:
        arm = mc.ARMS[name]
        if name in CALIBRATED:
            arm = mc.Arm(arm.name, arm.method, dict(sizes[name]["params"]), arm.setpo, arm.temperature, arm.embedder,
                         arm.answers)  # fmt: skip
        out.append(arm)
    return out


def stage_term_sizes(run: RunDir, prof: MethodsPrimesProfile) -> dict:
    """`term_sizes` with the coefficients chosen from them, saved once (``term_sizes.json``)."""
    if not run.done("term_sizes"):
        sizes = term_sizes(prof)
        run.save("term_sizes", sizes)
        write_json(run.path / "term_sizes.json", sizes)
    return run.load("term_sizes")


def stage_rl(run: RunDir, prof: MethodsPrimesProfile, arm: mc.Arm, G: int, seed: int) -> Path:
    """One LoRA RL run of a method arm from the start model. Returns its adapter."""
    wins = sp.windows("train", prof.n_test)
    rows = [{"prompt": sp.PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi} for lo, hi in wins]
    return train_arm(run, f"{arm.name}_g{G}_s{seed}", rows, [sp.primes_reward],
                     sp.AnswerOneHot() if arm.embedder else None, prof=prof, G=G, seed=seed, ratio=0.0, placebo=False,
                     meta={"arm": arm.name}, method=arm.config_fields(),
                     answer_extractor=answer if arm.answers else None)  # fmt: skip


# --------------------------------------------------------------------------- entry point


def _execute(args: argparse.Namespace, prof: MethodsPrimesProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    base_prof = prof.baseline()
    base = RunDir(baseline_out(plan.out, plan.label, args.seeds), {"profile": plan.label, **asdict(base_prof)})
    evals = stage_baseline(base, base_prof)
    base.close()
    sizes = stage_term_sizes(run, prof)
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in calibrated_arms(prof, sizes)]
    for G, seed, arm in tqdm(grid, desc=NAME, unit="run"):
        name = f"{arm.name}_g{G}_s{seed}"
        final = stage_rl(run, prof, arm, G, seed)
        evals[(arm.name, G, seed, prof.rl_steps)] = cached_eval(run, name, lambda f=final: sp.evaluate(f, prof))

    names = [a for a, _, _ in evidence.arms(base_prof)] + list(prof.arms)
    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}` (GRPO, SetPO and the placebo: the runs of `"
        f"{sp.COMMAND.format(profile=args.profile)}`). SmolLM2-135M-Instruct with LoRA r {prof.lora_r}; "
        f"{prof.seeds} seeds per arm, paired by seed; {prof.n_test} test windows x n={prof.eval_n}; RL "
        f"{prof.rl_steps} steps x {prof.prompts_per_step} prompts x G, lr {prof.rl_lr:g}."
    )

    def load(step: str) -> dict:
        return run.load(step) if run.done(step) else base.load(step)

    files = mc.analyse(run, prof, evals, sizes, setting, names, REPORT, load)
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 2, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
