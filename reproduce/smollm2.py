"""SmolLM2-135M-Instruct with LoRA, as the SmolLM2 experiments use it: the policy, one RL arm, sampling."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reproduce.common import RunDir, cpu_rl_args
from reproduce.evidence import checkpoint_callback, setpo_args
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
