"""SmolLM2-135M-Instruct with LoRA, as the SmolLM2 experiments use it: the policy, one RL arm, sampling; and the
primes experiment's profile, arms and evaluation (`smollm2_primes` runs them, `smollm2_methods` extends its runs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from reproduce.common import RunDir, cpu_rl_args
from reproduce.evidence import arms, cached_eval, checkpoint_callback, saved_steps, setpo_args
from reproduce.tasks.primes import PROMPT, TEST_LOS, AnswerOneHot, primes_reward, valid_answer, windows
from setpo.models import load_pretrained

MODEL = "smollm2-135m-instruct"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def load_policy(adapter: Path | None = None):
    """The start model, or the start model with a saved LoRA adapter merged in."""
    model, tok = load_pretrained(MODEL)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    return model.eval(), tok


def lora_config(r: int):
    """The LoRA adapter every SmolLM2 experiment trains: rank r, alpha 2r, no dropout, on q, k, v and o."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=LORA_TARGETS)


def train_arm(
    run: RunDir,
    name: str,
    rows: list[dict[str, Any]],
    reward_funcs: list[Callable],
    embedder: Callable[[Sequence[str]], Any] | None,
    *,
    prof: Any,
    G: int,
    seed: int,
    ratio: float,
    placebo: bool,
    save_steps: Sequence[int] = (),
    meta: dict[str, Any] | None = None,
    method: dict[str, Any] | None = None,
    answer_extractor: Callable[[str], Any] | None = None,
    fast: bool | None = None,
) -> Path:
    """One LoRA RL run of arm ``name`` from the start model (step ``rl_<name>`` of ``run``); returns its adapter.

    ``prof`` gives rl_steps, prompts_per_step, rl_lr, lora_r and max_completion_length; ratio 0 is plain GRPO, else
    lambda is set every step for mean|lambda s| / mean|A_bar| = ratio (the placebo permutes the credits). ``method``
    (an arm of the methods comparison: its SetPOConfig fields) replaces those SetPO fields; the trainer then gets
    ``embedder`` whenever it is given. Adapters at ``save_steps`` go to ``adapters/<name>_ckpt/step<k>``.
    ``fast`` (default: ``prof.fast`` when the profile has it, else False) trains with `SharedPrefixSetPOTrainer`
    (each distinct prompt run once per step); False is the published path, bit for bit.
    """
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig, SetPOTrainer
    from setpo.integrations.trl.fast_path import SharedPrefixSetPOTrainer

    out = run.path / "adapters" / name
    if run.done(f"rl_{name}"):
        return out
    model, tok = load_pretrained(MODEL)
    fields = setpo_args(ratio, placebo) if method is None else method
    args = SetPOConfig(
        **cpu_rl_args(run.tree(f"trl/{name}"), prof.rl_steps, prof.prompts_per_step, G, prof.max_completion_length,
                      prof.rl_lr, seed, setpo_embedder="hashed", **fields,
                      gradient_checkpointing=False)  # TRL's default (True) recomputes activations: slower on a CPU
    )  # fmt: skip
    callbacks = [checkpoint_callback(set(save_steps), run.tree(f"adapters/{name}_ckpt"), tok)] if save_steps else []
    lora = lora_config(prof.lora_r)
    t0 = time.perf_counter()
    fast = bool(getattr(prof, "fast", False)) if fast is None else fast
    trainer = (SharedPrefixSetPOTrainer if fast else SetPOTrainer)(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=callbacks,
        peft_config=lora,
        embedder=embedder if ratio > 0 or method is not None else None,
        answer_extractor=answer_extractor,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    trainer.model.save_pretrained(run.tree(out))
    logs = [h for h in trainer.state.log_history if "reward" in h]
    # a method arm's fields say what it ran; ratio and placebo are the SetPO arms' settings
    arm_fields = {"ratio": ratio, "placebo": placebo} if method is None else {"fields": dict(method)}
    arm_fields.update({"fast": True} if fast else {})  # the published path's records stay as they were
    run.save(f"rl_{name}", {**(meta or {}), "G": G, "seed": seed, **arm_fields, "wall_s": time.perf_counter() - t0,
                            "log": logs})  # fmt: skip
    return out


def sample(model, tok, prompts: list[str], n: int, temperature: float, top_p: float, max_new_tokens: int,
           batch_size: int, fast: bool = False) -> list[list[str]]:  # fmt: skip
    """``n`` completions per plain-text prompt (no chat template), seed 0; ``fast`` prefills each prompt once and
    shares its cache across its n samples (same distribution, another random stream)."""
    from setpo.eval.generate import HFGenerator, SamplingConfig

    cfg = SamplingConfig(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                         batch_size=batch_size, seed=0, use_chat_template=False)  # fmt: skip
    return HFGenerator(model, tok, cfg, progress=False, shared_prefix=fast)(prompts)


# --------------------------------------------------------------------------- the primes experiment


#: The primes experiment: `smollm2_methods` extends its run folder and quotes its command.
PRIMES_NAME = "smollm2_primes"
PRIMES_COMMAND = "python -m reproduce smollm2_primes --profile {profile}"


@dataclass(frozen=True)
class PrimesProfile:
    """Sizes of one run of `smollm2_primes` (its design is in that module's docstring)."""

    n_test: int = 12
    group_sizes: tuple[int, ...] = (6,)
    seeds: int = 2
    rl_steps: int = 4
    prompts_per_step: int = 4
    rl_lr: float = 2e-4
    lora_r: int = 16
    ratios: tuple[float, ...] = (0.3,)
    placebo_ratio: float = 0.3
    frontier_points: int = 2
    max_completion_length: int = 8
    eval_n: int = 16
    decodings: tuple[tuple[float, float], ...] = ((0.5, 0.9), (1.0, 1.0))
    eval_batch_size: int = 192

    def __post_init__(self):
        if not 1 <= self.n_test <= len(TEST_LOS):
            raise ValueError(f"n_test must be in 1..{len(TEST_LOS)}, got {self.n_test}")
        if self.placebo_ratio not in self.ratios or any(not r > 0 for r in self.ratios):
            raise ValueError(f"ratios must be > 0 and hold placebo_ratio, got {self.ratios} / {self.placebo_ratio}")
        if min(self.group_sizes) < 3 or self.seeds < 1 or self.rl_steps < 1 or self.frontier_points < 2:
            raise ValueError("group sizes >= 3, seeds >= 1, rl_steps >= 1 and frontier_points >= 2 are needed")


PRIMES_PROFILES = {
    "smoke": PrimesProfile(n_test=2, group_sizes=(3,), seeds=2, rl_steps=1, prompts_per_step=2, max_completion_length=4,
                           eval_n=2, decodings=((1.0, 1.0),), lora_r=2),
    "quick": PrimesProfile(n_test=6, rl_steps=2, eval_n=8),
    "full": PrimesProfile(seeds=5, rl_steps=30, frontier_points=4, eval_n=32),
}  # fmt: skip


def stage_rl(run: RunDir, prof: PrimesProfile, arm: str, ratio: float, placebo: bool, G: int, seed: int) -> Path:
    """One LoRA RL run from the start model; GRPO also saves its frontier adapters. Returns the final adapter."""
    rows = [{"prompt": PROMPT.format(lo=lo, hi=hi), "lo": lo, "hi": hi} for lo, hi in windows("train", prof.n_test)]
    return train_arm(run, f"{arm}_g{G}_s{seed}", rows, [primes_reward], AnswerOneHot(), prof=prof, G=G, seed=seed,
                     ratio=ratio, placebo=placebo, save_steps=saved_steps(prof) if arm == "grpo" else (),
                     meta={"arm": arm})  # fmt: skip


def evaluate(adapter: Path | None, prof: PrimesProfile) -> dict:
    """Per decoding: per-window valid counts and distinct valid primes, pass@k, distinct, width."""
    from setpo.metrics import pass_at_k

    model, tok = load_policy(adapter)
    tests = windows("test", prof.n_test)
    prompts = [PROMPT.format(lo=lo, hi=hi) for lo, hi in tests]
    ks = [k for k in (2**i for i in range(20)) if k <= prof.eval_n]
    out = {}
    for T, top_p in prof.decodings:
        samples = sample(model, tok, prompts, prof.eval_n, T, top_p, prof.max_completion_length, prof.eval_batch_size)
        answers = [[valid_answer(s, lo, hi) for s in row] for row, (lo, hi) in zip(samples, tests)]
        n_correct = [sum(a is not None for a in row) for row in answers]
        n_distinct = [len({a for a in row if a is not None}) for row in answers]
        out[f"T{T:g}_p{top_p:g}"] = {
            "n": prof.eval_n,
            "n_correct": n_correct,
            "n_distinct": n_distinct,
            "pass@k": {str(k): float(np.mean(pass_at_k(prof.eval_n, np.asarray(n_correct), k))) for k in ks},
            "distinct": float(np.mean(n_distinct)),
            "width": int(sum(d >= 2 for d in n_distinct)),
            "examples": [row[:4] for row in samples[:3]],
        }
    return out


def stage_eval(run: RunDir, prof: PrimesProfile, adapter: Path | None, name: str) -> dict:
    return cached_eval(run, name, lambda: evaluate(adapter, prof))


def stage_arms(run: RunDir, prof: PrimesProfile, desc: str = PRIMES_NAME) -> dict:
    """Every arm's runs (resumed where done) and evaluations, GRPO's checkpoints included: evals keyed
    (arm, G, seed, step), the start model under ("start", 0, -1, 0)."""
    evals = {("start", 0, -1, 0): stage_eval(run, prof, None, "start")}
    grid = [(G, s, a) for G in prof.group_sizes for s in range(prof.seeds) for a in arms(prof)]
    for G, seed, (arm, ratio, placebo) in tqdm(grid, desc=desc, unit="run"):
        final = stage_rl(run, prof, arm, ratio, placebo, G, seed)
        name = f"{arm}_g{G}_s{seed}"
        evals[(arm, G, seed, prof.rl_steps)] = stage_eval(run, prof, final, name)
        if arm == "grpo":
            for step in saved_steps(prof):
                ckpt = run.path / "adapters" / f"{name}_ckpt" / f"step{step}"
                evals[(arm, G, seed, step)] = stage_eval(run, prof, ckpt, f"{name}_step{step}")
    return evals
