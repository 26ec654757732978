"""GAPO list selection with a tiny LM: GRPO, GAPO, SetPO+GRPO and SetPO+GAPO against one biased SFT start.

    python -m reproduce gapo_lists --profile quick [--config FILE] [--print-config] [--seeds N] [--out DIR]
                                   [--overwrite] [--publish]

A character-level tiny causal LM (setpo.tiny) is first trained (SFT) to answer "Pick a fruit from a, b, c:"
with a strong bias (the first listed item), and "Name a fruit:" with a Zipf-skewed favourite; then RL from
that start with the same seeds and budget for each method:

* grpo        GRPO, reward 1 for a listed item, 0 otherwise;
* gapo        GRPO with GAPO's group frequency reward (``diversity_method="gapo"``, published form);
* setpo_grpo  SetPO+GRPO: the validity reward plus lambda * s_i (set-level diversity credit);
* setpo_gapo  SetPO+GAPO: GAPO's reward plus lambda * s_i.

Evaluation (as in GAPO): Jensen-Shannon divergence to uniform over unseen 8-item lists (base 2, and
nats), validity, first-item rate, Unique@N on open-ended prompts, mean pairwise embedding distance and
1 - Self-BLEU (char BLEU-4) of the open-ended answers. Writes, under the run folder: gapo_lists.png/.csv
(bars per metric), gapo_lists_distributions.png/.csv (item histograms on each eval list),
gapo_lists_training.png/.csv (training curves), table.md / table.csv (beside GAPO's reported numbers).
`--print-config` writes the chosen config as YAML; `--config FILE` applies such a file on top of the profile.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

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
from reproduce.tasks.lists import ListSelectionTask, Prompt, item_tokenizer, sft_examples
from setpo.metrics.diversity import (
    js_to_uniform,
    mean_pairwise_embedding_distance,
    self_bleu,
    unique_at_n,
    validity_rate,
)
from setpo.tasks.list_selection import VOCABULARY, extract_answer, is_valid, parse_list_prompt, validity_reward

NAME = "gapo_lists"
METHODS = ("grpo", "gapo", "setpo_grpo", "setpo_gapo")
LABELS = {"sft": "SFT start", "grpo": "GRPO", "gapo": "GAPO", "setpo_grpo": "SetPO+GRPO", "setpo_gapo": "SetPO+GAPO"}

# GAPO's reported numbers (arXiv 2511.12596; medium-low confidence on the exact values, see the spec).
GAPO_REPORTED = {
    "js_to_uniform": ("> 0.3 (Qwen2.5-32B: 0.31)", "< 0.1 (Qwen2.5-32B: 0.06)"),
    "unique_valid_open": ("24 (Unique@500)", "147 (Unique@500)"),
    "pairwise_distance_open": ("0.20 (creative writing)", "0.41 (creative writing)"),
    "one_minus_self_bleu_open": ("0.54 (creative writing)", "0.82 (creative writing)"),
}


@dataclass
class GapoListsConfig:
    """Every setting of the experiment; the profiles below are named presets (`--print-config` writes one)."""

    seeds: tuple[int, ...] = (0,)
    methods: tuple[str, ...] = METHODS
    # tiny model (setpo.tiny, Qwen2 architecture, character tokenizer)
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    # task: the first n_categories categories of the built-in vocabulary, items as whole-word tokens
    n_categories: int = 6
    # Eval lists are unseen item combinations. Held-out items are off by default: an item token never seen in
    # training keeps its random embedding, so a model this small cannot emit it.
    n_heldout: int = 0
    heldout_per_eval_list: int = 0
    # SFT teacher and optimiser ("favourite": the most popular listed item; a tiny model learns it in a few
    # hundred steps, while "first" needs a positional copy circuit it does not find in that budget)
    sft_bias: str = "favourite"
    sft_strength: float = 0.8
    sft_open_fraction: float = 0.3
    sft_open_zipf: float = 1.5
    sft_steps: int = 900
    sft_batch_size: int = 32
    sft_lr: float = 3e-3
    # RL (GAPO: G=32, KL 0, lr 1e-5 with LoRA on 7B/32B; scaled down here)
    rl_steps: int = 100
    rl_prompts_per_step: int = 8
    num_generations: int = 8
    rl_lr: float = 1e-3
    beta: float = 0.0
    loss_type: str = "grpo"
    temperature: float = 1.0
    max_completion_length: int = 12
    # The credits s_i are O(0.1) here (one-word answers, near-orthogonal hashed embeddings) while z-scored
    # advantages are O(1): lambda = 16 puts lambda * s of a lone novel answer near its GAPO advantage.
    setpo_lambda: float = 16.0
    setpo_embedder: str = "hashed"
    gapo_form: str = "published"
    gapo_count: str = "inclusive"
    rl_open_fraction: float = 0.0  # share of open-ended prompts in RL (GAPO trains on lists only)
    # evaluation (GAPO: 10 unseen 8-item lists x 100 samples; 10 open-ended categories x 500 samples)
    eval_lists: int = 10
    eval_samples: int = 100
    open_categories: int = 6
    open_samples: int = 100
    eval_temperature: float = 1.0
    metric_embedder: str = "minilm"
    eval_seed: int = 1234

    def __post_init__(self) -> None:
        self.seeds = tuple(int(s) for s in self.seeds)
        self.methods = tuple(self.methods)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ValueError(f"seeds must be distinct non-negative integers, got {self.seeds}")
        unknown = set(self.methods) - set(METHODS)
        if unknown or not self.methods:
            raise ValueError(f"unknown method(s) {sorted(unknown)}; choose from {METHODS}")
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods must be distinct, got {self.methods}; name each once")
        self._check_sizes()

    def _check_sizes(self) -> None:
        """Group size, step and sample counts, lambda, and the category counts are in range."""
        if self.num_generations < 3:
            raise ValueError(f"num_generations must be >= 3 (SetPO's leave-one-out credit), got {self.num_generations}")
        for name in ("sft_steps", "rl_steps", "rl_prompts_per_step", "eval_lists", "eval_samples", "open_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_samples < 2 or self.open_samples < 2:
            raise ValueError("eval_samples and open_samples must be >= 2 (pairwise metrics)")
        if self.setpo_lambda <= 0 and any(m.startswith("setpo") for m in self.methods):
            raise ValueError(f"setpo_lambda must be > 0 for the SetPO methods, got {self.setpo_lambda}")
        if not 1 <= self.n_categories <= len(VOCABULARY):
            raise ValueError(f"n_categories must be in [1, {len(VOCABULARY)}], got {self.n_categories}")
        if not 1 <= self.open_categories <= self.n_categories:
            raise ValueError(
                f"open_categories must be in [1, n_categories={self.n_categories}], got {self.open_categories}"
            )
        if not 0.0 <= self.rl_open_fraction <= 1.0:
            raise ValueError(f"rl_open_fraction must be in [0, 1], got {self.rl_open_fraction}")

    def task(self) -> ListSelectionTask:
        vocab = dict(list(VOCABULARY.items())[: self.n_categories])
        return ListSelectionTask(vocab, n_heldout=self.n_heldout, heldout_per_eval_list=self.heldout_per_eval_list)


PROFILES: dict[str, GapoListsConfig] = {
    "quick": GapoListsConfig(),
    "full": GapoListsConfig(seeds=(0, 1, 2), sft_steps=1200, rl_steps=200, open_samples=500),
}


# ---------------------------------------------------------------------------------------------------------------
# Rewards


def _group_distinct(prompts, completions, group_size, valid_answers, **_) -> list[float]:
    """Monitor (weight 0): distinct valid answers in the row's group / G."""
    out = []
    for start in range(0, len(completions), group_size):
        answers = [extract_answer(c) for c in completions[start : start + group_size]]
        distinct = {a for a in answers if is_valid(a, valid_answers[start])}
        out += [len(distinct) / group_size] * group_size
    return out


