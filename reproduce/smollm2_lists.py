"""GAPO's list selection on a real pretrained LM: SmolLM2-135M-Instruct picking one item from a list.

    python -m reproduce smollm2_lists --profile quick|full [--seeds N] [--out DIR] [--overwrite] [--publish]

Design (fixed before the runs; the profile sets the sizes)
* Model: SmolLM2-135M-Instruct (the offline copy, `setpo.models`), trained with LoRA (r 16 on q, k, v, o).
* Task (GAPO's setting: an instruct model asked to pick from a list): a one-shot plain-text prompt,
  "Pick one word from the list.\\nList: red, blue, green, pink.\\nPick: green\\nList: {items}.\\nPick:", the answer
  the first line of the completion, normalised (`setpo.tasks.list_selection.extract_answer`); valid when it is a
  listed item. Items come from the built-in vocabulary (`setpo.tasks.list_selection.VOCABULARY`, colours left out:
  the example shows colours). Chosen by measuring prompt forms on this model at T 1, n 32: with this form 68% of
  answers are valid and about 5 of 8 items appear, the first listed item in 4% (instruction-only forms: 2-12%
  valid; the chat template: 1%).
* Train lists: 4-12 items of one category, drawn with seed 0; test lists: `n_test` lists of 8 items drawn with
  another seed (no test list is a training list).
* Arms from the same start, same seeds, same budget: GRPO (reward 1 for a valid answer, else 0); GAPO (GRPO with
  GAPO's frequency reward, eq. 3, as the method `diversity_method="gapo"`); SetPO+GRPO with lambda set every step
  so that mean|lambda s| / mean|A_bar| = `ratio`; a placebo at the same ratio (credits permuted across groups).
  Kernel: a one-hot hashed embedding of the answer (the text when it is not an item).
* GRPO's frontier: GRPO's adapter saved at `frontier_points` evenly spaced steps and evaluated.
* Evaluation: n samples per test list at T 1.0 / top-p 1.0 (GAPO's sampling of the policy).
* Metrics (GAPO's): validity; JS divergence to uniform over the listed items (base 2) over valid answers only, and
  with the invalid answers as an extra outcome of target probability 0; distinct valid items; first-item rate.
* Decision rule (paired over seeds, 95% bootstrap CI, sign-flip test; `reproduce.stats`): an arm is better than
  GRPO when it lies above GRPO's frontier in (validity, 1 - JS over valid answers): its 1 - JS minus GRPO's at the
  validity (the most 1 - JS each seed's GRPO path, checkpoints joined by straight lines, reaches at validity >= the
  arm's: `reproduce.stats.frontier_at`) has a CI above 0; SetPO's diversity signal is
  shown when SetPO beats the placebo on 1 - JS. The regime check says whether GRPO raised validity and whether it
  narrowed the answers (JS up) over the start.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce import evidence
from reproduce.common import RunDir, RunPlan, save_figure
from reproduce.contrast import (
    ProblemTable,
    apply_rule,
    contrast_row,
    end_diff,
    frontier_gap,
    frontier_values,
    per_seed_values,
)
from reproduce.evidence import cached_eval, checkpoint_steps, summary_table
from reproduce.stats import bootstrap_ci
from reproduce.tasks.smollm2 import load_policy, sample, train_arm
from setpo.metrics.diversity import js_divergence, js_to_uniform
from setpo.tasks.list_selection import VOCABULARY, extract_answer, is_valid, validity_reward

NAME = "smollm2_lists"
COMMAND = "python -m reproduce smollm2_lists --profile {profile}"
PROMPT = "Pick one word from the list.\nList: red, blue, green, pink.\nPick: green\nList: {items}.\nPick:"
CATEGORIES = tuple(c for c in VOCABULARY if c != "colour")
TRAIN_LISTS = 512
TEST_SIZE = 8


@dataclass(frozen=True)
class ListsProfile:
    """Sizes of one run of the experiment (the design is in the module docstring)."""

    n_test: int = 12
    group_size: int = 16
    seeds: int = 2
    rl_steps: int = 4
    prompts_per_step: int = 2
    rl_lr: float = 2e-4
    lora_r: int = 16
    ratio: float = 0.3
    frontier_points: int = 3
    max_completion_length: int = 6
    eval_n: int = 32
    eval_batch_size: int = 256

    @property
    def group_sizes(self) -> tuple[int, ...]:
        return (self.group_size,)

    def __post_init__(self):
        if self.n_test < 1 or self.group_size < 2 or self.seeds < 1 or self.rl_steps < 1 or not self.ratio > 0:
            raise ValueError("n_test >= 1, group_size >= 2, seeds >= 1, rl_steps >= 1 and ratio > 0 are needed")
        if self.frontier_points < 2:
            raise ValueError(f"frontier_points must be >= 2, got {self.frontier_points}")


PROFILES = {
    "smoke": ListsProfile(n_test=2, group_size=3, rl_steps=1, prompts_per_step=2, max_completion_length=3, eval_n=4,
                          lora_r=2),
    "quick": ListsProfile(n_test=4, group_size=8, rl_steps=2, eval_n=8),
    "full": ListsProfile(seeds=5, rl_steps=24, eval_n=32),
}  # fmt: skip


def arms(prof: ListsProfile) -> list[tuple[str, str, float, bool]]:
    """(name, reward, target ratio, placebo) of every arm."""
    r = f"{prof.ratio:g}"
    return [("grpo", "valid", 0.0, False), ("gapo", "gapo", 0.0, False), (f"setpo_r{r}", "valid", prof.ratio, False),
            (f"placebo_r{r}", "valid", prof.ratio, True)]  # fmt: skip


def make_lists(split: str, n: int) -> list[tuple[str, ...]]:
    """Item lists: train lists of 4-12 items (seed 0), test lists of 8 items (seed 1) that are no training list."""
    train = set()
    rng = random.Random(0)
    while len(train) < TRAIN_LISTS:
        train.add(tuple(rng.sample(VOCABULARY[rng.choice(CATEGORIES)], rng.randint(4, 12))))
    if split == "train":
        return sorted(train)[:n] if n < TRAIN_LISTS else sorted(train)
    rng, test = random.Random(1), []
    while len(test) < n:
        items = tuple(rng.sample(VOCABULARY[CATEGORIES[len(test) % len(CATEGORIES)]], TEST_SIZE))
        if items not in train and items not in test:
            test.append(items)
    return test


def prompt(items: tuple[str, ...]) -> str:
    return PROMPT.format(items=", ".join(items))


class AnswerOneHot:
    """Embeds the answer (the normalised first line; the text when empty) as a one-hot hashed vector."""

    def __init__(self):
        from setpo.embedders import HashedNgramEmbedder

        self.base = HashedNgramEmbedder(char_ngrams=(), word_ngrams=(1,))

    def __call__(self, texts):
        return self.base([(extract_answer(t) or t.strip() or "<empty>").replace(" ", "_") for t in texts])


def list_metrics(answers: list[str | None], items: tuple[str, ...]) -> dict:
    """GAPO's metrics of one list's answers: validity, JS to uniform (valid only / invalid as an outcome), counts."""
    valid = [a for a in answers if is_valid(a, items)]
    return {
        "validity": len(valid) / len(answers),
        "js_valid": js_to_uniform(valid, items) if valid else 1.0,  # no valid answer: as far from uniform as it gets
        "js_all": js_to_uniform([a or "" for a in answers], items, invalid="bucket"),
        "distinct": len(set(valid)),
        "first_item": sum(a == items[0] for a in valid) / len(answers),
        "counts": dict(Counter(valid)),
    }


def stage_rl(run: RunDir, prof: ListsProfile, arm: str, reward: str, ratio: float, placebo: bool, seed: int) -> Path:
    """One LoRA RL run from the start model; GRPO also saves its frontier adapters. Returns the final adapter."""
    rows = [{"prompt": prompt(items), "valid_answers": list(items)} for items in make_lists("train", TRAIN_LISTS)]
    saves = [s for s in checkpoint_steps(prof.rl_steps, prof.frontier_points) if 0 < s < prof.rl_steps]
    G = prof.group_size
    # GAPO's R~ (from the answers and the listed items) replaces the validity reward before the group normalisation
    gapo = {"method": {"diversity_method": "gapo"}, "answer_extractor": extract_answer} if reward == "gapo" else {}
    return train_arm(run, f"{arm}_s{seed}", rows, [validity_reward], None if gapo else AnswerOneHot(), prof=prof, G=G,
                     seed=seed, ratio=ratio, placebo=placebo, save_steps=saves if arm == "grpo" else (),
                     meta={"arm": arm}, **gapo)  # fmt: skip


def evaluate(adapter: Path | None, prof: ListsProfile) -> dict:
    """Per test list: GAPO's metrics of `eval_n` samples at T 1; and their means."""
    model, tok = load_policy(adapter)
    tests = make_lists("test", prof.n_test)
    samples = sample(model, tok, [prompt(t) for t in tests], prof.eval_n, 1.0, 1.0, prof.max_completion_length,
                     prof.eval_batch_size)  # fmt: skip
    per_list = [list_metrics([extract_answer(s) for s in row], items) for row, items in zip(samples, tests)]
    means = {k: float(np.mean([m[k] for m in per_list])) for k in METRICS if k != "uniformity"}
    return {**means, "per_list": per_list, "examples": [row[:4] for row in samples[:3]]}


