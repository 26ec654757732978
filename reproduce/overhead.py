"""Figure 9 analogue: the work SetPO adds to a GRPO step in TRL (embedding + credits), per embedder and policy.

    python -m reproduce overhead --profile quick|full|smollm2|tiny|smoke [--rounds N] [--steps N] [--device cpu|cuda]
        [--methods grpo setpo_policy ...] [--threads 1] [--out DIR] [--overwrite] [--publish]

Design (fixed before the measurements).

* Policies: tiny character-level Qwen2 models (``tiny-h<hidden>xL<layers>``, built from a seed) and
  SmolLM2-135M-Instruct (``smollm2-135m-instruct``, offline, LoRA r 16 on q/k/v/o as in ``smollm2_primes``).
  Prompts: Countdown (``make_prompt(q, "compact")``), reward ``trl_countdown_reward``, KL beta > 0 (the paper's
  presets use a KL term), so TRL runs a reference log-prob pass every step.
* Methods, every one a ``SetPOTrainer`` on the same start policy and prompts: ``grpo`` (lambda 0: TRL's GRPO step
  bit for bit), ``setpo_hashed`` (model-free n-gram embedder: the credit machinery alone), ``setpo_minilm``
  (22M-parameter MiniLM), ``setpo_policy`` (the policy's own hidden states, pooled from TRL's reference pass: no
  extra forward) and ``setpo_policy_extra`` (the same embedding from an extra no-grad forward: what the policy
  embedder costs where TRL runs no old / reference pass, e.g. ``beta=0, num_iterations=1``).
* Interleaving: each round runs every method for ``steps`` optimiser steps from the start policy, in the order
  A B C ... in even rounds and reversed in odd ones, all in one process, so a drift in machine load hits every
  method alike. The first step of every run carries one-off costs and is dropped.
* The figure of merit, per SetPO step i: share_i = added_i / (step_i - added_i), added_i = setpo/embed_time_s +
  setpo/credit_time_s (timed inside the trainer; for ``setpo_policy`` the pooling inside TRL's pass), step_i the
  wall-clock of the optimiser step. step_i - added_i is the GRPO step of the same rollouts, so the share needs no
  comparison across runs, which also carries load noise and different sampled lengths. Reported: the median
  share over steps with a 95% percentile bootstrap CI of the median (resampling steps), and the mean with
  ``reproduce.stats.bootstrap_ci``. The ratio of median step times to GRPO's is shown too, as the noisier reading.
  Steps of one run are not independent (same machine state), so the CIs are a lower bound on the uncertainty.
* Per step the CSV keeps the buckets: generation (``_generate_single_turn``), SetPO embedding and credits,
  the rest of scoring (rewards, old / reference log-probs), loss forward, backward, optimizer and the rest.
* Profiles: ``smoke`` (tests), ``quick`` (the main job; tiny policy, under 2 minutes on 2 cores), ``full``
  (two tiny policies and SmolLM2-135M at the paper's G = 6) and ``smollm2`` (full's SmolLM2 part alone, 2 rounds
  x 4 steps). ``--device cuda`` runs on a GPU (the step timers
  then synchronise the device; the trainer's embed / credit timers do not, so on a GPU they can miss queued work).

How to read CPU numbers: the paper's "< 10% wall-clock" is for 1.5B-32B policies generating up to 4096 tokens on
GPUs with a 0.6B embedder, where generation dominates; a text embedder's cost is fixed while the GRPO step grows
with the policy, so shares measured on small policies overstate what a large one sees.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce.common import (
    CPU_TRL_ARGS,
    PAPER_FIGURES,
    Parser,
    RunDir,
    add_run_options,
    check_publish,
    cli,
    count,
    default_out,
    publish,
    save_figure,
    write_json,
)
from reproduce.stats import bootstrap_ci
from reproduce.tasks.countdown_problems import generate_problems
from setpo.tasks.countdown import make_prompt, trl_countdown_reward

NAME = "overhead"
SMOLLM2 = "smollm2-135m-instruct"
BUCKETS = ("generation", "setpo_embed", "setpo_credit", "scoring_other", "loss_forward", "backward", "optimizer_other")
METHODS = {  # name -> (setpo_lambda, embedder, TRL passes the policy embedder may reuse)
    "grpo": (0.0, "hashed", ()),
    "setpo_hashed": (0.5, "hashed", ()),
    "setpo_minilm": (0.5, "minilm", ()),
    "setpo_policy": (0.5, "policy", ("old", "ref")),
    "setpo_policy_extra": (0.5, "policy", ()),
}
_TINY = re.compile(r"tiny-h(\d+)xL(\d+)")


def tiny_size(policy: str) -> tuple[int, int] | None:
    """(hidden_size, num_layers) of a ``tiny-h<hidden>xL<layers>`` policy name, None for SmolLM2."""
    if policy == SMOLLM2:
        return None
    m = _TINY.fullmatch(policy)
    if m is None or int(m[1]) < 4 or int(m[1]) % 4 or int(m[2]) < 1:
        raise ValueError(
            f"unknown policy {policy!r}: use {SMOLLM2!r} or 'tiny-h<hidden>xL<layers>' (hidden a multiple of 4)"
        )
    return int(m[1]), int(m[2])


@dataclass(frozen=True)
class PolicySize:
    """One policy and its batch: ``prompts_per_step`` prompts x G completions of up to ``max_completion_length``."""

    policy: str
    prompts_per_step: int = 8
    max_completion_length: int = 32

    def __post_init__(self):
        tiny_size(self.policy)
        if self.prompts_per_step < 1 or self.max_completion_length < 1:
            raise ValueError(f"{self.policy}: prompts_per_step and max_completion_length must be >= 1")


@dataclass(frozen=True)
class OverheadProfile:
    """Sizes of the timing runs (see the module docstring)."""

    policies: tuple[PolicySize, ...] = (PolicySize("tiny-h64xL2"),)
    methods: tuple[str, ...] = tuple(METHODS)
    group_size: int = 7
    steps: int = 5  # per method and round, the first dropped
    rounds: int = 3
    beta: float = 0.001
    lora_r: int = 16  # SmolLM2 only

    def __post_init__(self):
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or "grpo" not in self.methods or len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods must include 'grpo' once and come from {sorted(METHODS)}; unknown: {unknown}")
        if self.steps < 2 or self.rounds < 1 or self.group_size < 3:
            raise ValueError("need steps >= 2 (the first is dropped), rounds >= 1 and group_size >= 3")
        if not self.policies:
            raise ValueError("need at least one policy")


PROFILES = {
    "smoke": OverheadProfile(
        policies=(PolicySize("tiny-h16xL1", 2, 6),), methods=("grpo", "setpo_hashed"), group_size=3, steps=2,
        rounds=1,
    ),
    "quick": OverheadProfile(),
    "full": OverheadProfile(
        policies=(PolicySize("tiny-h64xL2", 16), PolicySize("tiny-h256xL4", 16), PolicySize(SMOLLM2, 4, 48)),
        group_size=6, steps=6, rounds=4,
    ),
    # the SmolLM2 part of "full" alone, with fewer steps: for when the whole full profile does not fit
    "smollm2": OverheadProfile(policies=(PolicySize(SMOLLM2, 4, 48),), group_size=6, steps=4, rounds=2),
    "tiny": OverheadProfile(
        policies=(PolicySize("tiny-h64xL2", 16), PolicySize("tiny-h256xL4", 16)), group_size=6, steps=6, rounds=4,
    ),
}  # fmt: skip


def median_ci(values: Sequence[float], level: float = 0.95, n_boot: int = 5000, seed: int = 0) -> tuple:
    """(median, lo, hi): the median of ``values`` and its percentile bootstrap CI (resampling the values)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"need a non-empty 1-d sequence of finite values, got shape {v.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    boot = np.median(v[np.random.default_rng(seed).integers(0, v.size, size=(n_boot, v.size))], axis=1)
    alpha = (1 - level) / 2
    return float(np.median(v)), float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_trainer_class(device: str = "cpu"):
    """SetPOTrainer with wall-clock timers around generation, scoring, loss forward and the whole training step."""
    from setpo.integrations.trl import SetPOTrainer

    class TimedSetPOTrainer(SetPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.timings: list[dict] = []
            self._t: dict[str, float] = {}

        def _timed(self, key: str, fn, *args, **kwargs):
            _sync(device)
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            _sync(device)
            self._t[key] = self._t.get(key, 0.0) + time.perf_counter() - t0
            return out

        def _generate_single_turn(self, *args, **kwargs):
            return self._timed("generation", super()._generate_single_turn, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            return self._timed("score_total", super()._generate_and_score_completions, inputs)

        def compute_loss(self, *args, **kwargs):
            return self._timed("loss_forward", super().compute_loss, *args, **kwargs)

        def training_step(self, *args, **kwargs):
            return self._timed("training_step", super().training_step, *args, **kwargs)

    return TimedSetPOTrainer


def _callback(trainer_ref: list, bar, device: str):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            _sync(device)
            trainer_ref[0]._t = {"start": time.perf_counter()}

        def on_step_end(self, args, state, control, **kwargs):
            _sync(device)
            tr = trainer_ref[0]
            t = dict(tr._t)
            t["step_total"] = time.perf_counter() - t.pop("start")
            tr.timings.append(t)
            bar.update(1)

    return StepTimer()


def load_start_policy(size: PolicySize, models: Path, lora_r: int = 16):
    """(model, tokenizer, peft_config or None) of the start policy: a saved tiny model, or SmolLM2 with LoRA."""
    tiny = tiny_size(size.policy)
    if tiny is None:
        from reproduce.tasks.smollm2 import lora_config
        from setpo.models import load_pretrained

        model, tok = load_pretrained(SMOLLM2)
        return model, tok, lora_config(lora_r)
    from setpo.tiny import build_tiny_model, load_tiny

    path = models / size.policy
    if not (path / "config.json").is_file():
        build_tiny_model(path, hidden_size=tiny[0], num_layers=tiny[1], num_heads=4, overwrite=True)
    model, tok = load_tiny(path)
    return model, tok, None


def time_method(
    prof: OverheadProfile, size: PolicySize, method: str, dataset, work: Path, bar, device: str = "cpu"
) -> list[dict]:
    """``prof.steps`` timed steps of one method from the start policy; per-step buckets in seconds (first dropped)."""
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig

    lam, embedder, sources = METHODS[method]
    model, tok, peft_config = load_start_policy(size, work / "models", prof.lora_r)
    model.train()
    args = SetPOConfig(
        output_dir=str(work / method),
        max_steps=prof.steps,
        per_device_train_batch_size=size.prompts_per_step * prof.group_size,
        num_generations=prof.group_size,
        max_completion_length=size.max_completion_length,
        learning_rate=1e-4,
        beta=prof.beta,
        loss_type="grpo",
        gradient_checkpointing=False,  # TRL's default recomputes activations: slower, same result
        setpo_lambda=lam,
        setpo_embedder=embedder,
        seed=0,
        **{**CPU_TRL_ARGS, "use_cpu": device == "cpu"},
    )
    ref: list = []
    trainer = timed_trainer_class(device)(
        model=model,
        reward_funcs=[trl_countdown_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=[_callback(ref, bar, device)],
        peft_config=peft_config,
    )
    trainer.setpo_policy_hidden_sources = sources
    ref.append(trainer)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    rows = []
    for i, (t, h) in enumerate(zip(trainer.timings, logs)):
        embed, credit = h.get("setpo/embed_time_s", 0.0), h.get("setpo/credit_time_s", 0.0)
        gen, added = t.get("generation", 0.0), embed + credit
        rows.append(
            {
                "step": i,
                "generation": gen,
                "setpo_embed": embed,
                "setpo_credit": credit,
                "scoring_other": t.get("score_total", 0.0) - gen - added,
                "loss_forward": t.get("loss_forward", 0.0),
                "backward": t.get("training_step", 0.0) - t.get("score_total", 0.0) - t.get("loss_forward", 0.0),
                "optimizer_other": t["step_total"] - t.get("training_step", 0.0),
                "step_total": t["step_total"],
                "grpo_part": t["step_total"] - added,
                "share": added / (t["step_total"] - added),
                "policy_forward_reused": h.get("setpo/policy_forward_reused"),
                "completion_length": h.get("completions/mean_length"),
            }
        )
    shutil.rmtree(work / method, ignore_errors=True)
    return rows[1:]  # the first step carries one-off costs


def summarise(rows: list[dict], methods: Sequence[str]) -> list[dict]:
    """Per policy and method: median step time [CI], its ratio to GRPO's, the share [CI], median buckets."""
    out = []
    for policy in dict.fromkeys(r["policy"] for r in rows):
        sel = {m: [r for r in rows if r["policy"] == policy and r["method"] == m] for m in methods}
        grpo_median = float(np.median([r["step_total"] for r in sel["grpo"]]))
        for m in methods:
            if not sel[m]:
                continue
            step, step_lo, step_hi = median_ci([r["step_total"] for r in sel[m]])
            shares = [r["share"] for r in sel[m]]
            share, share_lo, share_hi = median_ci(shares)
            mean, mean_lo, mean_hi = bootstrap_ci(shares)
            reused = [r["policy_forward_reused"] for r in sel[m] if r["policy_forward_reused"] is not None]
            out.append(
                {
                    "policy": policy,
                    "method": m,
                    "steps_timed": len(sel[m]),
                    "step_median_s": step,
                    "step_ci_s": [step_lo, step_hi],
                    "ratio_to_grpo": step / grpo_median,
                    "share_median": share,
                    "share_ci": [share_lo, share_hi],
                    "share_mean": mean,
                    "share_mean_ci": [mean_lo, mean_hi],
                    "policy_forward_reused": float(np.mean(reused)) if reused else None,
                    **{f"{b}_s": float(np.median([r[b] for r in sel[m]])) for b in BUCKETS},
                }
            )
    return out


def figure(run: RunDir, summary: list[dict], rows: list[dict]) -> Path:
    """Per policy: the share (top) and the step time (bottom), medians with 95% bootstrap CIs as error bars."""
    import matplotlib.pyplot as plt
    import pandas as pd

    policies = list(dict.fromkeys(s["policy"] for s in summary))
    fig, axes = plt.subplots(2, len(policies), figsize=(5.5 * len(policies), 7), squeeze=False)
    for col, policy in enumerate(policies):
        sel = [s for s in summary if s["policy"] == policy]
        setpo = [s for s in sel if s["method"] != "grpo"]
        ax = axes[0][col]
        med = [100 * s["share_median"] for s in setpo]
        err = [[100 * (s["share_median"] - s["share_ci"][0]) for s in setpo],
               [100 * (s["share_ci"][1] - s["share_median"]) for s in setpo]]  # fmt: skip
        ax.bar(range(len(setpo)), med, yerr=err, capsize=4, color="tab:orange")
        for i in range(len(setpo)):
            ax.text(i, med[i] + err[1][i], f"{med[i]:.1f}%", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(setpo)), [s["method"] for s in setpo], rotation=20, fontsize=8)
        ax.set_ylabel("(embed + credits) / GRPO part of the step, %")
        ax.set_title(f"{policy}: work SetPO adds")
        ax = axes[1][col]
        med = [s["step_median_s"] for s in sel]
        err = [
            [s["step_median_s"] - s["step_ci_s"][0] for s in sel],
            [s["step_ci_s"][1] - s["step_median_s"] for s in sel],
        ]
        ax.bar(range(len(sel)), med, yerr=err, capsize=4, color="tab:blue")
        ax.set_xticks(range(len(sel)), [s["method"] for s in sel], rotation=20, fontsize=8)
        ax.set_ylabel("seconds per optimiser step")
        ax.set_title(f"{policy}: step time")
    fig.suptitle("Medians over steps; error bars: 95% bootstrap CI of the median\n(paper Fig. 9: SetPO adds < 10%)")
    fig.tight_layout()
    path = save_figure(fig, run.path / "fig9_overhead", pd.DataFrame(rows))
    plt.close(fig)
    return path


def _describe(size: PolicySize, lora_r: int) -> str:
    tiny = tiny_size(size.policy)
    what = (
        f"tiny char-level Qwen2 h{tiny[0]} x {tiny[1]} layers" if tiny else f"SmolLM2-135M-Instruct + LoRA r {lora_r}"
    )
    return f"{size.policy} ({what}; {size.prompts_per_step} prompts, <= {size.max_completion_length} tokens)"


def table(run: RunDir, prof: OverheadProfile, summary: list[dict], device: str) -> Path:
    """overhead.md: the conditions and, per policy and method, the share and the step time with CIs."""
    where = (
        f"CUDA ({torch.cuda.get_device_name(0)})" if device == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    )
    lines = [
        "# The work SetPO adds to a GRPO step in TRL (paper Figure 9 analogue)",
        "",
        f"{where}; G = {prof.group_size}, KL beta {prof.beta:g}; {prof.rounds} interleaved round(s) x "
        f"{prof.steps - 1} timed steps per method. Policies: "
        + "; ".join(_describe(p, prof.lora_r) for p in prof.policies)
        + ".",
        "",
        "share = (embed + credits) / (step - embed - credits): the work SetPO adds over the GRPO part of the same "
        "step. Median over steps [95% bootstrap CI of the median]; mean [95% bootstrap CI]. 'step / GRPO' divides "
        "median step times of separate runs (noisier). `setpo_policy` pools the hidden states of TRL's reference "
        "pass (no extra forward); `setpo_policy_extra` runs its own forward (the cost where TRL runs no old or "
        "reference pass). Bucket columns are medians.",
        "",
        "| policy | method | steps | share: median [CI] | share: mean [CI] | median s/step [CI] | step / GRPO | "
        "generation | embed | credits | loss fwd | backward |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        share = "- | -"
        if s["method"] != "grpo":
            lo, hi = s["share_ci"]
            mlo, mhi = s["share_mean_ci"]
            share = f"{s['share_median']:.2%} [{lo:.2%}, {hi:.2%}] | {s['share_mean']:.2%} [{mlo:.2%}, {mhi:.2%}]"
        lines.append(
            f"| {s['policy']} | {s['method']} | {s['steps_timed']} | {share} | {s['step_median_s']:.3f} "
            f"[{s['step_ci_s'][0]:.3f}, {s['step_ci_s'][1]:.3f}] | {s['ratio_to_grpo']:.2f} | "
            + " | ".join(
                f"{s[f'{b}_s'] * 1000:.1f} ms" for b in BUCKETS if b not in ("scoring_other", "optimizer_other")
            )
            + " |"
        )
    md = run.write_text("overhead.md", "\n".join(lines) + "\n")
    return md


def build_parser() -> Parser:
    """The command-line options."""
    p = Parser(prog=f"python -m reproduce {NAME}", description=__doc__.splitlines()[0])
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    p.add_argument("--rounds", type=count, default=None, help="interleaved rounds (default: the profile's)")
    p.add_argument("--steps", type=count, default=None, help="steps per method and round, the first dropped")
    p.add_argument(
        "--methods", nargs="+", choices=tuple(METHODS), default=None,
        help="a subset of the profile's methods, 'grpo' included (default: all of the profile's)",
    )  # fmt: skip
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the trainers run")
    p.add_argument("--threads", type=count, default=1, help="torch CPU threads")
    add_run_options(p, NAME)
    return p


def _size(prof: OverheadProfile) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {"rounds": prof.rounds, "steps": prof.steps, "policies": len(prof.policies), "methods": len(prof.methods)}


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    args = build_parser().parse_args(argv)
    prof = PROFILES[args.profile]
    if args.rounds is not None:
        prof = replace(prof, rounds=args.rounds)
    if args.steps is not None:
        if args.steps < 2:
            raise ValueError(f"--steps must be >= 2 (the first step of every run is dropped), got {args.steps}")
        prof = replace(prof, steps=args.steps)
    if args.methods is not None:
        extra = sorted(set(args.methods) - set(prof.methods))
        if extra:
            raise ValueError(f"--methods: {extra} not in the {args.profile} profile's methods {list(prof.methods)}")
        prof = replace(prof, methods=tuple(args.methods))  # 'grpo' required, no repeats: checked by OverheadProfile
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    label = args.profile if args.device == "cpu" else f"{args.profile}_cuda"
    methods = "-".join(args.methods) if args.methods else None
    out = args.out or default_out(NAME, label, rounds=args.rounds, steps=args.steps, methods=methods)
    config = {"profile": args.profile, "threads": args.threads, "device": args.device, **asdict(prof)}
    RunDir.check(out, config, args.overwrite, command=f"reproduce {NAME}")
    if args.publish:
        check_publish(publish_dir(args.profile), args.profile, _size(prof), args.force_publish)
    return lambda: _execute(args, prof, out, config)


def publish_dir(profile: str) -> Path:
    """Where --publish puts a profile's figures: the SmolLM2-only and tiny-only profiles beside the others, each in
    a folder of its own (they measure a subset of the full profile's policies, so they neither replace nor are
    replaced by it)."""
    return PAPER_FIGURES / NAME / profile if profile in ("smollm2", "tiny") else PAPER_FIGURES / NAME


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, prof: OverheadProfile, out: Path, config: dict) -> int:
    run = RunDir(out, config, overwrite=args.overwrite, command=f"reproduce {NAME}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    from datasets import Dataset

    problems = generate_problems(64, seed=0)
    dataset = Dataset.from_list(
        [{"prompt": make_prompt(q, "compact"), "target": q.target, "nums": list(q.nums)} for q in problems]
    )
    rows: list[dict] = []
    total = len(prof.policies) * prof.rounds * len(prof.methods) * prof.steps
    with tqdm(total=total, desc=f"{NAME} ({args.profile})", unit="step", mininterval=2.0) as bar:
        for size in prof.policies:
            for r in range(prof.rounds):
                step = f"{size.policy}_round{r}"
                if run.done(step):
                    rows += run.load(step)
                    bar.update(len(prof.methods) * prof.steps)
                    continue
                order = prof.methods if r % 2 == 0 else prof.methods[::-1]
                got = []
                for m in order:
                    got += [
                        {"policy": size.policy, "round": r, "method": m, **x}
                        for x in time_method(prof, size, m, dataset, run.tree("trl"), bar, args.device)
                    ]
                rows += run.save(step, got)  # as a resumed run reads it: the same columns in every table
    shutil.rmtree(run.path / "trl", ignore_errors=True)

    summary = summarise(rows, prof.methods)
    write_json(run.path / "summary.json", summary)
    files = [figure(run, summary, rows), table(run, prof, summary, args.device), run.path / "summary.json"]
    wall = time.perf_counter() - t0
    write_json(run.path / "timing.json", {"wall_s_this_call": wall})
    run.close()
    print((run.path / "overhead.md").read_text())
    print(f"wall time {wall:.1f} s; results in {run.path}")
    if args.publish:
        dest = publish(files, publish_dir(args.profile), args.profile, _size(prof), args.force_publish)
        print(f"published to {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
