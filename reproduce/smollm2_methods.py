"""Diversity methods side by side on a real pretrained LM: SmolLM2-135M-Instruct naming primes, paired over seeds.

    python -m reproduce smollm2_methods --profile smoke|quick|full [--seeds N] [--baseline DIR] [--out DIR]
        [--overwrite] [--publish]

Design (fixed before the runs; the profile sets the sizes). The task, model, LoRA, RL budget, evaluation and GRPO
frontier are the SmolLM2 primes experiment's (`reproduce.smollm2_primes`, imported, not copied): name a prime in a
window, reward 1 when the first integer of the completion is a prime inside it; G = 6, 30 steps x 4 prompts, lr 2e-4,
LoRA r 16; 12 held-out windows x 32 samples at (T 0.5, top-p 0.9) and (T 1.0, top-p 1.0); 5 seeds.

Baseline arms: GRPO (with its checkpoints: the frontier), SetPO at ratio 0.3 and the placebo at ratio 0.3 are the
primes experiment's own runs of the same profile and seeds, read from its run folder (and run or resumed there
first when missing): ``--baseline DIR``, by default the primes folder beside this run's (``runs/smollm2_primes/
<profile>`` for ``runs/smollm2_methods/<profile>``, ``DIR/smollm2_primes`` for ``DIR/smollm2_methods`` as
``python -m reproduce quick --out DIR`` lays them out). Its config is checked before anything runs, a baseline
inside this run's folder (where ``--overwrite`` would delete it) is refused, and a digest of the baseline's records
is kept with this run: if the baseline changes later, the run refuses to mix them. The placebo is a control, not a
method: it is left out of the methods' Holm family and ranking.

Method arms (the methods comparison's, `reproduce.methods_comparison.ARMS`, same fields, same seeds and budget):
``dra_grpo`` (within-group, clamped), ``darling`` (classes = equal answers, the first integer; floor 0.1),
``diver`` (correct only, character BLEU), ``dqo``, ``passk`` (k = 4), ``entropy`` (TRL's entropy bonus),
``grpo_t1.3`` (sampling at T 1.3), and ``gapo``: here the valid set is known (V = the primes strictly inside the
window, a ``valid_answers`` column), so GAPO's frequency reward 1 - (f - 1/|V|) for valid answers, -1 otherwise,
replaces the task reward. Kernel of SetPO, DRA-GRPO and DQO: the primes experiment's one-hot embedding of the
answer. The coefficients with no default (DQO's alpha, DIVER's lam, the entropy coefficient) are set by the methods
comparison's calibration (`reproduce.comparison.calibrate`, rule in `methods_comparison`'s docstring), measured on this
model's start before any RL run and saved in ``term_sizes.json``: rollouts of G per training window at T 1.0
(``calibration_prompts`` windows spread over the training set, seed 0; the entropy bonus's gradient share over
a LoRA adapter initialised from seed 0).

Metrics, statistics and decision rule: the methods comparison's (frontier gap in pass@n per method and decoding,
paired by seed, 95% bootstrap CI, exact sign-flip p with Holm's adjustment over the methods of one decoding; pass@1,
pass@n and distinct valid primes minus GRPO's end; seconds per step), with the placebo as a control row: an arm with
a same-sized term and no diversity information, which shows what "any extra term" does to the frontier here.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from reproduce import comparison as mc
from reproduce import evidence
from reproduce.common import RunDir, RunPlan, seeds_option, write_json
from reproduce.evidence import cached_eval
from reproduce.tasks import primes
from reproduce.tasks import smollm2 as sp
from reproduce.tasks.smollm2 import load_policy, lora_config, sample, train_arm

NAME = "smollm2_methods"
COMMAND = "python -m reproduce smollm2_methods --profile {profile}"
ARMS = {**mc.ARMS, "gapo": mc.Arm("gapo", "gapo", {}, {}, answers=True)}
METHOD_ARMS = ("dra_grpo", "darling", "diver", "dqo", "passk", "entropy", "grpo_t1.3", "gapo")
REPORT = mc.Report(
    "SmolLM2-135M, primes",
    "The placebo (SetPO's credits permuted across groups) is a control, listed below the ranked methods.",
    "Caveats of scale: a 135M-parameter model with LoRA, short RL runs, one task; the hyperparameters are the papers' "
    "where the spec gives them, else matched to SetPO's term size on this model's start, not tuned per method. "
    "GRPO, SetPO and the placebo ran in the primes experiment's processes, at other times and under other load than "
    "the method arms: their step times are not comparable with the methods', so no ratio to GRPO is given "
    "(`python -m reproduce overhead` measures SetPO's added work against GRPO's step, interleaved in one process).",
)


@dataclass(frozen=True)
class MethodsPrimesProfile(sp.PrimesProfile):
    """The primes experiment's sizes, plus the method arms run here and the calibration size."""

    arms: tuple[str, ...] = METHOD_ARMS
    calibration_prompts: int = 64

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
    return MethodsPrimesProfile(**{**asdict(sp.PRIMES_PROFILES[name]), **changes})