#: Higher is better for validity, uniformity (1 - JS over valid answers) and distinct; lower for js_all, first_item.
METRICS = ("validity", "uniformity", "js_valid", "js_all", "distinct", "first_item")


def results_frame(evals: dict):
    """One row per evaluated model: arm, seed, step and the mean metrics."""
    import pandas as pd

    df = pd.DataFrame([{"arm": arm, "seed": seed, "step": step, **{k: m[k] for k in METRICS if k in m}}
                       for (arm, seed, step), m in evals.items()])  # fmt: skip
    df.insert(3, "uniformity", 1 - df.js_valid)
    return df


def per_list_frame(evals: dict):
    """One row per (evaluated model, test list, item): how often the item was answered (for recomputation)."""
    import pandas as pd

    rows = []
    for (arm, seed, step), m in evals.items():
        for i, pl in enumerate(m["per_list"]):
            rows.append({"arm": arm, "seed": seed, "step": step, "list": i, "item": "<invalid or none>",
                         "count": None, "validity": pl["validity"]})  # fmt: skip
            rows += [{"arm": arm, "seed": seed, "step": step, "list": i, "item": k, "count": c, "validity": None}
                     for k, c in pl["counts"].items()]  # fmt: skip
    return pd.DataFrame(rows)


def list_table(per_list) -> ProblemTable:
    """Per test list, the decided metrics of every evaluated model, from per_list.csv.gz: validity, uniformity
    (1 - JS to uniform over the TEST_SIZE listed items, valid answers only; 0 when none is valid), js_valid and
    distinct valid items. Keyed like the counts tables: (arm, G, seed, step, "T1_p1")."""
    cols: dict[tuple, dict[str, list[float]]] = {}
    sizes = set()
    for (arm, seed, step), g in per_list.groupby(["arm", "seed", "step"], sort=False):
        col: dict[str, list[float]] = {"validity": [], "js_valid": [], "distinct": []}
        for _, lst in g.groupby("list", sort=True):
            counts = lst[lst.item != INVALID]["count"].to_numpy(dtype=float)
            col["validity"].append(float(lst[lst.item == INVALID]["validity"].iloc[0]))
            col["distinct"].append(float(len(counts)))
            if counts.sum() == 0:
                col["js_valid"].append(1.0)  # no valid answer: as far from uniform as it gets (list_metrics)
                continue
            p = np.concatenate([counts, np.zeros(TEST_SIZE - len(counts))]) / counts.sum()
            col["js_valid"].append(js_divergence(p, np.full(TEST_SIZE, 1.0 / TEST_SIZE)))
        key = (str(arm), 16 if arm != "start" else 0, int(seed), int(step), "T1_p1")
        cols[key] = {k: np.asarray(v) for k, v in col.items()}
        cols[key]["uniformity"] = 1.0 - cols[key]["js_valid"]
        sizes.add(len(col["validity"]))
    if len(sizes) != 1:
        raise ValueError(f"every evaluated model needs the same test lists, got sizes {sorted(sizes)}")
    return ProblemTable(cols, sizes.pop())


