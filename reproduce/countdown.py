"""Countdown at CPU scale: SetPO Figure 3 (pass@k, GRPO vs SetPO+GRPO) and Table 3 (diversity width / average mode).

    python -m reproduce countdown --profile quick [--seeds N] [--out DIR] [--overwrite] [--publish]
                                  [--config FILE] [--print-config] [--threads 1]
                                  [--benchmark-dir [DIR]]  (without DIR: $SETPO_BENCHMARK_DIR)

`--print-config` writes the chosen profile as YAML; edit it and pass it back with `--config FILE`.

Pipeline (each stage a resumable step of the run folder):
1. data: solvable problems from the generator (3 numbers, small targets) or a TinyZero-style file;
   train and test disjoint;
2. sft: a tiny char-level Qwen2 model (setpo.tiny) trained on solved problems whose solutions are drawn with
   a bias towards some forms (`setpo.tasks.countdown.sft_examples`): the base policy;
3. rl: GRPO (lambda = 0) and SetPO+GRPO through `SetPOTrainer`, for each G, KL beta and seed;
4. eval: n samples per held-out problem at each temperature -> unbiased pass@k (k = 1..n) and Table 3 metrics.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce.common import (
    PAPER_FIGURES,
    Parser,
    RunDir,
    RunPlan,
    chosen_config,
    cli,
    cpu_rl_args,
    experiment_parser,
    print_config,
    progress_callback,
    save_figure,
)
from setpo.tasks.countdown import (
    AnswerEmbedder,
    CountdownProblem,
    generate_problems,
    load_problems,
    make_prompt,
    score_answer,
    sft_examples,
    trl_reward_for,
)

NAME = "countdown"

# SetPO paper, Table 3 (Qwen2.5-3B, 1,024 Countdown test problems, temperature 1.0): (width, average mode).
PAPER_TABLE3 = {("setpo", 7): (415, 3.5), ("grpo", 7): (351, 2.3), ("setpo", 3): (403, 3.2), ("grpo", 3): (321, 2.1)}
PAPER_TEST_PROBLEMS = 1024


@dataclass(frozen=True)
class CountdownProfile:
    """Sizes of one reproduction. The paper's RL settings (Table 8) are lr 1e-6, KL 1e-3 / 5e-3, G in {3, 7},
    lambda 0.5, temperature 1.0, 128 prompts per step; the model here is a ~0.1M-parameter char-level LM."""

    #: Countdown reward rule (`setpo.tasks.countdown.reward`): "lenient", the rule the published results used (the
    #: last <answer> anywhere, exact arithmetic, 200-character cap), not TinyZero's last-line rule. A class
    #: constant, not a field, so that run folders written before it existed keep resuming and growing.
    reward_rule: ClassVar[str] = "lenient"

    # data (3 numbers in 1..9 and targets up to 30 give 1,429 distinct problems with >= 2 solutions)
    n_train: int = 1300
    n_test: int = 48
    n_numbers: int = 3
    max_number: int = 9
    max_target: int = 30
    min_solutions: int = 2
    train_file: str | None = None  # a TinyZero-style .jsonl/.parquet instead of generated problems
    test_file: str | None = None
    data_seed: int = 0
    # tiny model and supervised warm-up
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    sft_per_problem: int = 4
    sft_decay: float = 1.5  # Zipf exponent of the bias over solution forms
    sft_steps: int = 1000
    sft_batch_size: int = 32
    sft_lr: float = 5e-3
    # RL (TRL GRPO through SetPOTrainer)
    group_sizes: tuple[int, ...] = (7,)
    betas: tuple[float, ...] = (0.001,)
    seeds: int = 1
    rl_steps: int = 40
    prompts_per_step: int = 8
    rl_lr: float = 2e-4
    # SetPO weights run beside GRPO. The paper's Countdown lambda is 0.5; with this tiny model and kernel it makes
    # |lambda s| about 5% of |A_bar| (see the shaping ratio in the table), so the quick profile runs 5.
    lams: tuple[float, ...] = (5.0,)
    embedder: str = "hashed"
    embed_answer_only: bool = True  # embed the <answer> content, not the constant tags around it
    max_completion_length: int = 32
    # evaluation
    eval_n: int = 64
    eval_temperatures: tuple[float, ...] = (0.5, 1.0)
    eval_top_p: float = 1.0
    eval_batch_size: int = 1024
    eval_seed: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _check_field_type(f.name, str(f.type), getattr(self, f.name))
        for name in ("group_sizes", "betas", "lams"):
            values = [float(v) for v in getattr(self, name)]
            if not values or len(set(values)) != len(values):
                raise ValueError(f"{name} must be a non-empty list of distinct values, got {getattr(self, name)}")
        for name in ("n_train", "n_test", "sft_steps", "rl_steps", "prompts_per_step", "eval_n", "seeds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if any(G < 3 for G in self.group_sizes):
            raise ValueError(f"every group size must be >= 3 for the SetPO credits, got {self.group_sizes}")
        if any(b < 0 for b in self.betas) or any(not (lam > 0) for lam in self.lams):
            raise ValueError(f"betas must be >= 0 and lams > 0, got {self.betas}, {self.lams}")
        if not self.eval_temperatures or any(t <= 0 for t in self.eval_temperatures):
            raise ValueError(f"eval_temperatures must be positive, got {self.eval_temperatures}")


def _check_field_type(name: str, kind: str, value) -> None:
    """Refuse a profile value of the wrong type (YAML gives strings, scalars for lists, floats for counts)."""

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v) -> bool:
        return (is_int(v) or isinstance(v, float)) and math.isfinite(v)

    ok = {
        "int": is_int,
        "float": is_num,
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "str | None": lambda v: v is None or isinstance(v, str),
        "tuple[int, ...]": lambda v: isinstance(v, tuple) and all(map(is_int, v)),
        "tuple[float, ...]": lambda v: isinstance(v, tuple) and all(map(is_num, v)),
    }.get(kind)
    if ok is not None and not ok(value):
        want = {"tuple[int, ...]": "a list of whole numbers", "tuple[float, ...]": "a list of numbers"}.get(kind, kind)
        raise ValueError(f"{name} must be {want}, got {value!r}")


PROFILES = {
    "smoke": CountdownProfile(
        n_train=40, n_test=4, hidden_size=16, num_layers=1, num_heads=2, sft_per_problem=1, sft_steps=4,
        sft_batch_size=8, group_sizes=(3,), rl_steps=1, prompts_per_step=2, eval_n=4, eval_temperatures=(1.0,),
        max_completion_length=8, min_solutions=1,
    ),
    "quick": CountdownProfile(),
    "full": CountdownProfile(
        n_train=1100, n_test=256, sft_per_problem=8, sft_steps=3000, group_sizes=(3, 7), betas=(0.001, 0.005),
        seeds=3, rl_steps=100, prompts_per_step=16, lams=(0.5, 5.0),
    ),
}  # fmt: skip


SFT_CHECKPOINT_EVERY = 50  # SFT steps between checkpoints (an interrupted SFT resumes from the last one)


def num_label(x: float) -> str:
    """Short text of a number for run names: `{x:g}` when that reads back as `x`, else the exact repr."""
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


def methods(prof: CountdownProfile) -> list[tuple[str, float]]:
    """(label, lambda) of the compared methods: GRPO (lambda = 0) and SetPO+GRPO at each lambda."""
    return [("grpo", 0.0)] + [(f"setpo_l{num_label(lam)}", lam) for lam in prof.lams]


def method_label(method: str) -> str:
    """Display name of a method label."""
    if method == "sft":
        return "SFT base (before RL)"
    return "GRPO" if method == "grpo" else f"SetPO+GRPO (λ={method.removeprefix('setpo_l')})"


def run_names(prof: CountdownProfile) -> list[tuple[str, str, float, int, float, int]]:
    """(name, method, lambda, G, beta, seed) of every RL run of the grid."""
    return [
        (f"{m}_g{G}_b{num_label(b)}_s{s}", m, lam, G, b, s)
        for G in prof.group_sizes
        for b in prof.betas
        for s in range(prof.seeds)
        for m, lam in methods(prof)
    ]


# --------------------------------------------------------------------------- stages


def _write_problems(path: Path, problems: list[CountdownProblem]) -> None:
    path.write_text("".join(json.dumps({"target": p.target, "nums": list(p.nums)}) + "\n" for p in problems))


def stage_data(run: RunDir, prof: CountdownProfile) -> tuple[list[CountdownProblem], list[CountdownProblem]]:
    """Train and test problems (disjoint), written to the run folder."""
    if not run.done("data"):
        if prof.train_file:
            train = load_problems(prof.train_file, limit=prof.n_train, n_numbers=prof.n_numbers)
        else:
            train = generate_problems(
                prof.n_train, prof.n_numbers, prof.max_number, 1, prof.max_target, prof.min_solutions, prof.data_seed
            )
        keys = {p.key for p in train}
        if prof.test_file:
            test = [p for p in load_problems(prof.test_file, n_numbers=prof.n_numbers) if p.key not in keys]
            test = test[: prof.n_test]
        else:
            test = generate_problems(
                prof.n_test,
                prof.n_numbers,
                prof.max_number,
                1,
                prof.max_target,
                prof.min_solutions,
                prof.data_seed + 1,
                exclude=keys,
            )
        _write_problems(run.claim("train.jsonl"), train)
        _write_problems(run.claim("test.jsonl"), test)
        run.save("data", {"n_train": len(train), "n_test": len(test)})
    return load_problems(run.path / "train.jsonl"), load_problems(run.path / "test.jsonl")


def _sft_batches(examples: list[dict], tok, batch_size: int, rng: random.Random):
    """Endless (input_ids, attention_mask, labels) batches; loss on the completion and the EOS token only."""
    encoded = []
    for ex in examples:
        p = tok(ex["prompt"], add_special_tokens=False)["input_ids"]
        c = tok(ex["completion"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        encoded.append((p + c, [-100] * len(p) + c))
    while True:
        rows = rng.sample(encoded, min(batch_size, len(encoded)))
        L = max(len(ids) for ids, _ in rows)
        ids = torch.full((len(rows), L), tok.pad_token_id)
        labels = torch.full((len(rows), L), -100)
        mask = torch.zeros((len(rows), L), dtype=torch.long)
        for i, (a, b) in enumerate(rows):
            ids[i, : len(a)], labels[i, : len(b)], mask[i, : len(a)] = torch.tensor(a), torch.tensor(b), 1
        yield ids, mask, labels


def stage_sft(run: RunDir, prof: CountdownProfile, train: list[CountdownProblem]) -> Path:
    """Build the tiny model and train it on biased solutions; returns the saved model folder.

    Every `SFT_CHECKPOINT_EVERY` steps the model, optimiser, schedule, data-sampler and torch RNG states are
    saved to models/sft_checkpoint.pt, so an interrupted SFT resumes there and ends with the same weights.
    """
    from setpo.tiny import build_tiny_model, load_tiny

    out = run.path / "models" / "sft"
    if run.done("sft"):
        return out
    t0 = time.perf_counter()
    ckpt_file = run.claim("models/sft_checkpoint.pt")
    run.claim(ckpt_file.with_suffix(".tmp"))
    init = build_tiny_model(
        run.tree("models/init"),
        hidden_size=prof.hidden_size,
        num_layers=prof.num_layers,
        num_heads=prof.num_heads,
        max_position_embeddings=128,
        seed=prof.data_seed,
        overwrite=True,
    )
    model, tok = load_tiny(init)
    examples = sft_examples(train, prof.sft_per_problem, prof.sft_decay, "compact", spaces=False, seed=prof.data_seed)
    torch.manual_seed(prof.data_seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=prof.sft_lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=prof.sft_lr, total_steps=prof.sft_steps, pct_start=0.1)
    rng = random.Random(prof.data_seed)
    losses: list[float] = []
    start = 0
    if ckpt_file.is_file():
        ckpt = torch.load(ckpt_file, weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        rng.setstate(ckpt["sampler"])
        torch.set_rng_state(ckpt["torch_rng"])
        losses, start = ckpt["losses"], ckpt["step"]
        print(f"[countdown] sft: resuming from step {start} of {prof.sft_steps} ({ckpt_file})", flush=True)
    batches = _sft_batches(examples, tok, prof.sft_batch_size, rng)
    with tqdm(total=prof.sft_steps, initial=start, desc="countdown sft", unit="step", mininterval=2.0) as bar:
        for step in range(start, prof.sft_steps):
            ids, mask, labels = next(batches)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", refresh=False)
            if (step + 1) % SFT_CHECKPOINT_EVERY == 0 and step + 1 < prof.sft_steps:
                state = {
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(),
                    "sampler": rng.getstate(),
                    "torch_rng": torch.get_rng_state(),
                    "losses": losses,
                    "step": step + 1,
                }
                torch.save(state, ckpt_file.with_suffix(".tmp"))
                os.replace(ckpt_file.with_suffix(".tmp"), ckpt_file)
    model.eval().save_pretrained(run.tree(out))
    tok.save_pretrained(out)
    shutil.rmtree(init)
    n_params = sum(p.numel() for p in model.parameters())
    run.save(
        "sft",
        {"loss": losses, "examples": len(examples), "params": n_params, "wall_s": time.perf_counter() - t0},
    )
    ckpt_file.unlink(missing_ok=True)
    return out


def stage_rl(
    run: RunDir,
    prof: CountdownProfile,
    sft: Path,
    train: list[CountdownProblem],
    name: str,
    lam: float,
    G: int,
    beta: float,
    seed: int,
) -> Path:
    """One RL run from the SFT model through SetPOTrainer; returns the saved model folder."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig, SetPOTrainer, build_text_embedder
    from setpo.tiny import load_tiny

    out = run.path / "models" / name
    step = f"rl_{name}"
    if run.done(step):
        return out
    model, tok = load_tiny(sft)
    model.train()
    rows = [{"prompt": make_prompt(p, "compact"), "target": p.target, "nums": list(p.nums)} for p in train]
    args = SetPOConfig(
        **cpu_rl_args(
            run.tree(f"trl/{name}"),
            prof.rl_steps,
            prof.prompts_per_step,
            G,
            prof.max_completion_length,
            prof.rl_lr,
            seed,
            beta=beta,
            epsilon=0.2,
            loss_type="grpo",
            scale_rewards="group",
            setpo_lambda=lam,
            setpo_embedder=prof.embedder,
        )
    )
    t0 = time.perf_counter()
    with tqdm(total=prof.rl_steps, desc=f"countdown rl {name}", unit="step", mininterval=2.0) as bar:
        embedder = None
        if lam > 0 and prof.embed_answer_only:
            embedder = AnswerEmbedder(build_text_embedder(prof.embedder), rule=prof.reward_rule)
        trainer = SetPOTrainer(
            model=model,
            reward_funcs=[trl_reward_for(prof.reward_rule)],
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            callbacks=[progress_callback(bar)],
            embedder=embedder,
        )
        trainer.remove_callback(PrinterCallback)  # logs go to the run folder, not the console
        trainer.train()
    wall = time.perf_counter() - t0
    trainer.model.eval().save_pretrained(run.tree(out))
    tok.save_pretrained(out)
    shutil.rmtree(run.path / "trl" / name, ignore_errors=True)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    run.save(step, {"lam": lam, "G": G, "beta": beta, "seed": seed, "wall_s": wall, "log": logs})
    return out


