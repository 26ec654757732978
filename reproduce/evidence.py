"""The evidence harness shared by the SetPO-vs-GRPO experiments: arms, GRPO's frontier, paired contrasts over seeds,
the decision rule's verdicts, the frontier figure and the summary table.

A profile passed here has ``group_sizes``, ``seeds``, ``rl_steps``, ``eval_n``, ``ratios`` and ``placebo_ratio``;
``evals`` maps (arm, G, seed, step) to {decoding: {"pass@k": {k: value}, "distinct": ..., "width": ...}}, with the
start model under ("start", 0, -1, 0) and GRPO's checkpoints under their steps.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from reproduce.common import PAPER_FIGURES, Parser, RunDir, RunPlan, UsageError, experiment_parser, save_figure
from reproduce.stats import bootstrap_ci, frontier_at, sign_flip_pvalue, verdict

#: gzip with a fixed timestamp, so the same counts give the same bytes
GZIP = {"method": "gzip", "mtime": 0}


def checkpoint_steps(rl_steps: int, points: int) -> list[int]:
    """GRPO steps whose checkpoints trace the frontier: ``points`` evenly spaced over 0..rl_steps (0 is the start)."""
    return sorted({round(j * rl_steps / (points - 1)) for j in range(points)})


def saved_steps(prof: Any) -> list[int]:
    """The frontier steps a GRPO run saves and evaluates itself (not the start, not its end)."""
    return [s for s in checkpoint_steps(prof.rl_steps, prof.frontier_points) if s not in (0, prof.rl_steps)]


def setpo_args(ratio: float, placebo: bool) -> dict[str, Any]:
    """SetPOConfig fields of an arm: plain GRPO for ratio 0, else lambda from the target ratio (and the placebo)."""
    if ratio == 0:
        return {"setpo_lambda": 0.0}
    return {"setpo_lambda": 1.0, "setpo_target_ratio": ratio, "setpo_placebo": placebo}


def arms(prof: Any) -> list[tuple[str, float, bool]]:
    """(name, target ratio, placebo) of every arm; GRPO has ratio 0."""
    out = [("grpo", 0.0, False)] + [(f"setpo_r{r:g}", r, False) for r in prof.ratios]
    return out + [(f"placebo_r{prof.placebo_ratio:g}", prof.placebo_ratio, True)]


def checkpoint_callback(steps: set[int], folder: Path, tokenizer):
    from transformers import TrainerCallback

    class SaveAt(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step in steps:
                model.save_pretrained(folder / f"step{state.global_step}")
                tokenizer.save_pretrained(folder / f"step{state.global_step}")

    return SaveAt()


def results_frame(prof: Any, evals: dict):
    """One row per (evaluated model, decoding): G, seed, arm, GRPO step, pass@k, distinct, width."""
    import pandas as pd

    rows = []
    for (arm, G, seed, step), metrics in evals.items():
        for dec, m in metrics.items():
            row = {"arm": arm, "G": G, "seed": seed, "step": step, "decoding": dec, "distinct": m["distinct"],
                   "width": m["width"]}  # fmt: skip
            row.update({f"pass@{k}": v for k, v in m["pass@k"].items()})
            rows.append(row)
    return pd.DataFrame(rows)


def paired(G: int, decoding: str, claim: str, metric: str, diffs, decides: bool = True,
           at_ceiling: int | None = None) -> dict:  # fmt: skip
    """One contrast row: mean paired difference, 95% bootstrap CI, sign-flip p, seeds up, and the verdict when the
    contrast is one of the decision rule's claims (descriptive contrasts such as the pass@1 cost get none).

    ``at_ceiling``: for a frontier gap, the seeds whose frontier sits at the metric's maximum 1 (no gap above 0
    possible there); every seed at the ceiling makes the claim untestable rather than refuted."""
    mean, lo, hi = bootstrap_ci(diffs)
    row = {"G": G, "decoding": decoding, "claim": claim, "metric": metric, "mean": mean, "lo": lo, "hi": hi,
           "p_signflip": sign_flip_pvalue(diffs), "seeds_up": int(np.sum(np.asarray(diffs) > 0)),
           "seeds": len(diffs), "verdict": verdict(lo, hi, at_ceiling == len(diffs)) if decides else "-"}  # fmt: skip
    if at_ceiling is not None:
        row["at_ceiling"] = at_ceiling
    return row


def frontier_gaps(grpo, start, end, seeds, x: str, y: str) -> tuple[list[float], int]:
    """Per seed, an arm's ``y`` minus GRPO's frontier (`frontier_at`, through the start and that seed's GRPO
    checkpoints, rows of ``grpo``) at the arm's ``x``; and how many seeds have that frontier at y's maximum 1."""
    gaps, ceiling = [], 0
    for s in seeds:
        path = grpo[grpo.seed == s]
        f = frontier_at([(start[x], start[y])] + list(zip(path[x], path[y])), end.loc[s, x])
        gaps.append(float(end.loc[s, y] - f))
        ceiling += int(f >= 1.0)
    return gaps, ceiling


def contrasts(df, prof: Any):
    """Every pre-registered contrast (module docstring) per G and decoding, paired by seed."""
    import pandas as pd

    kmax = f"pass@{prof.eval_n}"
    r = f"{prof.placebo_ratio:g}"
    out = []
    for G in prof.group_sizes:
        for dec in df.decoding.unique():
            d = df[(df.G == G) & (df.decoding == dec)]
            end = {a: d[(d.arm == a) & (d.step == prof.rl_steps)].set_index("seed") for a, _, _ in arms(prof)}
            start = df[(df.arm == "start") & (df.decoding == dec)].iloc[0]
            seeds = sorted(end["grpo"].index)

            def diff(a: str, b: str, metric: str, end=end, seeds=seeds) -> list[float]:
                return [end[a].loc[s, metric] - end[b].loc[s, metric] for s in seeds]

            regime = [end["grpo"].loc[s, kmax] - start[kmax] for s in seeds]
            out.append(paired(G, dec, "GRPO raises pass@n over its start (regime check)", kmax, regime))
            for arm, _, _ in arms(prof)[1:]:
                gaps, top = frontier_gaps(d[d.arm == "grpo"], start, end[arm], seeds, "pass@1", kmax)
                out.append(paired(G, dec, f"{arm} lies above GRPO's frontier", f"{kmax} gap", gaps, at_ceiling=top))
                for metric in ("pass@1", kmax, "distinct"):
                    diffs = diff(arm, "grpo", metric)
                    out.append(paired(G, dec, f"{arm} minus GRPO end point", metric, diffs, decides=False))
            for metric in ("pass@1", kmax, "distinct"):
                claim = f"setpo_r{r} beats placebo_r{r}"
                diffs = diff(f"setpo_r{r}", f"placebo_r{r}", metric)
                out.append(paired(G, dec, claim, metric, diffs, decides=metric == kmax))
    return pd.DataFrame(out)


def figure_frontier(run: RunDir, prof: Any, df) -> Path:
    """(pass@1, pass@n) per G and decoding: GRPO's path (mean over seeds), every arm's end point with 95% CIs."""
    import matplotlib.pyplot as plt

    kmax = f"pass@{prof.eval_n}"
    decs = list(df.decoding.unique())
    fig, axes = plt.subplots(len(prof.group_sizes), len(decs), figsize=(5 * len(decs), 4 * len(prof.group_sizes)),
                             squeeze=False)  # fmt: skip
    colors = {"grpo": "C0", "start": "grey"} | {a: f"C{i + 1}" for i, (a, _, _) in enumerate(arms(prof)[1:])}
    for r, G in enumerate(prof.group_sizes):
        for c, dec in enumerate(decs):
            ax, d = axes[r][c], df[(df.decoding == dec) & ((df.G == G) | (df.arm == "start"))]
            start = d[d.arm == "start"]
            path = d[d.arm == "grpo"].groupby("step")[["pass@1", kmax]].mean()
            path = [(float(start["pass@1"].iloc[0]), float(start[kmax].iloc[0]))] + list(path.itertuples(index=False))
            ax.plot(*zip(*path), "-o", color=colors["grpo"], label="GRPO path (checkpoints, mean over seeds)")
            ax.plot(start["pass@1"], start[kmax], "s", color="grey", ms=9, label="start model")
            for arm, _, _ in arms(prof)[1:]:
                e = d[(d.arm == arm) & (d.step == prof.rl_steps)]
                x, y = e["pass@1"].to_numpy(), e[kmax].to_numpy()
                if len(x) > 1:
                    (_, xl, xh), (_, yl, yh) = bootstrap_ci(x), bootstrap_ci(y)
                    xerr, yerr = [[x.mean() - xl], [xh - x.mean()]], [[y.mean() - yl], [yh - y.mean()]]
                    ax.errorbar(x.mean(), y.mean(), xerr=xerr, yerr=yerr, fmt="D", color=colors[arm], label=arm)
                else:
                    ax.plot(x, y, "D", color=colors[arm], label=arm)
            ax.set_title(f"G={G}, {dec} ({prof.seeds} seeds)", fontsize=9)
            ax.set_xlabel("pass@1")
            ax.set_ylabel(kmax)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path = save_figure(fig, run.path / "frontier", df)
    plt.close(fig)
    return path


def seeds_up(row: dict) -> str:
    """'up/seeds' of a contrast row, with the seeds at the ceiling when a frontier gap has any."""
    top = row.get("at_ceiling")
    top = 0 if top is None or top != top else int(top)  # NaN: not a frontier gap
    return f"{row['seeds_up']}/{row['seeds']}" + (f" ({top} at ceiling)" if top else "")


def summary_table(run: RunDir, con, title: str, setting: str) -> Path:
    """Markdown: one line per contrast with its CI, p-value and verdict; ``setting`` names the command and sizes."""
    lines = [
        f"# {title}",
        "",
        f"{setting} Mean paired difference [95% bootstrap CI], exact sign-flip p, seeds with a positive difference. "
        "Verdict: confirmed (CI above 0), refuted (CI at or below 0), inconclusive; '-' for descriptive contrasts. "
        "Frontier gaps name the seeds where GRPO's frontier is at the metric's maximum 1 (no arm can lie above it).",
        "",
        "| G | decoding | claim | metric | mean [95% CI] | p | seeds up | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in con.itertuples():
        lines.append(f"| {r.G} | {r.decoding} | {r.claim} | {r.metric} | {r.mean:+.4f} [{r.lo:+.4f}, {r.hi:+.4f}] | "
                     f"{r.p_signflip:.3f} | {seeds_up(r._asdict())} | {r.verdict} |")  # fmt: skip
    path = run.path / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def per_problem_frame(evals: dict):
    """One row per (evaluated model, decoding, test problem): n samples, n correct, n distinct correct answers."""
    import pandas as pd

    rows = []
    for (arm, G, seed, step), metrics in evals.items():
        for dec, m in metrics.items():
            for i, (c, d) in enumerate(zip(m["n_correct"], m["n_distinct"])):
                rows.append({"arm": arm, "G": G, "seed": seed, "step": step, "decoding": dec, "problem": i,
                             "n": m["n"], "n_correct": c, "n_distinct": d})  # fmt: skip
    return pd.DataFrame(rows)


def analyse(run: RunDir, prof: Any, evals: dict, title: str, setting: str) -> list[Path]:
    """results.csv, per_problem.csv.gz (the counts every metric is computed from), contrasts.csv, frontier.png and
    summary.md in the run folder; returns their paths."""
    df = results_frame(prof, evals)
    df.to_csv(run.path / "results.csv", index=False)
    per_problem_frame(evals).to_csv(run.path / "per_problem.csv.gz", index=False, compression=GZIP)
    con = contrasts(df, prof)
    con.to_csv(run.path / "contrasts.csv", index=False)
    return [figure_frontier(run, prof, df), summary_table(run, con, title, setting), run.path / "results.csv",
            run.path / "per_problem.csv.gz", run.path / "contrasts.csv"]  # fmt: skip


# --------------------------------------------------------------------------- the experiments' shared plumbing


def cached_eval(run: RunDir, name: str, evaluate: Callable[[], dict]) -> dict:
    """The metrics of step ``eval_<name>``: computed by ``evaluate()`` once, read back from the run folder after."""
    if not run.done(f"eval_{name}"):
        t0 = time.perf_counter()
        metrics = evaluate()
        run.save(f"eval_{name}", {"metrics": metrics, "wall_s": time.perf_counter() - t0})
    return run.load(f"eval_{name}")["metrics"]


def publish_size(prof: Any) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {"seeds": prof.seeds, "rl_steps": prof.rl_steps, "eval_n": prof.eval_n, "group_sizes": len(prof.group_sizes)}


def build_parser(name: str, description: str, profiles: dict, threads: int) -> Parser:
    """The options of an evidence experiment: --profile, --seeds (N >= 2), --threads and the run-folder options."""
    return experiment_parser(name, description, profiles, seeds="seeds per arm: 0..N-1, N >= 2 (default: the "
                             "profile's)", threads=threads)  # fmt: skip


def entry_points(name: str, doc: str, profiles: dict, threads: int, execute: Callable[..., int]) -> tuple:
    """(build_parser, prepare, main) of an evidence experiment whose run is ``execute(args, profile, plan)``."""

    def build_parser_() -> Parser:
        """The command-line options."""
        return build_parser(name, doc.strip().splitlines()[0], profiles, threads)

    def prepare(argv: list[str] | None = None) -> Callable[[], int]:
        """Parse and check every option and the run folder (writing nothing); returns the run to start."""
        args = build_parser_().parse_args(argv)
        prof, plan = check_run(args, name, profiles)
        return lambda: execute(args, prof, plan)

    def main(argv: list[str] | None = None) -> int:
        """Command line (see the module docstring)."""
        return prepare(argv)()

    return build_parser_, prepare, main


#: Seeds are independent runs keyed by their number: a run grows by more seeds, and its first seeds are a run too.
EXTEND = ("seeds",)


def check_run(args: argparse.Namespace, name: str, profiles: dict) -> tuple[Any, RunPlan]:
    """(profile, checked run plan) of parsed options: the folder and any publish checked, nothing written."""
    prof = profiles[args.profile]
    if args.seeds is not None:
        if args.seeds < 2:
            raise UsageError("--seeds must be >= 2 (the statistics are paired over seeds)")
        prof = replace(prof, seeds=args.seeds)
    config = {"profile": args.profile, **asdict(prof)}
    return prof, RunPlan.check(args, name, args.profile, config, publish_size(prof), PAPER_FIGURES, extend=EXTEND)