def _gapo_reward(cfg: GapoListsConfig):
    """SetPO+GAPO's task reward: GAPO's R~ (eq. 3, `setpo.rewards.gapo_rewards`) as a group reward, SetPO added on it.

    One run runs one method, so the combination takes GAPO's reward as its task reward; the GAPO arm itself is
    the method ``diversity_method="gapo"``, which computes the same R~ (see tests/test_trl_gapo_route.py).
    """
    from setpo.integrations.trl import GroupRewardFunction
    from setpo.rewards import gapo_rewards

    def gapo(prompts, completions, group_size, valid_answers, **_) -> list[float]:
        answers = [extract_answer(c) for c in completions]
        kinds = dict(form=cfg.gapo_form, count=cfg.gapo_count)
        return gapo_rewards(answers, valid_answers, group_size, **kinds, dtype=torch.float64).tolist()

    return GroupRewardFunction(gapo, name="gapo")


def reward_setup(method: str, cfg: GapoListsConfig) -> tuple[list, list[float]]:
    """(reward functions, weights): the task reward (validity; GAPO's for SetPO+GAPO), then weight-0 monitors."""
    from setpo.integrations.trl import GroupRewardFunction

    distinct = GroupRewardFunction(_group_distinct, name="group_distinct")
    if method == "setpo_gapo":
        return [_gapo_reward(cfg), validity_reward, distinct], [1.0, 0.0, 0.0]
    return [validity_reward, distinct], [1.0, 0.0]