def evaluate_model(
    model_path: Path, test: list[CountdownProblem], prof: CountdownProfile, desc: str | None = None
) -> tuple[dict, dict]:
    """Samples at every evaluation temperature -> (metrics, samples): pass@k for k = 1..n and Table 3 metrics.

    With `desc`, progress bars show the temperatures done and the sampling batches of the current one.
    """
    from setpo.eval.generate import HFGenerator, SamplingConfig
    from setpo.eval.metrics import summarize
    from setpo.tasks.countdown import table3_metrics
    from setpo.tiny import load_tiny

    model, tok = load_tiny(model_path)
    prompts = [make_prompt(p, "compact") for p in test]
    metrics, samples = {}, {}
    temps = tqdm(prof.eval_temperatures, desc=desc, unit="temperature", disable=desc is None)
    for T in temps:
        temps.set_postfix(T=f"{T:g}", refresh=True)
        cfg = SamplingConfig(
            n=prof.eval_n,
            temperature=T,
            top_p=prof.eval_top_p,
            max_new_tokens=prof.max_completion_length,
            batch_size=prof.eval_batch_size,
            seed=prof.eval_seed,
            use_chat_template=False,
        )
        outs = HFGenerator(model, tok, cfg, progress=desc is not None)(prompts)
        rule = prof.reward_rule
        outcomes = [[score_answer(o, p.nums, p.target, rule=rule)[1] for o in row] for row, p in zip(outs, test)]
        correct = [[o == "correct" for o in row] for row in outcomes]
        summary = summarize(correct, ks=list(range(1, prof.eval_n + 1)))
        flat = [o for row in outcomes for o in row]
        metrics[f"{T:g}"] = {
            "pass@k": summary["pass@k"],
            "avg@n": summary["avg@n"],
            "outcomes": {k: flat.count(k) / len(flat) for k in sorted(set(flat))},
            "table3": {
                lvl: {k: v for k, v in m.items() if k != "counts"}
                for lvl, m in table3_metrics(outs, test, ("tree", "commutative", "associative"), rule).items()
            },
        }
        samples[f"{T:g}"] = outs
    return metrics, samples


