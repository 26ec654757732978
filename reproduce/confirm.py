"""The analysis of a pre-registered confirmatory experiment (GRPO, SetPO and the placebo at one ratio, one G).

H1 (SetPO above GRPO's frontier built from its checkpoints and a temperature sweep of its end point) and H2 (SetPO
beats the placebo at matched pass@1) form one Holm family; H3 (SetPO's pass@1 minus GRPO's) is reported. Everything
is computed from the per-problem counts (`reproduce.contrast`) and decided by `reproduce.stats.decide`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reproduce import evidence
from reproduce.common import RunDir, UsageError, save_figure
from reproduce.contrast import (
    ProblemTable,
    apply_rule,
    contrast_row,
    end_diff,
    frontier_gap,
    frontier_values,
    minus,
    per_seed_values,
)

PAPER = "T0.5_p0.9"
FAMILY, MIN_EFFECT = "H1-H2", 0.02
ARMS = ("grpo", "setpo_r0.3", "placebo_r0.3")


def dec_name(T: float, top_p: float) -> str:
    """A decoding's name in the result files, e.g. T0.5_p0.9."""
    return f"T{T:g}_p{top_p:g}"


@dataclass(frozen=True)
class Design:
    """What the analysis needs from a design: its G, RL steps, samples per problem, seeds and GRPO's sweep."""

    G: int
    rl_steps: int
    n: int
    seeds: int
    sweep: tuple[str, ...]  # GRPO's end point at these decodings, besides PAPER


def _paths(table: ProblemTable, d: Design, seeds: list) -> list[list]:
    start = ("start", 0, -1, 0, PAPER)
    return [p + [("grpo", d.G, s, d.rl_steps, dec) for dec in d.sweep]
            for p, s in zip(evidence.frontier_paths(table, d.G, PAPER, seeds, d.rl_steps, start), seeds)]  # fmt: skip


def contrasts(per_problem, d: Design):
    """H1, H2 (one Holm family), H3 and the descriptive contrasts, from the per-problem counts."""
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    P, G = table.n_problems, d.G
    K = f"pass@{evidence.decision_k(d.n)}"
    seeds = table.seeds("grpo", G, d.rl_steps, PAPER)
    if len(seeds) != d.seeds:
        raise UsageError(f"the design fixes {d.seeds} seeds; {len(seeds)} are done: no interim analysis")
    paths = _paths(table, d, seeds)
    end = {a: [(a, G, s, d.rl_steps, PAPER) for s in seeds] for a in ARMS}
    row = {"G": G, "decoding": PAPER}
    out = []
    for arm in ARMS[1:]:
        for k in [evidence.decision_k(d.n)] + [k for k in evidence.report_ks(d.n) if k != evidence.decision_k(d.n)]:
            y = f"pass@{k}"
            front = frontier_values(table, paths, end[arm], "pass@1", y)
            h1 = arm == "setpo_r0.3" and y == K
            out.append(contrast_row(frontier_gap(table, paths, end[arm], "pass@1", y), P, arm=arm, base=front,
                                    ceiling=front, family=FAMILY if h1 else None, min_effect=MIN_EFFECT if h1 else None,
                                    claim=("H1: " if h1 else "") + f"{arm} lies above GRPO's frontier (checkpoints "
                                    "and temperature sweep)", metric=f"{y} gap", **row))  # fmt: skip
    matched = minus(frontier_gap(table, paths, end["setpo_r0.3"], "pass@1", K),
                    frontier_gap(table, paths, end["placebo_r0.3"], "pass@1", K))  # fmt: skip
    h2 = "H2: setpo_r0.3 beats placebo_r0.3 at matched pass@1"
    out.append(contrast_row(matched, P, family=FAMILY, min_effect=MIN_EFFECT, arm="setpo_r0.3",
                            metric=f"{K} gap minus placebo's", claim=h2, **row))  # fmt: skip
    for metric in dict.fromkeys(("pass@1", K, "distinct")):
        for arm in ARMS[1:]:
            h3 = "H3: " if metric == "pass@1" and arm == "setpo_r0.3" else ""
            out.append(contrast_row(end_diff(table, end[arm], end["grpo"], metric), P, arm=arm, metric=metric,
                                    base=per_seed_values(table, end["grpo"], metric),
                                    claim=f"{h3}{arm} minus GRPO end point", **row))  # fmt: skip
        out.append(contrast_row(end_diff(table, end["setpo_r0.3"], end["placebo_r0.3"], metric), P, metric=metric,
                                base=per_seed_values(table, end["placebo_r0.3"], metric), arm="setpo_r0.3",
                                claim="setpo_r0.3 minus placebo_r0.3 (raw)", **row))  # fmt: skip
    for dec in d.sweep:
        hotter = [("grpo", G, s, d.rl_steps, dec) for s in seeds]
        out.append(contrast_row(end_diff(table, end["setpo_r0.3"], hotter, K), P, arm="setpo_r0.3", metric=K,
                                claim=f"setpo_r0.3 minus GRPO end point sampled at {dec}", **row))  # fmt: skip
    return pd.DataFrame(apply_rule(out))


