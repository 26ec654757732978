"""Figure 1: the multi-modal bandit. GRPO collapses onto one correct mode; SetPO+GRPO keeps several.

    python -m reproduce toy_bandit --profile quick [--seeds N] [--out DIR] [--overwrite] [--publish [--force-publish]]

Writes, under the run folder: fig1_toy_bandit.png (PCA of sampled trajectory embeddings coloured by
step, stars at the correct modes; GRPO left, SetPO right), mode_probs.png/.csv (per-step mode
probabilities, mean and sd over runs; every run in mode_probs_runs.csv), summary.csv/.md (correct modes
kept above 5% and entropy over correct modes, per run and mean), lambda_sweep.png/.csv (where SetPO's
benefit starts and where it costs reward).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from reproduce.common import (
    PAPER_FIGURES,
    Parser,
    RunDir,
    RunExistsError,
    RunPlan,
    chosen_config,
    cli,
    experiment_parser,
    save_figure,
)
from reproduce.tasks.toy_bandit import (
    BanditConfig,
    correct_entropy,
    correct_mass,
    mode_embeddings,
    modes_kept,
    train_bandit,
)

NAME = "toy_bandit"
KEEP_THRESHOLD = 0.05


@dataclass(frozen=True)
class ToyProfile:
    """Experiment size. `lam` is the SetPO weight of the main comparison; `sweep` the lambdas of the sweep."""

    seeds: int  # replicate runs per method, trained side by side from one generator
    bandit: BanditConfig
    lam: float
    sweep: tuple[float, ...]
    sweep_seeds: int
    seed: int = 0  # generator seed shared by every method and lambda


PROFILES = {
    "smoke": ToyProfile(seeds=2, bandit=BanditConfig(steps=5), lam=16.0, sweep=(0.0, 16.0), sweep_seeds=2),
    "quick": ToyProfile(
        seeds=5,
        bandit=BanditConfig(steps=200),
        lam=16.0,
        sweep=(0.0, 2.0, 4.0, 8.0, 10.0, 12.0, 16.0, 32.0, 64.0, 128.0),
        sweep_seeds=5,
    ),
    "full": ToyProfile(
        seeds=20,
        bandit=BanditConfig(steps=400),
        lam=16.0,
        sweep=(0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 9.0, 10.0, 11.0, 12.0, 14.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0),
        sweep_seeds=20,
    ),
}


def _summaries(probs_end: torch.Tensor, n_correct: int) -> list[dict]:
    """Per-replicate end-of-training metrics from (R, M) final probabilities."""
    kept = modes_kept(probs_end, n_correct, KEEP_THRESHOLD)
    ent = correct_entropy(probs_end, n_correct)
    rew = correct_mass(probs_end, n_correct)
    return [
        {
            "seed": r,
            "modes_kept": int(kept[r]),
            "correct_entropy": float(ent[r]),
            "expected_reward": float(rew[r]),
            "final_probs": probs_end[r].tolist(),
        }
        for r in range(probs_end.shape[0])
    ]


def _train(run: RunDir, prof: ToyProfile, step: str, lam: float, replicates: int, bar, keep_samples: bool) -> dict:
    """One resumable unit: `replicates` runs at one lambda (all seeds of one method)."""
    if run.done(step):
        bar.update(prof.bandit.steps * replicates)
        return run.load(step)
    cfg = replace(prof.bandit, lam=lam)
    res = train_bandit(cfg, seed=prof.seed, replicates=replicates, mu=mode_embeddings(cfg), progress=bar)
    out = {"lam": lam, "runs": _summaries(res.probs[-1], cfg.n_correct)}
    if keep_samples:
        out["probs"] = res.probs.transpose(0, 1).tolist()  # (R, steps + 1, M)
        run.torch_save(
            {"modes": res.sampled_modes, "emb": res.sampled_embeddings, "steps": res.sampled_steps},
            f"samples_{step}.pt",
        )
    return run.save(step, out)  # as a resumed run reads it: the same columns in every table


def _samples(run: RunDir, step: str) -> dict:
    """The samples kept by `step`; a missing or damaged file is a one-line error naming the step to redo."""
    path = run.path / f"samples_{step}.pt"
    try:
        return torch.load(path)
    except Exception as err:  # noqa: BLE001 - a damaged pickle can raise anything; the message names the file
        if os.environ.get("SETPO_TRACEBACK"):
            raise
        why = "missing" if not path.exists() else f"damaged ({' '.join(str(err).split())[:120]})"
        raise RunExistsError(
            f"{path} is {why}; delete {run.path / 'steps' / f'{step}.json'} (and that file) to redo the step"
        ) from None


def _pca_figure(run: RunDir, prof: ToyProfile):
    import matplotlib.pyplot as plt
    import pandas as pd

    cfg = prof.bandit
    mu = mode_embeddings(cfg)
    samples = {m: _samples(run, m) for m in ("grpo", "setpo")}
    X = torch.cat([samples["grpo"]["emb"], samples["setpo"]["emb"], mu]).numpy()
    centre = X.mean(0)
    _, _, vt = np.linalg.svd(X - centre, full_matrices=False)  # one shared projection for both panels
    proj = lambda a: (a - centre) @ vt[:2].T
    mu2 = proj(mu.numpy())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), sharex=True, sharey=True)
    rows = []
    for ax, m, title in zip(axes, ("grpo", "setpo"), ("GRPO", f"SetPO+GRPO ($\\lambda$={prof.lam:g})")):
        xy = proj(samples[m]["emb"].numpy())
        st = samples[m]["steps"].numpy()
        jitter = np.random.default_rng(0).normal(scale=0.02, size=xy.shape)
        sc = ax.scatter(*(xy + jitter).T, c=st, cmap="viridis", s=8, alpha=0.6)
        ax.scatter(*mu2[cfg.n_correct :].T, marker="x", c="grey", s=50, label="incorrect modes")
        ax.scatter(*mu2[: cfg.n_correct].T, marker="*", c="red", s=260, edgecolors="k", label="correct modes")
        ax.set_title(title)
        ax.set_xlabel("PC 1")
        rows += [
            {"method": m, "step": int(s), "mode": int(k), "pc1": float(a), "pc2": float(b)}
            for s, k, (a, b) in zip(st, samples[m]["modes"].numpy(), xy)
        ]
    axes[0].set_ylabel("PC 2")
    axes[0].legend(loc="best", fontsize=8)
    fig.colorbar(sc, ax=axes, label="training step")
    fig.suptitle(f"Toy bandit: {cfg.n_modes} modes, first {cfg.n_correct} rewarded; sampled trajectories (run 0)")
    rows += [
        {"method": "mode_centre", "step": -1, "mode": k, "pc1": float(a), "pc2": float(b)}
        for k, (a, b) in enumerate(mu2)
    ]
    path = save_figure(fig, run.path / "fig1_toy_bandit", pd.DataFrame(rows))
    plt.close(fig)
    return path


def _probs_figure(run: RunDir, prof: ToyProfile, results: dict):
    import matplotlib.pyplot as plt
    import pandas as pd

    cfg = prof.bandit
    rows = []
    for method, r in results.items():
        for seed, traj in enumerate(r["probs"]):
            for t, p in enumerate(traj):
                rows += [{"method": method, "seed": seed, "step": t, "mode": k, "prob": v} for k, v in enumerate(p)]
    df = pd.DataFrame(rows)
    run.write_csv("mode_probs_runs.csv", df)  # every run; kept in the run folder only
    # Beside the figure: per step and mode, mean and sd over runs (one row per method and step).
    stats = df.groupby(["method", "step", "mode"]).prob.agg(["mean", "std"]).fillna(0.0).unstack("mode")
    stats.columns = [f"mode{k}_{stat}" for stat, k in stats.columns]
    stats = stats.reset_index().round(6)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, method in zip(axes, ("grpo", "setpo")):
        d = df[(df.method == method) & (df["mode"] < cfg.n_correct)]
        mean = d.groupby(["step", "mode"]).prob.mean().unstack()
        for k in mean.columns:
            ax.plot(mean.index, mean[k], label=f"correct mode {k}")
        wrong = df[(df.method == method) & (df["mode"] >= cfg.n_correct)].groupby(["step", "seed"]).prob.sum()
        ax.plot(wrong.groupby("step").mean(), "k--", label="all incorrect modes")
        ax.axhline(KEEP_THRESHOLD, color="grey", lw=0.8, ls=":")
        name = "GRPO" if method == "grpo" else f"SetPO+GRPO (λ={prof.lam:g})"
        ax.set_title(f"{name}, mean over {prof.seeds} runs")
        ax.set_xlabel("training step")
    axes[0].set_ylabel("probability")
    axes[0].legend(fontsize=8)
    path = save_figure(fig, run.path / "mode_probs", stats)
    plt.close(fig)
    return path


def _sweep(run: RunDir, prof: ToyProfile, bar) -> list[dict]:
    rows = []
    for lam in prof.sweep:
        r = _train(run, prof, f"sweep_lam{lam:g}", lam, prof.sweep_seeds, bar, keep_samples=False)
        rows += [{"lam": lam, **{k: v for k, v in x.items() if k != "final_probs"}} for x in r["runs"]]
    return rows


def _sweep_figure(run: RunDir, prof: ToyProfile, rows: list[dict]):
    import matplotlib.pyplot as plt
    import pandas as pd

    df = pd.DataFrame(rows)
    agg = df.groupby("lam").agg(["mean", "std"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, col, label in zip(
        axes,
        ("modes_kept", "correct_entropy", "expected_reward"),
        (f"correct modes > {KEEP_THRESHOLD:.0%}", "entropy over correct modes (nats)", "expected reward"),
    ):
        x = agg.index.to_numpy()
        ax.errorbar(x, agg[col]["mean"], yerr=agg[col]["std"].fillna(0), marker="o", capsize=3)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel("$\\lambda$")
        ax.set_ylabel(label)
    axes[1].axhline(np.log(prof.bandit.n_correct), color="grey", ls=":", lw=0.8)
    fig.suptitle(f"Lambda sweep, {prof.sweep_seeds} runs per lambda, {prof.bandit.steps} steps (lambda=0 is GRPO)")
    fig.tight_layout()
    path = save_figure(fig, run.path / "lambda_sweep", df)
    plt.close(fig)
    return path


def _summary_tables(run: RunDir, prof: ToyProfile, results: dict) -> list[Path]:
    import pandas as pd

    df = pd.DataFrame(
        [
            {"method": m, "lam": r["lam"], **{k: v for k, v in x.items() if k != "final_probs"}}
            for m, r in results.items()
            for x in r["runs"]
        ]
    )
    run.write_csv("summary.csv", df)
    agg = df.groupby("method")[["modes_kept", "correct_entropy", "expected_reward"]].agg(["mean", "std"])
    cfg = prof.bandit
    lines = [
        "# Toy bandit (paper Figure 1)",
        "",
        f"Scale: {cfg.n_modes} modes ({cfg.n_correct} rewarded), {cfg.dim}-d unit mode embeddings, per-sample noise "
        f"{cfg.sample_noise}, cosine kernel, g = {cfg.shaping}; softmax policy over modes, plain SGD lr {cfg.lr}, "
        f"{cfg.steps} steps of {cfg.groups_per_step} groups x G={cfg.group_size}; {prof.seeds} runs per method "
        f"(one generator, seed {prof.seed}, shared by both methods). Initial policy (as after SFT): "
        f"pi(mode 0) = {cfg.init_dominant}, each other correct mode {cfg.init_other_correct}, incorrect modes "
        "share the rest. "
        f"SetPO lambda = {prof.lam:g} (the credit "
        "scale depends on the kernel; see lambda_sweep).",
        "",
        "The paper shows this toy only as a figure (GRPO collapses onto one correct mode, SetPO keeps several); "
        "it reports no numbers for it.",
        "",
        f"| method | correct modes > {KEEP_THRESHOLD:.0%} (of {cfg.n_correct}) | entropy over correct modes "
        f"(nats, max {np.log(cfg.n_correct):.3f}) | expected reward |",
        "|---|---|---|---|",
    ]
    for method in ("grpo", "setpo"):
        a = agg.loc[method]
        per_seed = df[df.method == method].sort_values("seed").modes_kept.tolist()
        lines.append(
            f"| {'GRPO' if method == 'grpo' else 'SetPO+GRPO'} | "
            f"{a.modes_kept['mean']:.2f} +- {a.modes_kept['std']:.2f} "
            f"(per run {per_seed}) | {a.correct_entropy['mean']:.3f} +- {a.correct_entropy['std']:.3f} | "
            f"{a.expected_reward['mean']:.3f} +- {a.expected_reward['std']:.3f} |"
        )
    md = run.write_text("summary.md", "\n".join(lines) + "\n")
    return [run.path / "summary.csv", md]


def _size(prof: ToyProfile) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {"seeds": prof.seeds, "steps": prof.bandit.steps, "sweep_lambdas": len(prof.sweep)}


def build_parser() -> Parser:
    """The command-line options."""
    return experiment_parser(
        NAME, __doc__, PROFILES, seeds="N replicate runs per method and lambda (default: the profile's)"
    )


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    p = build_parser()
    args = p.parse_args(argv)
    prof = chosen_config(p, args, PROFILES, "toy profile", seeds=lambda prof, n: replace(prof, seeds=n, sweep_seeds=n))
    plan = RunPlan.check(
        args, NAME, args.profile, {"profile": args.profile, **asdict(prof)}, _size(prof), PAPER_FIGURES
    )
    return lambda: _execute(args, prof, plan)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, prof: ToyProfile, plan: RunPlan) -> int:
    run = plan.start()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    t0 = time.perf_counter()

    total = prof.bandit.steps * (2 * prof.seeds + len(prof.sweep) * prof.sweep_seeds)
    with tqdm(total=total, desc=f"{NAME} ({args.profile})", unit="run-step", mininterval=1.0) as bar:
        results = {
            method: _train(run, prof, method, lam, prof.seeds, bar, keep_samples=True)
            for method, lam in (("grpo", 0.0), ("setpo", prof.lam))
        }
        sweep_rows = _sweep(run, prof, bar)

    files = [_pca_figure(run, prof), _probs_figure(run, prof, results), _sweep_figure(run, prof, sweep_rows)]
    files += _summary_tables(run, prof, results)
    return plan.finish(run, t0, run.path / "summary.md", files)


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