def stage_eval(run: RunDir, prof: CountdownProfile, model_path: Path, test, name: str) -> dict:
    step = f"eval_{name}"
    if run.done(step):
        return run.load(step)
    t0 = time.perf_counter()
    metrics, samples = evaluate_model(model_path, test, prof, desc=f"countdown eval {name}")
    with gzip.open(run.claim(f"samples/{name}.json.gz"), "wt") as f:
        json.dump(samples, f)
    run.save(step, {"name": name, "metrics": metrics, "wall_s": time.perf_counter() - t0})
    return run.load(step)  # JSON round trip: pass@k keys are strings whether fresh or resumed


# --------------------------------------------------------------------------- figures and tables


SFT_ROW = ("sft", "sft", 0.0, 0, float("nan"), 0)
COLORS = ["C0", "C3", "C2", "C1", "C4", "C5"]


def _passk_frame(prof: CountdownProfile, evals: dict):
    import pandas as pd

    rows = []
    for name, method, lam, G, beta, seed in [SFT_ROW] + run_names(prof):
        for T, m in evals[name]["metrics"].items():
            for k, v in m["pass@k"].items():
                rows.append(
                    {"run": name, "method": method, "lam": lam, "G": G, "beta": beta, "seed": seed, "T": float(T),
                     "k": int(k), "pass@k": v}
                )  # fmt: skip
    return pd.DataFrame(rows)