INVALID = "<invalid or none>"
#: Declared families: GAPO's frontier claim alone, and SetPO beats the placebo (uniformity); minimum useful gap 0.02.
FAMILIES = {"gapo frontier": "gapo", "setpo frontier": "setpo", "placebo": "placebo"}
MIN_EFFECT = 0.02


def contrasts(per_list, prof: ListsProfile):
    """The pre-registered contrasts (module docstring) from the per-list counts, paired by seed, with the verdicts
    of `reproduce.stats.decide` (lists resampled with the seeds)."""
    import pandas as pd

    table = list_table(per_list)
    P, G, dec = table.n_problems, prof.group_size, "T1_p1"
    steps = prof.rl_steps
    seeds = sorted(k[2] for k in table.columns if k[0] == "grpo" and k[3] == steps)
    start = [("start", 0, -1, 0, dec)] * len(seeds)
    end = {a: [(a, 16, s, steps, dec) for s in seeds] for a, *_ in arms(prof)}
    paths = [[start[0]] + sorted((k for k in table.columns if k[0] == "grpo" and k[2] == s), key=lambda k: k[3])
             for s in seeds]  # fmt: skip
    row = {"G": G, "decoding": dec}
    out = [contrast_row(end_diff(table, end["grpo"], start, "validity"), P, family="regime validity", arm="grpo",
                        base=per_seed_values(table, start, "validity"), metric="validity",
                        claim="GRPO raises validity over its start (regime check)", **row),
           contrast_row(end_diff(table, end["grpo"], start, "js_valid"), P, family="regime narrows", arm="grpo",
                        base=per_seed_values(table, start, "js_valid"), metric="js_valid",
                        claim="GRPO narrows: JS over valid answers up from its start", **row)]  # fmt: skip
    for arm, *_ in arms(prof)[1:]:
        front = frontier_values(table, paths, end[arm], "validity", "uniformity")
        fam = None if arm.startswith("placebo") else f"{arm.split('_')[0]} frontier"
        out.append(contrast_row(frontier_gap(table, paths, end[arm], "validity", "uniformity"), P, family=fam,
                                min_effect=MIN_EFFECT if fam else None, base=front, ceiling=front, arm=arm,
                                claim=f"{arm} lies above GRPO's frontier", metric="uniformity gap", **row))  # fmt: skip
        for metric in ("validity", "uniformity", "js_valid", "distinct"):
            out.append(contrast_row(end_diff(table, end[arm], end["grpo"], metric), P, arm=arm,
                                    base=per_seed_values(table, end["grpo"], metric),
                                    claim=f"{arm} minus GRPO end point", metric=metric, **row))  # fmt: skip
    r = f"{prof.ratio:g}"
    for metric in ("validity", "uniformity", "js_valid", "distinct"):
        a, b = end[f"setpo_r{r}"], end[f"placebo_r{r}"]
        fam = "placebo" if metric == "uniformity" else None
        out.append(contrast_row(end_diff(table, a, b, metric), P, family=fam, min_effect=MIN_EFFECT if fam else None,
                                base=per_seed_values(table, b, metric), arm=f"setpo_r{r}",
                                claim=f"setpo_r{r} beats placebo_r{r}", metric=metric, **row))  # fmt: skip
    return pd.DataFrame(apply_rule(out))