def method_fields(method: str, cfg: GapoListsConfig) -> dict[str, Any]:
    """The SetPOConfig fields of an arm: GAPO is the method ``gapo`` (its R~ replaces the validity reward), the
    SetPO arms add lambda * s, GRPO is SetPO at lambda 0."""
    if method == "gapo":
        return {"diversity_method": "gapo", "diversity_method_kwargs": {"form": cfg.gapo_form, "count": cfg.gapo_count}}
    return {"setpo_lambda": cfg.setpo_lambda if method.startswith("setpo") else 0.0}


# ---------------------------------------------------------------------------------------------------------------
# Model: SFT, sampling, RL


def _encode_sft_batch(tok, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
    """Right-padded input ids with labels on the completion and EOS only."""
    ids, labels = [], []
    for prompt, completion in pairs:
        a = tok(prompt, add_special_tokens=False)["input_ids"]
        b = tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids.append(a + b)
        labels.append([-100] * len(a) + b)
    n = max(map(len, ids))
    out = {
        "input_ids": torch.full((len(ids), n), tok.pad_token_id),
        "attention_mask": torch.zeros((len(ids), n), dtype=torch.long),
        "labels": torch.full((len(ids), n), -100),
    }
    for i, (x, y) in enumerate(zip(ids, labels)):
        out["input_ids"][i, : len(x)] = torch.tensor(x)
        out["attention_mask"][i, : len(x)] = 1
        out["labels"][i, : len(y)] = torch.tensor(y)
    return out


def sft_data(cfg: GapoListsConfig, task: ListSelectionTask, seed: int) -> list[tuple[str, str]]:
    """The SFT (prompt, completion) pairs of one seed: sft_steps x sft_batch_size draws from the biased teacher."""
    return sft_examples(
        task,
        cfg.sft_steps * cfg.sft_batch_size,
        seed=seed,
        bias=cfg.sft_bias,
        strength=cfg.sft_strength,
        open_fraction=cfg.sft_open_fraction,
        open_zipf=cfg.sft_open_zipf,
    )


def training_item_sets(cfg: GapoListsConfig, task: ListSelectionTask) -> set[frozenset[str]]:
    """Item sets of every list prompt seen in SFT or RL for any seed (evaluation lists avoid them)."""
    texts = [p for seed in cfg.seeds for p, _ in sft_data(cfg, task, seed)]
    texts += [p for seed in cfg.seeds for p in rl_dataset(task, cfg, seed)["prompt"]]
    return {frozenset(parsed[1]) for parsed in map(parse_list_prompt, texts) if parsed is not None}


def train_sft(cfg: GapoListsConfig, task: ListSelectionTask, seed: int, out_dir: Path, bar=None) -> dict:
    """Build a tiny model and fit it to the biased teacher (AdamW, warm-up then linear decay); save to out_dir."""
    from setpo.tiny import build_tiny_model, load_tiny

    path = build_tiny_model(
        out_dir,
        hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        seed=seed,
        tokenizer=item_tokenizer(task.vocab),
        overwrite=True,
    )
    model, tok = load_tiny(path)
    examples = sft_data(cfg, task, seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.sft_lr, weight_decay=0.0)
    warm = max(1, cfg.sft_steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * (1.0 - s / cfg.sft_steps))
    model.train()
    losses = []
    for step in range(cfg.sft_steps):
        batch = _encode_sft_batch(tok, examples[step * cfg.sft_batch_size : (step + 1) * cfg.sft_batch_size])
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return {"loss_first": losses[0], "loss_last": float(np.mean(losses[-20:])), "losses": losses[::10]}


@torch.no_grad()
def sample_completions(
    model, tok, prompt: str, n: int, temperature: float, max_new_tokens: int, seed: int
) -> list[str]:
    """``n`` sampled completions of one prompt (pure sampling: no top-k / top-p), decoded without special tokens."""
    torch.manual_seed(seed)
    device = next(model.parameters()).device
    enc = tok([prompt] * n, return_tensors="pt", add_special_tokens=False).to(device)
    out = model.generate(
        **enc,
        do_sample=True,
        temperature=temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=max_new_tokens,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def rl_dataset(task: ListSelectionTask, cfg: GapoListsConfig, seed: int):
    """One pass of training prompts: rl_steps x rl_prompts_per_step rows with the valid answers of each."""
    from datasets import Dataset

    rng = random.Random(10_000 + seed)
    rows = []
    for _ in range(cfg.rl_steps * cfg.rl_prompts_per_step):
        p = task.open_train_prompt(rng) if rng.random() < cfg.rl_open_fraction else task.train_prompt(rng)
        rows.append({"prompt": p.text, "valid_answers": list(p.valid)})
    return Dataset.from_list(rows)


def train_rl(
    cfg: GapoListsConfig, task: ListSelectionTask, method: str, seed: int, sft_path: Path, out_dir: Path, bar=None
) -> list[dict]:
    """RL from the SFT model with SetPOTrainer (setpo_lambda=0 is plain GRPO); saves the model, returns the log."""
    from transformers.trainer_callback import PrinterCallback

    from setpo.integrations.trl import SetPOConfig, SetPOTrainer
    from setpo.tiny import load_tiny

    model, tok = load_tiny(sft_path)
    funcs, weights = reward_setup(method, cfg)
    args = SetPOConfig(
        **cpu_rl_args(
            out_dir / "trl",
            cfg.rl_steps,
            cfg.rl_prompts_per_step,
            cfg.num_generations,
            cfg.max_completion_length,
            cfg.rl_lr,
            seed,
            gradient_accumulation_steps=1,
            beta=cfg.beta,
            loss_type=cfg.loss_type,
            scale_rewards="group",
            temperature=cfg.temperature,
            reward_weights=weights,
            **method_fields(method, cfg),
            setpo_embedder=cfg.setpo_embedder,
            use_cpu=not torch.cuda.is_available(),
        )
    )
    trainer = SetPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=rl_dataset(task, cfg, seed),
        processing_class=tok,
        answer_extractor=extract_answer,
    )
    trainer.remove_callback(PrinterCallback)
    if bar is not None:
        trainer.add_callback(progress_callback(bar))
    trainer.train()
    trainer.model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    shutil.rmtree(out_dir / "trl", ignore_errors=True)
    return [_log_row(row, method) for row in trainer.state.log_history if "reward" in row]


def _log_row(row: dict[str, Any], method: str) -> dict[str, Any]:
    """One logged step as the training figure reads it: the arm's own reward under ``reward`` (GAPO: its R~, which
    TRL's ``reward``, the validity reward it replaces, is not; also under ``rewards/gapo``), SetPO's diagnostics."""
    keep = ("step", "reward", "reward_std", "entropy", "frac_reward_zero_std")
    keep += ("setpo/diversity", "setpo/shaping_ratio") if method.startswith("setpo") else ()
    out = {k: v for k, v in row.items() if k in keep or k.startswith("rewards/")}
    if method == "gapo":
        for k in ("reward", "reward_std", "frac_reward_zero_std"):
            out[k] = row[f"method/gapo/{k}"]
        out["rewards/gapo/mean"], out["rewards/gapo/std"] = row["method/gapo/reward"], row["method/gapo/reward_std"]
    return out


# ---------------------------------------------------------------------------------------------------------------
# Evaluation


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def evaluation_prompts(cfg: GapoListsConfig, task: ListSelectionTask) -> tuple[list[Prompt], list[Prompt]]:
    """The unseen evaluation lists (no item set used in training) and the open-ended prompts."""
    lists = task.eval_lists(cfg.eval_lists, seed=cfg.eval_seed, exclude=training_item_sets(cfg, task))
    return lists, task.open_eval_prompts(cfg.open_categories)


def evaluate_model(model, tok, task: ListSelectionTask, cfg: GapoListsConfig, embedder, prompts=None) -> dict[str, Any]:
    """Every metric on the unseen lists and the open-ended prompts (same sampling seeds for every model)."""
    lists, opens = evaluation_prompts(cfg, task) if prompts is None else prompts
    per_list, per_open = [], []
    rank = {w: i for items in task.vocab.values() for i, w in enumerate(items)}  # the SFT teacher's favourites
    for i, p in enumerate(lists):
        unlisted = set(task.vocab[p.category]) - set(p.items)
        comps = sample_completions(
            model, tok, p.text, cfg.eval_samples, cfg.eval_temperature, cfg.max_completion_length, cfg.eval_seed + i
        )
        answers = [extract_answer(c) for c in comps]
        n_valid = sum(is_valid(a, p.items) for a in answers)
        per_list.append(
            {
                "category": p.category,
                "items": list(p.items),
                "counts": [sum(a == w for a in answers) for w in p.items],
                "validity": validity_rate(answers, p.items),
                "first_item_rate": sum(a == p.items[0] for a in answers) / len(answers),
                "favourite_rate": sum(a == min(p.items, key=rank.get) for a in answers) / len(answers),
                "unlisted_same_category_rate": sum(a in unlisted for a in answers) / len(answers),
                "js_bits": js_to_uniform(answers, p.items) if n_valid else None,
                "js_nats": js_to_uniform(answers, p.items, base=math.e) if n_valid else None,
                "js_bits_invalid_bucket": js_to_uniform(answers, p.items, invalid="bucket"),
                "pairwise_distance": mean_pairwise_embedding_distance([c.strip() for c in comps], embedder),
                "one_minus_self_bleu": 1.0 - self_bleu([c.strip() for c in comps], tokenization="char"),
            }
        )
    for i, p in enumerate(opens):
        comps = sample_completions(
            model,
            tok,
            p.text,
            cfg.open_samples,
            cfg.eval_temperature,
            cfg.max_completion_length,
            cfg.eval_seed + 100 + i,
        )
        answers = [extract_answer(c) for c in comps]
        texts = [c.strip() for c in comps]
        per_open.append(
            {
                "category": p.category,
                "top_answers": Counter(answers).most_common(10),
                "answer_counts": dict(Counter(a or "" for a in answers)),
                "js_bits": js_to_uniform(answers, p.valid) if any(is_valid(a, p.valid) for a in answers) else None,
                "validity": validity_rate(answers, p.valid),
                "unique": unique_at_n(answers, cfg.open_samples),
                "unique_valid": unique_at_n(answers, cfg.open_samples, valid=p.valid),
                "unique_heldout": unique_at_n(answers, cfg.open_samples, valid=task.heldout[p.category]),
                "pairwise_distance": mean_pairwise_embedding_distance(texts, embedder),
                "one_minus_self_bleu": 1.0 - self_bleu(texts, tokenization="char"),
            }
        )
    summary = {
        "js_to_uniform": _mean([r["js_bits"] for r in per_list]),
        "js_to_uniform_nats": _mean([r["js_nats"] for r in per_list]),
        "js_invalid_bucket": _mean([r["js_bits_invalid_bucket"] for r in per_list]),
        "lists_without_valid_answer": sum(r["js_bits"] is None for r in per_list),
        "validity_lists": _mean([r["validity"] for r in per_list]),
        "first_item_rate": _mean([r["first_item_rate"] for r in per_list]),
        "favourite_rate": _mean([r["favourite_rate"] for r in per_list]),
        "unlisted_same_category_rate": _mean([r["unlisted_same_category_rate"] for r in per_list]),
        "pairwise_distance_lists": _mean([r["pairwise_distance"] for r in per_list]),
        "one_minus_self_bleu_lists": _mean([r["one_minus_self_bleu"] for r in per_list]),
        "validity_open": _mean([r["validity"] for r in per_open]),
        "unique_open": _mean([r["unique"] for r in per_open]),
        "unique_valid_open": _mean([r["unique_valid"] for r in per_open]),
        "js_to_uniform_open": _mean([r["js_bits"] for r in per_open]),
        "pairwise_distance_open": _mean([r["pairwise_distance"] for r in per_open]),
        "one_minus_self_bleu_open": _mean([r["one_minus_self_bleu"] for r in per_open]),
    }
    return {"summary": summary, "lists": per_list, "open": per_open}


# ---------------------------------------------------------------------------------------------------------------
# Tables and figures

METRICS = [  # (key, label, better)
    ("js_to_uniform", "JS to uniform (bits)", "lower"),
    ("validity_lists", "validity (lists)", "higher"),
    ("favourite_rate", "favourite-item rate (uniform 0.125)", "lower"),
    ("unlisted_same_category_rate", "unlisted same-category answers", "lower"),
    ("unique_valid_open", "Unique@N, valid (open)", "higher"),
    ("js_to_uniform_open", "JS to uniform, open (bits)", "lower"),
    ("pairwise_distance_open", "mean pairwise distance (open)", "higher"),
    ("one_minus_self_bleu_open", "1 - Self-BLEU (open)", "higher"),
]


def results_frame(evals: dict[tuple[str, int], dict]):
    """One row per (method, seed) with every summary metric."""
    import pandas as pd

    return pd.DataFrame([{"method": m, "seed": s, **r["summary"]} for (m, s), r in evals.items()])


def scale_note(cfg: GapoListsConfig, n_params: int) -> str:
    return (
        f"Scale: tiny Qwen2-architecture LM ({n_params / 1e3:.0f}k parameters, {cfg.num_layers} layers, hidden "
        f"{cfg.hidden_size}; character tokenizer plus one token per item), {cfg.n_categories} categories; "
        f"SFT {cfg.sft_steps} steps x {cfg.sft_batch_size} on a teacher picking the "
        f"{cfg.sft_bias} item with p={cfg.sft_strength}; RL {cfg.rl_steps} steps x {cfg.rl_prompts_per_step} prompts "
        f"x G={cfg.num_generations}, lr {cfg.rl_lr}, KL {cfg.beta}, temperature {cfg.temperature}; SetPO lambda "
        f"{cfg.setpo_lambda}, kernel embedder '{cfg.setpo_embedder}'; seeds {list(cfg.seeds)}. Eval: "
        f"{cfg.eval_lists} unseen 8-item lists x {cfg.eval_samples} samples, {cfg.open_categories} open-ended "
        f"categories x {cfg.open_samples} samples (Unique@{cfg.open_samples}), temperature {cfg.eval_temperature}; "
        f"distance via '{cfg.metric_embedder}' (1 - cos), Self-BLEU = char BLEU-4 (epsilon smoothing) on the "
        "open-ended answers. GAPO's numbers: Qwen2.5-7B/32B-Instruct, LoRA, G=32 (pairwise distance and "
        "Self-BLEU on creative writing, not on this task)."
    )


def write_table(run: RunDir, cfg: GapoListsConfig, df, n_params: int) -> list[Path]:
    cols = [k for k, _, _ in METRICS] + [
        "js_to_uniform_nats",
        "first_item_rate",
        "validity_open",
        "unique_open",
        "pairwise_distance_lists",
        "one_minus_self_bleu_lists",
    ]
    agg = df.groupby("method")[cols].agg(["mean", "std"])
    order = [m for m in ("sft", *METHODS) if m in agg.index]
    flat = agg.copy()
    flat.columns = [f"{a}_{b}" for a, b in flat.columns]
    run.write_csv("table.csv", flat.loc[order].reset_index())

    def cell(m: str, k: str) -> str:
        mean, std = agg.loc[m, (k, "mean")], agg.loc[m, (k, "std")]
        if mean != mean:  # NaN: no value
            return "n/a"
        return f"{mean:.3f}" + (f" +- {std:.3f}" if std == std and len(cfg.seeds) > 1 else "")

    head = ["method"] + [f"{label} ({'lower' if b == 'lower' else 'higher'} better)" for _, label, b in METRICS]
    lines = [
        "# GAPO list selection: GRPO vs GAPO vs SetPO (tiny-model reproduction)",
        "",
        scale_note(cfg, n_params),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for m in order:
        lines.append("| " + " | ".join([LABELS[m]] + [cell(m, k) for k, _, _ in METRICS]) + " |")
    lines += [
        "",
        "GAPO's reported numbers (their scale; medium-low confidence):",
        "",
        "| metric | baseline (instruct model before GAPO) | GAPO |",
        "|---|---|---|",
    ]
    for k, (before, after) in GAPO_REPORTED.items():
        label = dict((a, b) for a, b, _ in METRICS).get(k, k.replace("_", " "))
        lines.append(f"| {label} | {before} | {after} |")
    lines += [
        "",
        "JS in nats = bits x ln 2. Unique@N counts valid distinct answers (at most the category size, about 24, "
        "so it saturates for large N; the open-ended JS to uniform over the category does not). Unlisted "
        "same-category answers: share of list answers naming an item of the right category that is not in the "
        "list. Raw distinct answers (any string), open-ended validity, and distance / Self-BLEU on the list "
        "answers are in table.csv. Self-BLEU of one-word answers saturates: with "
        "N samples over a vocabulary of about 24 words nearly every answer has an exact copy among the others "
        "(BLEU 1), so 1 - Self-BLEU here mostly counts one-off strings; GAPO measured it on long creative texts.",
    ]
    md = run.write_text("table.md", "\n".join(lines) + "\n")
    return [md, run.path / "table.csv"]


def palette() -> dict[str, tuple]:
    """One colour per method, the same in every figure."""
    import seaborn as sns

    names = ("sft", *METHODS)
    return dict(zip(names, sns.color_palette("deep", len(names))))


def metrics_figure(run: RunDir, cfg: GapoListsConfig, df) -> Path:
    import matplotlib.pyplot as plt
    import seaborn as sns

    order = [m for m in ("sft", *METHODS) if m in set(df.method)]
    fig, axes = plt.subplots(2, 4, figsize=(18, 7.5))
    colours = palette()
    for ax, (key, label, better) in zip(axes.flat, METRICS):
        sub = df[df[key].notna()]
        sns.barplot(data=sub, x="method", y=key, hue="method", order=order, palette=colours, errorbar="sd", ax=ax)
        sns.stripplot(data=sub, x="method", y=key, order=order, color="k", size=3, ax=ax)
        ax.set_title(f"{label} ({better} is better)")
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.set_xticks(range(len(order)), [LABELS[m] for m in order], rotation=20)
    fig.suptitle(
        f"GAPO list selection, tiny LM: {cfg.rl_steps} RL steps x {cfg.rl_prompts_per_step} prompts x "
        f"G={cfg.num_generations}, {len(cfg.seeds)} seed(s), lambda={cfg.setpo_lambda}"
    )
    fig.tight_layout()
    path = save_figure(fig, run.path / "gapo_lists", df)
    plt.close(fig)
    return path


def distributions_figure(run: RunDir, cfg: GapoListsConfig, evals: dict) -> Path:
    import matplotlib.pyplot as plt
    import pandas as pd

    seed = cfg.seeds[0]
    names = [m for m in ("sft", *cfg.methods) if (m, seed) in evals]
    rows = [
        {"method": m, "list": i, "category": r["category"], "position": j, "item": w, "count": c}
        for m in names
        for i, r in enumerate(evals[(m, seed)]["lists"])
        for j, (w, c) in enumerate(zip(r["items"], r["counts"]))
    ]
    df = pd.DataFrame(rows)
    n_lists = min(4, cfg.eval_lists)
    colours = palette()
    fig, axes = plt.subplots(1, n_lists, figsize=(4 * n_lists, 3.6), sharey=True, squeeze=False)
    for i, ax in enumerate(axes[0]):
        d = df[df.list == i]
        width = 0.8 / len(names)
        for k, m in enumerate(names):
            dm = d[d.method == m].sort_values("position")
            ax.bar(dm.position + k * width, dm["count"] / cfg.eval_samples, width, label=LABELS[m], color=colours[m])
        ax.axhline(1 / 8, color="grey", ls=":", lw=0.8)
        items = d[d.method == names[0]].sort_values("position").item.tolist()
        ax.set_xticks(np.arange(len(items)) + 0.4 - width / 2, items, rotation=60, fontsize=8)
        ax.set_title(f"unseen list {i} ({d.category.iloc[0]})")
    axes[0][0].set_ylabel("share of samples (dotted: uniform)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Item choice per list position (seed {seed}; list order as shown in the prompt)")
    fig.tight_layout()
    path = save_figure(fig, run.path / "gapo_lists_distributions", df)
    plt.close(fig)
    return path


def training_figure(run: RunDir, cfg: GapoListsConfig, logs: dict) -> Path:
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = [{"method": m, "seed": s, **row} for (m, s), log in logs.items() for row in log]
    df = pd.DataFrame(rows)
    panels = [
        ("rewards/validity_reward/mean", "validity of training samples"),
        ("rewards/group_distinct/mean", "distinct valid answers per group / G"),
        ("reward", "task reward (method's own)"),
    ]
    colours = palette()
    window = max(1, cfg.rl_steps // 10)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for ax, (col, title) in zip(axes, panels):
        if col in df:
            for m in cfg.methods:
                d = df[df.method == m].groupby("step")[col].mean().rolling(window, min_periods=1).mean()
                ax.plot(d.index, d.values, label=LABELS[m], color=colours[m])
        ax.set_title(f"{title} (mean of {window} steps)" if window > 1 else title)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = save_figure(fig, run.path / "gapo_lists_training", df)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------------------------


def _evaluate_step(run: RunDir, step: str, model_dir: Path, cfg, task, embedder, prompts) -> dict:
    from setpo.tiny import load_tiny

    if run.done(step):
        return run.load(step)
    model, tok = load_tiny(model_dir)
    result = evaluate_model(model, tok, task, cfg, embedder, prompts)
    return run.save(step, result)  # as a resumed run reads it: the same columns in every table


def run_experiment(cfg: GapoListsConfig, run: RunDir, progress: bool = True) -> dict[str, Any]:
    """Every SFT, RL and evaluation unit (each a resumable step), then tables and figures; returns paths and data."""
    from setpo.embedders import build_embedder
    from setpo.tiny import load_tiny

    task = cfg.task()
    embedder = build_embedder(cfg.metric_embedder)
    prompts = evaluation_prompts(cfg, task)
    models = run.path / "models"
    evals: dict[tuple[str, int], dict] = {}
    logs: dict[tuple[str, int], list] = {}
    units = len(cfg.seeds) * (1 + len(cfg.methods))
    with tqdm(total=units, desc=f"{NAME} units", unit="unit", disable=not progress, position=0) as outer:
        for seed in cfg.seeds:
            sft_dir = models / f"sft_s{seed}"
            if not run.done(f"sft_s{seed}"):
                with tqdm(total=cfg.sft_steps, desc=f"SFT seed {seed}", leave=False, disable=not progress) as bar:
                    run.save(f"sft_s{seed}", train_sft(cfg, task, seed, run.tree(sft_dir), bar))
            evals[("sft", seed)] = _evaluate_step(run, f"eval_sft_s{seed}", sft_dir, cfg, task, embedder, prompts)
            outer.update(1)
            for method in cfg.methods:
                rl_dir = models / f"{method}_s{seed}"
                step = f"rl_{method}_s{seed}"
                if not run.done(step):
                    with tqdm(
                        total=cfg.rl_steps, desc=f"RL {method} seed {seed}", leave=False, disable=not progress
                    ) as b:
                        run.save(step, {"log": train_rl(cfg, task, method, seed, sft_dir, run.tree(rl_dir), b)})
                logs[(method, seed)] = run.load(step)["log"]
                evals[(method, seed)] = _evaluate_step(
                    run, f"eval_{method}_s{seed}", rl_dir, cfg, task, embedder, prompts
                )
                outer.update(1)
    df = results_frame(evals)
    n_params = sum(p.numel() for p in load_tiny(models / f"sft_s{cfg.seeds[0]}")[0].parameters())
    files = [metrics_figure(run, cfg, df), distributions_figure(run, cfg, evals), training_figure(run, cfg, logs)]
    files += write_table(run, cfg, df, n_params)
    return {"files": files, "frame": df, "evals": evals, "logs": logs}


def build_parser() -> Parser:
    """The command-line options."""
    p = experiment_parser(
        NAME,
        __doc__,
        PROFILES,
        config="YAML of config fields (--print-config writes one)",
        seeds="N seeds 0..N-1 (default: the profile's)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return p


def _size(cfg: GapoListsConfig) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {
        "seeds": len(cfg.seeds),
        "sft_steps": cfg.sft_steps,
        "rl_steps": cfg.rl_steps,
        "eval_samples": cfg.eval_samples,
        "open_samples": cfg.open_samples,
    }


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    p = build_parser()
    args = p.parse_args(argv)
    cfg = chosen_config(p, args, PROFILES, "gapo_lists config", seeds=lambda c, n: replace(c, seeds=tuple(range(n))))
    if args.print_config:
        return print_config(cfg, NAME, args)
    label = args.profile if args.config is None else f"{args.profile}_{args.config.stem}"
    config = {"profile": args.profile, **asdict(cfg)}
    plan = RunPlan.check(args, NAME, label, config, _size(cfg), PAPER_FIGURES, folder=args.profile)
    return lambda: _execute(args, cfg, plan)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, cfg: GapoListsConfig, plan: RunPlan) -> int:
    run = plan.start()
    torch.set_num_threads(1)  # a tiny model: extra threads only contend with each other
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    t0 = time.perf_counter()
    result = run_experiment(cfg, run, progress=not args.no_progress)
    return plan.finish(run, t0, run.path / "table.md", result["files"], profile=args.profile)


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