PROFILES = {
    "smoke": _extend("smoke", arms=("darling", "dqo", "gapo"), calibration_prompts=16),
    "quick": _extend("quick", arms=("darling", "dqo", "passk", "entropy"), calibration_prompts=32),
    "full": _extend("full"),
}


def answer(text: str) -> str | None:
    """The answer (the first integer of the completion) as DARLING's class key and GAPO's answer, or None."""
    x = primes.first_integer(text)
    return None if x is None else str(x)


def valid_answers(lo: int, hi: int) -> list[str]:
    """GAPO's V for a window: the primes strictly between lo and hi, as answers."""
    return [str(x) for x in range(lo + 1, hi) if primes.is_prime(x)]


def baseline_out(out: Path) -> Path:
    """The primes run folder beside this run's (module docstring)."""
    out = Path(out)
    if out.parent.name == NAME:
        return out.parent.parent / sp.PRIMES_NAME / out.name
    if out.name == NAME:
        return out.parent / sp.PRIMES_NAME
    return out.parent / f"{out.name}-{sp.PRIMES_NAME}"


def baseline_plan(args: argparse.Namespace, prof: MethodsPrimesProfile, out: Path) -> tuple[Path, dict[str, Any]]:
    """(folder, config) of the baseline run, checked: same settings as a primes run would record, not inside ``out``."""
    from reproduce.common import RunExistsError

    path = Path(args.baseline) if args.baseline is not None else baseline_out(out)
    inside = path.resolve().is_relative_to(Path(out).resolve()) or Path(out).resolve().is_relative_to(path.resolve())
    if inside:
        raise RunExistsError(f"the baseline folder {path} and this run's folder {out} must not contain each other")
    config = {"profile": args.profile, **asdict(prof.baseline())}
    RunDir.check(path, config, extend=evidence.EXTEND)
    return path, config


def build_parser():
    """The evidence experiments' options plus --baseline."""
    p = evidence.build_parser(NAME, __doc__.strip().splitlines()[0], PROFILES, 2)
    p.add_argument("--baseline", type=Path, default=None, help="the smollm2_primes run folder of the baseline arms "
                   "(default: the primes folder beside this run's)")  # fmt: skip
    return p


def prepare(argv: list[str] | None = None):
    """Parse and check every option, the run folder and the baseline folder (writing nothing)."""
    args = build_parser().parse_args(argv)
    prof, plan = evidence.check_run(args, NAME, PROFILES)
    base = baseline_plan(args, prof, plan.out)
    return lambda: _execute(args, prof, plan, base)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


# --------------------------------------------------------------------------- stages


def baseline_digest(base: RunDir) -> dict[str, str]:
    """sha256 of every finished step record of the baseline run, by step: what this run's results rest on."""
    import hashlib

    return {f.stem: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted((base.path / "steps").glob("*.json"))}


def stage_baseline_record(run: RunDir, base: RunDir) -> dict:
    """The baseline's config and step digests, kept with this run on first use; later calls refuse a changed one.

    A baseline grown by more seeds since (`evidence.EXTEND`) is the same baseline: its config may differ in the seed
    count alone and steps may be added (their digests are then added to the record); every step kept must be
    unchanged."""
    from reproduce.common import RunExistsError, is_extension

    now = {"folder": str(base.path), "config": (base.path / "config.json").read_text(), "steps": baseline_digest(base)}
    if not run.done("baseline"):
        run.save("baseline", now)
    kept = run.load("baseline")
    changed = sorted(k for k in kept["steps"] if kept["steps"][k] != now["steps"].get(k))
    old_cfg, new_cfg = (json.loads(c)["config"] for c in (kept["config"], now["config"]))
    if (old_cfg != new_cfg and not is_extension(old_cfg, new_cfg, evidence.EXTEND)) or changed:
        raise RunExistsError(
            f"the baseline run {base.path} changed since this run first used it ({', '.join(changed[:4]) or 'config'}"
            "): pass --overwrite to redo this run's method arms against it"
        )
    added = {k: v for k, v in now["steps"].items() if k not in kept["steps"]}
    if added:  # the grown baseline's new steps are pinned too from now on (the kept ones stay as first recorded)
        kept = {**kept, "config": now["config"], "steps": {**kept["steps"], **added}}
        run.save("baseline", kept)
    return kept


def calibration_rows(prof: MethodsPrimesProfile) -> list[tuple[int, int]]:
    """`calibration_prompts` training windows spread evenly over the training set."""
    train = primes.windows("train", prof.n_test)
    n = min(prof.calibration_prompts, len(train))
    return [train[round(i * (len(train) - 1) / max(1, n - 1))] for i in range(n)]