def _points(table: ProblemTable, keys: Sequence, metrics: Sequence[str]):
    import pandas as pd

    w = np.full((1, table.n_problems), 1.0 / table.n_problems)
    return pd.DataFrame([{"arm": k[0], "seed": k[2], "step": k[3], "decoding": k[4],
                          **{m: float(table.mean(w, k, m)[0]) for m in metrics}} for k in keys])  # fmt: skip


def passk_curve(per_problem, d: Design):
    """pass@k for k = 1..n/2 of every arm's end point at the paper's decoding and of the start, per seed."""
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    w = np.full((1, table.n_problems), 1.0 / table.n_problems)
    rows = []
    for key in table.columns:
        if key[4] == PAPER and (key[0] == "start" or key[3] == d.rl_steps):
            for k in range(1, evidence.decision_k(d.n) + 1):
                rows.append({"arm": key[0], "seed": key[2], "k": k,
                             "pass@k": float(table.mean(w, key, f"pass@{k}")[0])})  # fmt: skip
    return pd.DataFrame(rows)


def figure(run: RunDir, per_problem, d: Design, title: str) -> Path:
    """GRPO's frontier points (mean over seeds) with SetPO and the placebo on it, (pass@1, pass@n/2) at T 0.5."""
    import matplotlib.pyplot as plt

    table = ProblemTable.from_counts(per_problem)
    K = f"pass@{evidence.decision_k(d.n)}"
    pts = _points(table, list(table.columns), ["pass@1", K])
    fig, ax = plt.subplots(figsize=(6, 4.5))
    path = pts[(pts.arm == "grpo") & (pts.decoding == PAPER)].groupby("step")[["pass@1", K]].mean()
    start = pts[(pts.arm == "start") & (pts.decoding == PAPER)]
    ax.plot([start["pass@1"].iloc[0], *path["pass@1"]], [start[K].iloc[0], *path[K]], "-o", color="C0",
            label="GRPO: start and checkpoints, T 0.5")  # fmt: skip
    hot = pts[(pts.arm == "grpo") & (pts.decoding != PAPER)].groupby("decoding")[["pass@1", K]].mean()
    ax.plot(hot["pass@1"], hot[K], "s", color="C0", mfc="none", label="GRPO end, hotter sampling")
    for dec, r in hot.iterrows():
        ax.annotate(dec.split("_")[0], (r["pass@1"], r[K]), fontsize=7)
    for arm, c in (("setpo_r0.3", "C1"), ("placebo_r0.3", "C2")):
        e = pts[(pts.arm == arm) & (pts.decoding == PAPER)]
        ax.plot(e["pass@1"], e[K], ".", color=c, alpha=0.3)
        ax.plot(e["pass@1"].mean(), e[K].mean(), "D", color=c, ms=8, label=f"{arm} (seeds, mean)")
    ax.set_xlabel("pass@1")
    ax.set_ylabel(K)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = save_figure(fig, run.path / "frontier", pts)
    plt.close(fig)
    return out
