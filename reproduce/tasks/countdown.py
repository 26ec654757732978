"""Countdown, shared by the Countdown experiments: the problems' profile fields, data split, supervised start,
RL run, evaluation and answer embedder (`countdown`, `countdown_evidence`, `methods_comparison`,
`countdown_confirm` and `reproduce.starts` read them from here)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce.common import RunDir, cpu_rl_args, write_json
from reproduce.evidence import cached_eval, checkpoint_callback, saved_steps, setpo_args
from reproduce.tasks.countdown_problems import reachable_targets, sft_examples, solve
from setpo.tasks.countdown import (
    AnswerEmbedder,
    CountdownProblem,
    canonical,
    extract_answer,
    load_problems,
    make_prompt,
    score_answer,
    trl_reward_for,
)

#: Countdown reward rule (`setpo.tasks.countdown.reward`) of `countdown_evidence` and `methods_comparison`: "lenient",
#: the rule their published results used (the last <answer> anywhere, exact arithmetic, 200-character cap), not
#: TinyZero's last-line rule.
REWARD_RULE = "lenient"


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


SFT_CHECKPOINT_EVERY = 50  # SFT steps between checkpoints (an interrupted SFT resumes from the last one)


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


@dataclass(frozen=True)
class EvidenceProfile:
    """Sizes of one run of `countdown_evidence` (its design is in that module's docstring); the profiles of
    `methods_comparison` and `countdown_confirm` extend it."""

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