def calibration_batch(prof: MethodsPrimesProfile, seed: int = 0):
    """The start model's rollouts (G per calibration window at T 1.0) as a ``GroupBatch``, and ``entropy_ratio(A)``
    over a LoRA adapter initialised from ``seed``."""
    from peft import get_peft_model

    from setpo.methods import GroupBatch

    G = prof.group_sizes[0]
    wins = calibration_rows(prof)
    prompts = [primes.PROMPT.format(lo=lo, hi=hi) for lo, hi in wins]
    model, tok = load_policy(None)
    samples = sample(model, tok, prompts, G, 1.0, 1.0, prof.max_completion_length, prof.eval_batch_size)
    texts = [s for row in samples for s in row]
    los, his = [lo for lo, _ in wins for _ in range(G)], [hi for _, hi in wins for _ in range(G)]
    rewards = torch.tensor(primes.primes_reward(texts, los, his), dtype=torch.float64)
    batch = GroupBatch.from_rows(
        rewards, G, texts=texts, answers=[answer(t) for t in texts], correct=rewards > mc.CORRECT_THRESHOLD,
        embeddings=torch.as_tensor(primes.AnswerOneHot()(texts), dtype=torch.float64),
        valid_sets=[valid_answers(lo, hi) for lo, hi in wins],
    )  # fmt: skip
    torch.manual_seed(seed)
    policy = get_peft_model(model, lora_config(prof.lora_r))
    return batch, lambda adv: mc.entropy_gradient_ratio(policy, tok, prompts, samples, adv)


def stage_calibration(run: RunDir, prof: MethodsPrimesProfile) -> dict:
    """`comparison.calibrate` on this model's start, saved once; ``term_sizes.json`` rewritten every call."""
    if not run.done("term_sizes"):
        batch, entropy = calibration_batch(prof)
        sizes = mc.calibrate(batch, prof.arms, entropy, ARMS)
        run.save("term_sizes", {"prompts": prof.calibration_prompts, "mean_reward": float(batch.rewards.mean()),
                                **sizes})  # fmt: skip
    sizes = run.load("term_sizes")
    write_json(run.path / "term_sizes.json", sizes)
    return sizes


def stage_rl(run: RunDir, prof: MethodsPrimesProfile, arm: mc.Arm, G: int, seed: int) -> Path:
    """One LoRA RL run of a method arm from the start model. Returns its adapter."""
    rows = [{"prompt": primes.PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi, "valid_answers": valid_answers(lo, hi)}
            for lo, hi in primes.windows("train", prof.n_test)]  # fmt: skip
    return train_arm(run, f"{arm.name}_g{G}_s{seed}", rows, [primes.primes_reward],
                     primes.AnswerOneHot() if arm.embedder else None, prof=prof, G=G, seed=seed, ratio=0.0,
                     placebo=False,
                     meta={"arm": arm.name}, method=arm.config_fields(),
                     answer_extractor=answer if arm.answers else None)  # fmt: skip


# --------------------------------------------------------------------------- entry point


def _execute(args: argparse.Namespace, prof: MethodsPrimesProfile, plan: RunPlan, baseline) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    sizes = stage_calibration(run, prof)  # before the baseline: a calibration that cannot be done fails first
    arms = mc.calibrated_arms(prof.arms, sizes, ARMS)
    base_prof = prof.baseline()
    base = RunDir(*baseline, extend=evidence.EXTEND)
    evals = sp.stage_arms(base, base_prof, f"{NAME}: baseline")
    base.close()
    record = stage_baseline_record(run, base)
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in arms]
    for G, seed, arm in tqdm(grid, desc=NAME, unit="run"):
        name = f"{arm.name}_g{G}_s{seed}"
        final = stage_rl(run, prof, arm, G, seed)
        evals[(arm.name, G, seed, prof.rl_steps)] = cached_eval(run, name, lambda f=final: sp.evaluate(f, prof))

    baseline_names = [a for a, _, _ in evidence.arms(base_prof)]
    controls = [a for a in baseline_names if a.startswith("placebo")]
    seeds = seeds_option(args)
    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}{seeds}`; GRPO, SetPO and the placebo are the runs of "
        f"`{sp.PRIMES_COMMAND.format(profile=args.profile)}{seeds}` in `{record['folder']}`. "
        f"SmolLM2-135M-Instruct with LoRA "
        f"r {prof.lora_r}; {prof.seeds} seeds per arm, paired by seed; {prof.n_test} test windows x n={prof.eval_n}; "
        f"RL {prof.rl_steps} steps x {prof.prompts_per_step} prompts x G, lr {prof.rl_lr:g}."
    )

    def load(step: str) -> dict:
        arm = step.removeprefix("rl_").rsplit("_g", 1)[0]
        return (base if arm in baseline_names else run).load(step)

    names = baseline_names + list(prof.arms)
    files = mc.analyse(run, prof, evals, sizes, setting, names, REPORT, load, controls, timed_with_grpo=())
    return plan.finish(run, t0, run.path / "summary.md", files)


if __name__ == "__main__":
    raise SystemExit(main())