def figure_passk(run: RunDir, prof: CountdownProfile, evals: dict) -> Path:
    """Figure 3 analogue: pass@k vs k per (G, beta) and temperature, GRPO vs SetPO+GRPO (mean +- sd over seeds)."""
    import matplotlib.pyplot as plt

    df = _passk_frame(prof, evals)
    configs = [(G, b) for G in prof.group_sizes for b in prof.betas]
    temps = sorted(df["T"].unique())
    fig, axes = plt.subplots(
        len(configs), len(temps), figsize=(4.2 * len(temps), 3.2 * len(configs)), squeeze=False, sharex=True
    )
    base = df[df.method == "sft"]
    for r, (G, b) in enumerate(configs):
        for c, T in enumerate(temps):
            ax = axes[r][c]
            sb = base[base["T"] == T].sort_values("k")
            ax.plot(sb.k, sb["pass@k"], color="grey", ls="--", label=method_label("sft"))
            for (method, _), color in zip(methods(prof), COLORS):
                d = df[(df.method == method) & (df.G == G) & (df.beta == b) & (df["T"] == T)]
                agg = d.groupby("k")["pass@k"].agg(["mean", "std"]).fillna(0)
                ax.plot(agg.index, agg["mean"], color=color, label=method_label(method))
                ax.fill_between(agg.index, agg["mean"] - agg["std"], agg["mean"] + agg["std"], color=color, alpha=0.2)
            ax.set_xscale("log", base=2)
            ax.set_title(f"G={G}, KL={b:g}, T={T:g}", fontsize=9)
            ax.set_xlabel("k")
            ax.set_ylabel("pass@k")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Countdown pass@k ({prof.n_test} held-out problems, n={prof.eval_n}, {prof.seeds} seed(s))")
    fig.tight_layout()
    path = save_figure(fig, run.path / "fig3_countdown_passk", df)
    plt.close(fig)
    return path