def figure(run: RunDir, prof: ListsProfile, df) -> Path:
    """(validity, 1 - JS over valid answers): GRPO's path (mean over seeds), every arm's end point with 95% CIs."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    start = df[df.arm == "start"]
    path = df[df.arm == "grpo"].groupby("step")[["validity", "uniformity"]].mean()
    xs = [float(start.validity.iloc[0])] + list(path.validity)
    ys = [float(start.uniformity.iloc[0])] + list(path.uniformity)
    ax.plot(xs, ys, "-o", color="C0", label="GRPO path (checkpoints, mean over seeds)")
    ax.plot(xs[0], ys[0], "s", color="grey", ms=9, label="start")
    for i, (arm, *_) in enumerate(arms(prof)[1:]):
        e = df[(df.arm == arm) & (df.step == prof.rl_steps)]
        x, y = e.validity.to_numpy(), e.uniformity.to_numpy()
        if len(x) > 1:
            (_, xl, xh), (_, yl, yh) = bootstrap_ci(x), bootstrap_ci(y)
            ax.errorbar(x.mean(), y.mean(), xerr=[[x.mean() - xl], [xh - x.mean()]],
                        yerr=[[y.mean() - yl], [yh - y.mean()]], fmt="D", color=f"C{i + 1}", label=arm)  # fmt: skip
        else:
            ax.plot(x, y, "D", color=f"C{i + 1}", label=arm)
    ax.set_xlabel("validity")
    ax.set_ylabel("1 - JS to uniform (valid answers)")
    ax.set_title(f"SmolLM2-135M list selection, G={prof.group_size}, T 1 ({prof.seeds} seeds)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = save_figure(fig, run.path / "frontier", df)
    plt.close(fig)
    return out


def _execute(args: argparse.Namespace, prof: ListsProfile, plan: RunPlan) -> int:
    run = plan.start()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()

    evals = {("start", -1, 0): cached_eval(run, "start", lambda: evaluate(None, prof))}
    grid = [(s, a) for s in range(prof.seeds) for a in arms(prof)]
    for seed, (arm, reward, ratio, placebo) in tqdm(grid, desc=NAME, unit="run"):
        final = stage_rl(run, prof, arm, reward, ratio, placebo, seed)
        evals[(arm, seed, prof.rl_steps)] = cached_eval(run, f"{arm}_s{seed}", lambda f=final: evaluate(f, prof))
        if arm == "grpo":
            for step in checkpoint_steps(prof.rl_steps, prof.frontier_points)[1:-1]:
                ckpt = run.path / "adapters" / f"{arm}_s{seed}_ckpt" / f"step{step}"
                evals[(arm, seed, step)] = cached_eval(run, f"{arm}_s{seed}_step{step}",
                                                       lambda c=ckpt: evaluate(c, prof))  # fmt: skip

    df = results_frame(evals)
    run.write_csv("results.csv", df)
    per_list = per_list_frame(evals)
    run.write_csv("per_list.csv.gz", per_list, compression=evidence.GZIP)
    con = contrasts(per_list, prof)
    run.write_csv("contrasts.csv", con)
    setting = (
        f"Command: `{COMMAND.format(profile=args.profile)}`. SmolLM2-135M-Instruct with LoRA r {prof.lora_r}; "
        f"{prof.seeds} seeds per arm, paired by seed; {prof.n_test} test lists of {TEST_SIZE} items x n={prof.eval_n} "
        f"at T 1; RL {prof.rl_steps} steps x {prof.prompts_per_step} prompts x G={prof.group_size}, lr {prof.rl_lr:g}."
    )
    title = "GAPO's list selection on SmolLM2-135M: GRPO, GAPO, SetPO and its placebo"
    files = [figure(run, prof, df), summary_table(run, con, title, setting), run.path / "results.csv",
             run.path / "per_list.csv.gz", run.path / "contrasts.csv"]  # fmt: skip
    return plan.finish(run, t0, run.path / "summary.md", files)


build_parser, prepare, main = evidence.entry_points(NAME, __doc__, PROFILES, 2, lambda *a: _execute(*a))

if __name__ == "__main__":
    raise SystemExit(main())
