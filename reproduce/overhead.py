"""Figure 9 analogue: wall-clock time per training step, GRPO vs SetPO+GRPO with each embedder, and where it goes.

    python -m reproduce overhead --profile quick [--rounds N] [--out DIR] [--overwrite] [--publish] [--threads 1]

Every configuration trains the same tiny policy on the same Countdown prompts through `SetPOTrainer`, in one
process, interleaved over rounds (A B C D, then D C B A, ...) so that a change in machine load hits all of
them alike. Per step it records: generation (`_generate_single_turn`), SetPO embedding and credits (the
trainer's own `setpo/embed_time_s`, `setpo/credit_time_s` metrics), the rest of scoring (rewards, old /
reference log-probs), the loss forward pass, the backward pass, and the optimizer step with everything else.
The first step of every trainer is a warm-up and is dropped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from reproduce.common import (
    CPU_TRL_ARGS,
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
from setpo.tasks.countdown import generate_problems, make_prompt, trl_countdown_reward

PAPER_FIGURES = Path(__file__).resolve().parent.parent / "paper_figures"
NAME = "overhead"
BUCKETS = ("generation", "setpo_embed", "setpo_credit", "scoring_other", "loss_forward", "backward", "optimizer_other")
METHODS = {  # name -> (setpo_lambda, embedder)
    "grpo": (0.0, "hashed"),
    "setpo_hashed": (0.5, "hashed"),
    "setpo_minilm": (0.5, "minilm"),
    "setpo_policy": (0.5, "policy"),
}


@dataclass(frozen=True)
class OverheadProfile:
    """Sizes of the timing runs. `policies` lists (hidden_size, num_layers) of the tiny policies measured."""

    policies: tuple[tuple[int, int], ...] = ((64, 2),)
    methods: tuple[str, ...] = tuple(METHODS)
    group_size: int = 7
    prompts_per_step: int = 8
    max_completion_length: int = 32
    steps: int = 4  # per trainer and round, the first dropped
    rounds: int = 3
    beta: float = 0.001

    def __post_init__(self):
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or "grpo" not in self.methods:
            raise ValueError(f"methods must include 'grpo' and come from {sorted(METHODS)}; unknown: {unknown}")
        if self.steps < 2 or self.rounds < 1 or self.group_size < 3:
            raise ValueError("need steps >= 2 (the first is dropped), rounds >= 1 and group_size >= 3")


PROFILES = {
    "smoke": OverheadProfile(
        policies=((16, 1),), methods=("grpo", "setpo_hashed"), group_size=3, prompts_per_step=2,
        max_completion_length=6, steps=2, rounds=1,
    ),
    "quick": OverheadProfile(),
    "full": OverheadProfile(policies=((64, 2), (256, 4)), steps=6, rounds=4, prompts_per_step=16),
}  # fmt: skip


def timed_trainer_class():
    """SetPOTrainer with wall-clock timers around generation, scoring, loss forward and the whole training step."""
    from setpo.integrations.trl import SetPOTrainer

    class TimedSetPOTrainer(SetPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.timings: list[dict] = []
            self._t: dict[str, float] = {}

        def _add(self, key: str, dt: float) -> None:
            self._t[key] = self._t.get(key, 0.0) + dt

        def _generate_single_turn(self, *args, **kwargs):
            t0 = time.perf_counter()
            out = super()._generate_single_turn(*args, **kwargs)
            self._add("generation", time.perf_counter() - t0)
            return out

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self._add("score_total", time.perf_counter() - t0)
            return out

        def compute_loss(self, *args, **kwargs):
            t0 = time.perf_counter()
            out = super().compute_loss(*args, **kwargs)
            self._add("loss_forward", time.perf_counter() - t0)
            return out

        def training_step(self, *args, **kwargs):
            t0 = time.perf_counter()
            out = super().training_step(*args, **kwargs)
            self._add("training_step", time.perf_counter() - t0)
            return out

    return TimedSetPOTrainer


def _callback(trainer_ref: list, bar):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            trainer_ref[0]._t = {"start": time.perf_counter()}

        def on_step_end(self, args, state, control, **kwargs):
            tr = trainer_ref[0]
            t = dict(tr._t)
            t["step_total"] = time.perf_counter() - t.pop("start")
            tr.timings.append(t)
            bar.update(1)

    return StepTimer()


def time_method(prof: OverheadProfile, model_dir: Path, method: str, dataset, work: Path, bar) -> list[dict]:
    """`prof.steps` timed steps of one configuration from the saved initial policy; per-step buckets (seconds)."""
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig
    from setpo.tiny import load_tiny

    lam, embedder = METHODS[method]
    model, tok = load_tiny(model_dir)
    model.train()
    args = SetPOConfig(
        output_dir=str(work / method),
        max_steps=prof.steps,
        per_device_train_batch_size=prof.prompts_per_step * prof.group_size,
        num_generations=prof.group_size,
        max_completion_length=prof.max_completion_length,
        learning_rate=1e-4,
        beta=prof.beta,
        loss_type="grpo",
        setpo_lambda=lam,
        setpo_embedder=embedder,
        seed=0,
        **CPU_TRL_ARGS,
    )
    ref: list = []
    trainer = timed_trainer_class()(
        model=model,
        reward_funcs=[trl_countdown_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=[_callback(ref, bar)],
    )
    ref.append(trainer)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    rows = []
    for i, (t, h) in enumerate(zip(trainer.timings, logs)):
        embed, credit = h.get("setpo/embed_time_s", 0.0), h.get("setpo/credit_time_s", 0.0)
        gen = t.get("generation", 0.0)
        rows.append(
            {
                "step": i,
                "generation": gen,
                "setpo_embed": embed,
                "setpo_credit": credit,
                "scoring_other": t.get("score_total", 0.0) - gen - embed - credit,
                "loss_forward": t.get("loss_forward", 0.0),
                "backward": t.get("training_step", 0.0) - t.get("score_total", 0.0) - t.get("loss_forward", 0.0),
                "optimizer_other": t["step_total"] - t.get("training_step", 0.0),
                "step_total": t["step_total"],
                "completion_length": h.get("completions/mean_length"),
            }
        )
    shutil.rmtree(work / method, ignore_errors=True)
    return rows[1:]  # the first step carries one-off costs


def summarise(rows: list[dict], methods: tuple[str, ...]) -> list[dict]:
    """Per policy and method: median step time, its ratio to GRPO's, and mean seconds per bucket."""
    out = []
    for policy in sorted({r["policy"] for r in rows}):
        med = {}
        for m in methods:
            sel = [r for r in rows if r["policy"] == policy and r["method"] == m]
            med[m] = statistics.median(r["step_total"] for r in sel)
            out.append(
                {
                    "policy": policy,
                    "method": m,
                    "steps_timed": len(sel),
                    "step_median_s": med[m],
                    **{f"{b}_s": statistics.fmean(r[b] for r in sel) for b in BUCKETS},
                }
            )
        for row in out:
            if row["policy"] == policy:
                row["ratio_to_grpo"] = row["step_median_s"] / med["grpo"]
                # The work SetPO adds (embedding + credits) relative to a GRPO step: less noisy than the ratio
                # of two step times, which also carries load fluctuations.
                row["setpo_work_over_grpo_step"] = (row["setpo_embed_s"] + row["setpo_credit_s"]) / med["grpo"]
    return out