def _scale_line(prof: CountdownProfile, sft_info: dict) -> str:
    data = (
        f"{prof.n_numbers} numbers in 1..{prof.max_number}, targets 1..{prof.max_target}"
        if not prof.train_file
        else f"TinyZero-style file {Path(prof.train_file).name}"
    )
    embed = f"'{prof.embedder}' on the <answer> content" if prof.embed_answer_only else f"'{prof.embedder}'"
    return (
        f"Scale: tiny char-level Qwen2 LM ({sft_info['params']:,} parameters, {prof.num_layers} layers, hidden "
        f"{prof.hidden_size}); Countdown with {data}; SFT on {sft_info['examples']} biased solutions of "
        f"{prof.n_train} problems for {prof.sft_steps} steps; RL {prof.rl_steps} steps x {prof.prompts_per_step} "
        f"prompts (TRL SetPOTrainer, lr {prof.rl_lr:g}, lambda {list(prof.lams)}, embedder {embed}); "
        f"{prof.n_test} held-out problems x n={prof.eval_n} samples; {prof.seeds} seed(s); G in "
        f"{list(prof.group_sizes)}, KL beta in {list(prof.betas)}. The paper: Qwen2.5-3B, 86,400 training problems "
        f"(3-4 numbers up to 99), 1 epoch at 128 prompts/step, lambda 0.5, Qwen3-Embedding-0.6B, "
        f"{PAPER_TEST_PROBLEMS} test problems, 5 seeds."
    )


