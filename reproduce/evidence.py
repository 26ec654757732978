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

from reproduce.common import PAPER_FIGURES, Parser, RunDir, RunPlan, UsageError, experiment_parser, save_figure
from reproduce.contrast import (
    ProblemTable,
    apply_rule,
    contrast_row,
    end_diff,
    fmt_ci,
    fmt_p,
    fmt_rel,
    frontier_gap,
    frontier_values,
    minus,
    per_seed_values,
)
from reproduce.stats import bootstrap_ci

#: GRPO's end point at T 1.0 is a reference for an arm sampled at the paper's decoding (sampling hotter is a GRPO knob)
OTHER_DECODING = {"T0.5_p0.9": "T1_p1"}
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


#: The declared families of the SetPO-vs-GRPO experiments; Holm's step-down runs within each, over every G and
#: decoding of one experiment. Each decided claim names the smallest gain it calls useful (`stats.decide`).
FAMILIES = {
    "frontier": "every SetPO arm lies above GRPO's frontier at pass@(n/2)",
    "placebo": "SetPO beats the placebo of the same credit size at pass@(n/2)",
    "regime": "GRPO raises pass@(n/2) over its start",
}
MIN_EFFECT = {"frontier": 0.02, "placebo": 0.02}


def decision_k(eval_n: int) -> int:
    """The decision metric's k: n/2 of the n evaluation samples, so that pass@k is not one Bernoulli per problem."""
    return max(1, eval_n // 2)


def report_ks(eval_n: int) -> list[int]:
    """Every k in 2..n/2 of the form 2^j, at which the frontier gap is reported (at k = 1 it is never above 0)."""
    return [2**j for j in range(1, eval_n.bit_length()) if 2**j <= decision_k(eval_n)]


def frontier_paths(table: ProblemTable, G: int, dec: str, seeds: list, rl_steps: int, start: tuple) -> list[list]:
    """Per seed, GRPO's frontier points: the start, then that seed's GRPO checkpoints and end point."""
    paths = []
    for s in seeds:
        steps = sorted(k[3] for k in table.columns if k[0] == "grpo" and k[1] == G and k[2] == s and k[4] == dec)
        paths.append([start] + [("grpo", G, s, st, dec) for st in steps if st <= rl_steps])
    return paths


def contrasts(per_problem, arm_names: list[str], rl_steps: int, placebo_ratio: float | None = None,
              other_decoding: dict[str, str] | None = None):  # fmt: skip
    """Every contrast of the SetPO-vs-GRPO experiments, per G and decoding, from the per-problem counts.

    ``arm_names``: GRPO first, then the SetPO arms and the placebo (``placebo_r<ratio>``). ``other_decoding`` maps a
    decoding to another whose GRPO end point is a reference too (GRPO sampled hotter: a GRPO knob beside less RL)."""
    import pandas as pd

    table = ProblemTable.from_counts(per_problem)
    P = table.n_problems
    n = int(per_problem.n.max())
    K = f"pass@{decision_k(n)}"
    r = None if placebo_ratio is None else f"{placebo_ratio:g}"
    out = []
    for G in sorted(g for g in per_problem.G.unique() if g != 0):
        for dec in sorted(per_problem.decoding.unique()):
            start = ("start", 0, -1, 0, dec)
            seeds = table.seeds("grpo", G, rl_steps, dec)
            if not seeds:
                continue
            end = {a: [(a, G, s, rl_steps, dec) for s in seeds] for a in arm_names}
            paths = frontier_paths(table, G, dec, seeds, rl_steps, start)
            row = dict(G=G, decoding=dec)  # noqa: C408
            regime = "GRPO raises pass@n over its start (regime check)"
            out.append(contrast_row(end_diff(table, end["grpo"], [start] * len(seeds), K), P, family="regime",
                                    base=per_seed_values(table, [start] * len(seeds), K), arm="grpo", claim=regime,
                                    metric=K, **row))  # fmt: skip
            for arm in arm_names[1:]:
                out += _arm_rows(table, paths, end, arm, seeds, n, (other_decoding or {}).get(dec), row)
            if r is not None and f"placebo_r{r}" in arm_names:
                out += _placebo_rows(table, paths, end[f"setpo_r{r}"], end[f"placebo_r{r}"], r, K, row)
    return pd.DataFrame(apply_rule(out))


def _arm_rows(table, paths, end: dict, arm: str, seeds: list, n: int, alt: str | None, row: dict) -> list[dict]:
    """One arm's rows: its frontier gap at every reported k, its differences to GRPO's end point, and to GRPO's
    end point sampled at the hotter decoding ``alt`` when every seed has it."""
    K = f"pass@{decision_k(n)}"
    rl_steps = end["grpo"][0][3]
    G = row["G"]
    control = arm.startswith("placebo")
    out = []
    for k in [decision_k(n)] + [k for k in report_ks(n) if k != decision_k(n)]:
        y = f"pass@{k}"
        gap = frontier_gap(table, paths, end[arm], "pass@1", y)
        front = frontier_values(table, paths, end[arm], "pass@1", y)
        decides = y == K and not control
        out.append(contrast_row(gap, table.n_problems, family="frontier" if decides else None, arm=arm,
                                min_effect=MIN_EFFECT["frontier"] if decides else None, base=front,
                                ceiling=front, claim=f"{arm} lies above GRPO's frontier",
                                metric=f"{y} gap", **row))  # fmt: skip
    for metric in dict.fromkeys(("pass@1", K, "distinct")):
        out.append(contrast_row(end_diff(table, end[arm], end["grpo"], metric), table.n_problems, arm=arm,
                                base=per_seed_values(table, end["grpo"], metric),
                                claim=f"{arm} minus GRPO end point", metric=metric, **row))  # fmt: skip
    hot = [("grpo", G, s, rl_steps, alt) for s in seeds]
    if alt and not control and all(table.has(k) for k in hot):
        for metric in ("pass@1", K):
            hotter = f"{arm} minus GRPO end point sampled at {alt}"
            out.append(contrast_row(end_diff(table, end[arm], hot, metric), table.n_problems, arm=arm,
                                    base=per_seed_values(table, hot, metric), metric=metric,
                                    claim=hotter, **row))  # fmt: skip
    return out


def _placebo_rows(table, paths, setpo: list, placebo: list, r: str, K: str, row: dict) -> list[dict]:
    """SetPO minus the placebo at the same ratio: at the end point (pass@K decides) and at matched pass@1."""
    claim = f"setpo_r{r} beats placebo_r{r}"
    out = []
    for metric in dict.fromkeys(("pass@1", K, "distinct")):
        decides = metric == K
        out.append(contrast_row(end_diff(table, setpo, placebo, metric), table.n_problems, arm=f"setpo_r{r}",
                                family="placebo" if decides else None,
                                min_effect=MIN_EFFECT["placebo"] if decides else None,
                                base=per_seed_values(table, placebo, metric), claim=claim, metric=metric,
                                **row))  # fmt: skip
    matched = minus(frontier_gap(table, paths, setpo, "pass@1", K),
                    frontier_gap(table, paths, placebo, "pass@1", K))  # fmt: skip
    out.append(contrast_row(matched, table.n_problems, arm=f"setpo_r{r}", claim=f"{claim} at matched pass@1",
                            metric=f"{K} gap minus placebo's", **row))  # fmt: skip
    return out


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
    """'up/n' of a contrast row, with the seeds at the ceiling when a frontier gap has any."""
    top = row.get("at_ceiling")
    top = 0 if top is None or top != top else int(top)  # NaN: not a frontier gap
    return f"{row['seeds_up']}/{row['n']}" + (f" ({top} at ceiling)" if top else "")


RULE = (
    "Each row: the mean paired difference over seeds; its relative size (over the reference's mean) with the "
    "Student-t CI's; the Student-t 95% CI; the exact two-sided sign-flip p; Holm's step-down p within the row's "
    "declared family (`reproduce.evidence.FAMILIES`; its size in brackets); the 95% bootstrap interval that "
    "resamples seeds and test problems together; seeds with a positive difference. Verdict (`reproduce.stats`): "
    "confirmed when the Holm p < 0.05 and both intervals lie above 0; refuted when the same holds below 0, or when "
    "both intervals end below the claim's minimum useful effect; too few seeds when the exact test cannot reach "
    "0.05 in the family; no difference when every gap is 0; '-' for descriptive rows. Frontier gaps name the seeds "
    "where GRPO's frontier is at the maximum 1."
)


def summary_lines(con) -> list[str]:
    """The markdown table of a contrasts frame (one line per contrast)."""
    lines = [
        "| G | decoding | claim | metric | n | mean | relative | t 95% CI | p | Holm p (family) | "
        "seeds x problems CI | seeds up | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in con.to_dict("records"):
        holm = "-" if not r["family"] else f"{fmt_p(r['p_holm'])} ({r['family']}, {r['family_size']})"
        verdict = r["verdict"] + (f" ({r['reason']})" if r.get("reason") else "")
        lines.append(f"| {r['G']} | {r['decoding']} | {r['claim']} | {r['metric']} | {r['n']} | {r['mean']:+.4f} | "
                     f"{fmt_rel(r)} | {fmt_ci(r['t_lo'], r['t_hi'], 4)} | {fmt_p(r['p_exact'])} | {holm} | "
                     f"{fmt_ci(r['boot_lo'], r['boot_hi'], 4)} | {seeds_up(r)} | {verdict} |")  # fmt: skip
    return lines


def write_summary(folder: Path, con, title: str, setting: str) -> Path:
    """summary.md in ``folder``: the title, the setting (command and sizes), the rule, and the table."""
    path = Path(folder) / "summary.md"
    path.write_text("\n".join([f"# {title}", "", f"{setting} {RULE}", "", *summary_lines(con)]) + "\n")
    return path


def summary_table(run: RunDir, con, title: str, setting: str) -> Path:
    """`write_summary` into the run folder (the file recorded as the run's first)."""
    run.claim("summary.md")
    return write_summary(run.path, con, title, setting)


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
    run.write_csv("results.csv", df)
    per_problem = per_problem_frame(evals)
    run.write_csv("per_problem.csv.gz", per_problem, compression=GZIP)
    con = contrasts(per_problem, [a for a, _, _ in arms(prof)], prof.rl_steps, prof.placebo_ratio, OTHER_DECODING)
    run.write_csv("contrasts.csv", con)
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