def figure(run: RunDir, summary: list[dict], rows: list[dict]) -> Path:
    import matplotlib.pyplot as plt
    import pandas as pd

    policies = sorted({s["policy"] for s in summary})
    fig, axes = plt.subplots(1, len(policies), figsize=(6.5 * len(policies), 4), squeeze=False)
    for ax, policy in zip(axes[0], policies):
        sel = [s for s in summary if s["policy"] == policy]
        bottom = [0.0] * len(sel)
        for b in BUCKETS:
            vals = [s[f"{b}_s"] for s in sel]
            ax.bar([s["method"] for s in sel], vals, bottom=bottom, label=b)
            bottom = [x + v for x, v in zip(bottom, vals)]
        for i, s in enumerate(sel):
            ax.text(i, bottom[i], f"x{s['ratio_to_grpo']:.2f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"policy {policy}")
        ax.set_ylabel("seconds per step (mean of buckets)")
        ax.tick_params(axis="x", rotation=20)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.suptitle("Time per RL step; label = median step time / GRPO's (paper Fig. 9: SetPO adds < 10%)")
    fig.tight_layout()
    path = save_figure(fig, run.path / "fig9_overhead", pd.DataFrame(rows))
    plt.close(fig)
    return path


def table(run: RunDir, prof: OverheadProfile, summary: list[dict]) -> Path:
    lines = [
        "# SetPO overhead per training step (paper Figure 9 analogue)",
        "",
        f"Scale: tiny char-level Qwen2 policies {[f'h{h}xL{n}' for h, n in prof.policies]} on CPU "
        f"({torch.get_num_threads()} torch thread(s)), G={prof.group_size}, {prof.prompts_per_step} prompts per step, "
        f"completions up to {prof.max_completion_length} tokens, KL beta {prof.beta:g}; {prof.rounds} interleaved "
        f"round(s) x {prof.steps - 1} timed steps per method. The paper: Qwen2.5 1.5B-32B policies, "
        "Qwen3-Embedding-0.6B, veRL on GPUs; it reports SetPO adding less than 10% wall-clock time.",
        "",
        "Embedding cost is fixed by the embedder, while generation and backward grow with the policy, so the ratio "
        "here (a policy of ~0.1M parameters) overstates what a billion-parameter policy would see.",
        "",
        "'ratio to GRPO' divides median step times; '(embed + credits) / GRPO step' is the work SetPO adds, "
        "measured directly, over the median GRPO step (with the 'policy' embedder the extra forward pass is the "
        "embedding). Bucket columns are means per step.",
        "",
        "| policy | method | median s/step | ratio to GRPO | (embed + credits) / GRPO step | generation | embed | "
        "credits | other scoring | loss fwd | backward | optimizer+other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['policy']} | {s['method']} | {s['step_median_s']:.3f} | {s['ratio_to_grpo']:.2f} | "
            f"{s['setpo_work_over_grpo_step']:.1%} | "
            + " | ".join(f"{s[f'{b}_s'] * 1000:.1f} ms" for b in BUCKETS)
            + " |"
        )
    md = run.path / "overhead.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def build_parser() -> Parser:
    """The command-line options."""
    p = Parser(prog=f"python -m reproduce {NAME}", description=__doc__.splitlines()[0])
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    p.add_argument("--rounds", type=count, default=None, help="interleaved rounds (default: the profile's)")
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
    out = args.out or default_out(NAME, args.profile, rounds=args.rounds)
    config = {"profile": args.profile, "threads": args.threads, **asdict(prof)}
    RunDir.check(out, config, args.overwrite)
    if args.publish:
        check_publish(PAPER_FIGURES / NAME, args.profile, _size(prof), args.force_publish)
    return lambda: _execute(args, prof, out, config)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, prof: OverheadProfile, out: Path, config: dict) -> int:
    run = RunDir(out, config, overwrite=args.overwrite)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    from datasets import Dataset

    from setpo.tiny import build_tiny_model

    problems = generate_problems(64, seed=0)
    dataset = Dataset.from_list(
        [{"prompt": make_prompt(q, "compact"), "target": q.target, "nums": list(q.nums)} for q in problems]
    )
    rows: list[dict] = []
    total = len(prof.policies) * prof.rounds * len(prof.methods) * prof.steps
    with tqdm(total=total, desc=f"{NAME} ({args.profile})", unit="step", mininterval=2.0) as bar:
        for hidden, layers in prof.policies:
            policy = f"h{hidden}xL{layers}"
            model_dir = build_tiny_model(
                run.path / "models" / policy, hidden_size=hidden, num_layers=layers, num_heads=4, overwrite=True
            )
            for r in range(prof.rounds):
                step = f"{policy}_round{r}"
                if run.done(step):
                    rows += run.load(step)
                    bar.update(len(prof.methods) * prof.steps)
                    continue
                order = prof.methods if r % 2 == 0 else prof.methods[::-1]
                got = []
                for m in order:
                    got += [
                        {"policy": policy, "round": r, "method": m, **x}
                        for x in time_method(prof, model_dir, m, dataset, run.path / "trl", bar)
                    ]
                run.save(step, got)
                rows += got
            shutil.rmtree(model_dir, ignore_errors=True)

    summary = summarise(rows, prof.methods)
    write_json(run.path / "summary.json", summary)
    files = [figure(run, summary, rows), table(run, prof, summary), run.path / "summary.json"]
    wall = time.perf_counter() - t0
    write_json(run.path / "timing.json", {"wall_s_this_call": wall})
    run.close()
    print((run.path / "overhead.md").read_text())
    print(f"wall time {wall:.1f} s; results in {run.path}")
    if args.publish:
        dest = publish(files, PAPER_FIGURES / NAME, args.profile, _size(prof), args.force_publish)
        print(f"published to {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