def _runs_frame(prof: CountdownProfile, evals: dict):
    import pandas as pd

    rows = []
    for name, method, lam, G, beta, seed in [SFT_ROW] + run_names(prof):
        for T, m in evals[name]["metrics"].items():
            row = {"run": name, "method": method, "lam": lam, "G": G, "beta": beta, "seed": seed, "T": float(T)}
            row["pass@1"] = m["pass@k"]["1"]
            row[f"pass@{prof.eval_n}"] = m["pass@k"][str(prof.eval_n)]
            for lvl, t in m["table3"].items():
                row[f"width_{lvl}"] = t["width"]
                row[f"width_share_{lvl}"] = t["width_share"]
                row[f"average_mode_{lvl}"] = t["average_mode"]
            if name != "sft":
                log = evals[name]["rl_log"]
                ratios = [h["setpo/shaping_ratio"] for h in log if "setpo/shaping_ratio" in h]
                # median over steps: steps where few groups have reward variance make the ratio explode
                row["shaping_ratio"] = float(np.median(ratios)) if ratios else float("nan")
                row["final_train_reward"] = float(np.mean([h["reward"] for h in log[-5:]]))
            rows.append(row)
    return pd.DataFrame(rows)


def _mean_sd(x, fmt: str = "{:.1f}") -> str:
    x = x.dropna()
    if len(x) == 0:
        return "n/a"
    return fmt.format(x.mean()) + ("" if len(x) < 2 else " +- " + fmt.format(x.std()))


def tables(run: RunDir, prof: CountdownProfile, evals: dict, sft_info: dict) -> list[Path]:
    """Table 3 analogue and a pass@k summary, as CSV and Markdown with the paper's numbers beside them."""
    df = _runs_frame(prof, evals)
    run.write_csv("table3_countdown_runs.csv", df)
    kmax = prof.eval_n
    lines = [
        "# Countdown diversity (paper Table 3) and pass@k at CPU scale",
        "",
        _scale_line(prof, sft_info),
        "",
        f"Diversity width = test problems with >= 2 distinct correct solutions among the {prof.eval_n} samples "
        f"(in brackets: share of the {prof.n_test} test problems); average mode = mean number of distinct correct "
        "solutions over those problems. 'tree' counts distinct expressions (redundant parentheses ignored); "
        "'comm.' merges operand swaps of + and *. Shaping ratio = median over RL steps of mean |lambda s| / "
        "mean |A_bar| (the trainer's setpo/shaping_ratio). "
        "Mean +- sd over seeds. The paper's numbers are for temperature 1.0.",
    ]
    for T in sorted(df["T"].unique()):
        d_t = df[df["T"] == T]
        lines += [
            "",
            f"## Temperature {T:g}",
            "",
            "| method | G | KL | width (tree) | avg mode (tree) | width (comm.) | avg mode (comm.) | "
            f"pass@1 | pass@{kmax} | shaping ratio | paper width / avg mode (share of {PAPER_TEST_PROBLEMS}) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        groups = [("sft", 0, float("nan"))] + [
            (m, G, b) for G in prof.group_sizes for b in prof.betas for m, _ in methods(prof)
        ]
        for method, G, b in groups:
            d = d_t[d_t.method == "sft"] if method == "sft" else d_t[
                (d_t.method == method) & (d_t.G == G) & (d_t.beta == b)
            ]  # fmt: skip
            paper = PAPER_TABLE3.get(("grpo" if method == "grpo" else "setpo", G)) if method != "sft" else None
            paper_txt = f"{paper[0]} / {paper[1]} ({paper[0] / PAPER_TEST_PROBLEMS:.0%})" if paper and T == 1.0 else "-"
            ratio = "-" if method in ("sft", "grpo") else _mean_sd(d.shaping_ratio, "{:.3f}")
            lines.append(
                f"| {method_label(method)} | {G or '-'} | {'-' if method == 'sft' else f'{b:g}'} | "
                f"{_mean_sd(d.width_tree)} ({_mean_sd(d.width_share_tree, '{:.0%}')}) | "
                f"{_mean_sd(d.average_mode_tree, '{:.2f}')} | {_mean_sd(d.width_commutative)} | "
                f"{_mean_sd(d.average_mode_commutative, '{:.2f}')} | {_mean_sd(d['pass@1'], '{:.3f}')} | "
                f"{_mean_sd(d[f'pass@{kmax}'], '{:.3f}')} | {ratio} | {paper_txt} |"
            )
    lines += ["", "Per-run values: table3_countdown_runs.csv; pass@k for every k: fig3_countdown_passk.csv."]
    md = run.write_text("table3_countdown.md", "\n".join(lines) + "\n")
    return [run.path / "table3_countdown_runs.csv", md]


def figure_training(run: RunDir, prof: CountdownProfile) -> Path:
    """Training curves: mean task reward per RL step, GRPO vs SetPO+GRPO."""
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = []
    for name, method, lam, G, beta, seed in run_names(prof):
        for h in run.load(f"rl_{name}")["log"]:
            rows.append(
                {
                    "run": name, "method": method, "lam": lam, "G": G, "beta": beta, "seed": seed,
                    "step": h.get("step"), "reward": h.get("reward"), "kl": h.get("kl"),
                    "shaping_ratio": h.get("setpo/shaping_ratio"), "diversity": h.get("setpo/diversity"),
                }
            )  # fmt: skip
    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, len(prof.group_sizes), figsize=(5.5 * len(prof.group_sizes), 3.6), squeeze=False)
    window = max(1, prof.rl_steps // 10)
    for ax, G in zip(axes[0], prof.group_sizes):
        for (method, _), color in zip(methods(prof), COLORS):
            for beta, ls in zip(prof.betas, ("-", "--", ":", "-.")):
                d = df[(df.method == method) & (df.G == G) & (df.beta == beta)]
                mean = d.groupby("step")["reward"].mean().rolling(window, min_periods=1).mean()
                ax.plot(mean.index, mean.values, color=color, ls=ls, label=f"{method_label(method)}, KL={beta:g}")
        ax.set_title(f"G={G} (mean over seeds, rolling mean of {window} steps)", fontsize=9)
        ax.set_xlabel("RL step")
        ax.set_ylabel(f"mean training reward ({prof.reward_rule} Countdown rule)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path = save_figure(fig, run.path / "countdown_training", df)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- entry point


BENCHMARK_ENV = Path("$SETPO_BENCHMARK_DIR")


def build_parser() -> Parser:
    """The command-line options."""
    p = experiment_parser(
        NAME,
        __doc__,
        PROFILES,
        config="YAML of CountdownProfile fields (--print-config writes one)",
        seeds="N RL seeds 0..N-1 per configuration (default: the profile's)",
        threads=1,  # 1 is fastest on a shared 2-core box
    )
    p.add_argument(
        "--benchmark-dir",
        type=Path,
        nargs="?",
        const=BENCHMARK_ENV,
        default=None,
        help="use DIR/countdown/{train,test}.jsonl (TinyZero rows) instead of generated problems; "
        "without DIR: $SETPO_BENCHMARK_DIR",
    )
    return p


def _size(prof: CountdownProfile) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {
        "seeds": prof.seeds,
        "sft_steps": prof.sft_steps,
        "rl_steps": prof.rl_steps,
        "n_test": prof.n_test,
        "eval_n": prof.eval_n,
        "runs": len(run_names(prof)),
    }


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    p = build_parser()
    args = p.parse_args(argv)
    prof = chosen_config(p, args, PROFILES, "countdown profile", seeds=lambda prof, n: replace(prof, seeds=n))
    if args.benchmark_dir == BENCHMARK_ENV:
        env = os.environ.get("SETPO_BENCHMARK_DIR")
        if not env:
            p.error("--benchmark-dir without a folder reads $SETPO_BENCHMARK_DIR, which is not set")
        args.benchmark_dir = Path(env)
    if args.benchmark_dir is not None:
        files = [args.benchmark_dir / "countdown" / f"{split}.jsonl" for split in ("train", "test")]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            p.error(f"--benchmark-dir: missing {missing}")
        prof = replace(prof, train_file=str(files[0]), test_file=str(files[1]))
    if args.print_config:
        return print_config(prof, NAME, args)
    label = args.config.stem if args.config else args.profile
    plan = RunPlan.check(args, NAME, label, {"profile": label, **asdict(prof)}, _size(prof), PAPER_FIGURES)
    return lambda: _execute(args, prof, plan)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, prof: CountdownProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    train, test = stage_data(run, prof)
    sft = stage_sft(run, prof, train)
    evals = {"sft": stage_eval(run, prof, sft, test, "sft")}
    grid = run_names(prof)
    for i, (name, _, lam, G, beta, seed) in enumerate(grid, 1):
        print(f"[countdown] run {i}/{len(grid)}: {name}", flush=True)
        model_path = stage_rl(run, prof, sft, train, name, lam, G, beta, seed)
        evals[name] = {**stage_eval(run, prof, model_path, test, name), "rl_log": run.load(f"rl_{name}")["log"]}

    files = [figure_passk(run, prof, evals), figure_training(run, prof)]
    files += tables(run, prof, evals, run.load("sft"))
    return plan.finish(run, t0, run.path / "table3_countdown.md", files)


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
