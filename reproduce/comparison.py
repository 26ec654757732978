"""Diversity methods side by side, for any task: the arms (one ``SetPOConfig`` each), their term sizes calibrated
to SetPO's, and the analysis (frontier gaps, step times, table and figure). The design is `methods_comparison`'s
docstring; `methods_comparison` (Countdown) and `smollm2_methods` (primes) run it on their tasks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reproduce import evidence
from reproduce.common import RunDir, save_figure
from reproduce.contrast import (
    ProblemTable,
    apply_rule,
    contrast_row,
    end_diff,
    fmt_ci,
    fmt_p,
    frontier_gap,
    frontier_values,
    per_seed_values,
)
from reproduce.evidence import per_problem_frame, results_frame, seeds_up
from reproduce.stats import bootstrap_ci

SETPO_RATIO = 0.3
CORRECT_THRESHOLD = 0.5  # Countdown rewards: 0, 0.1 (format only), 1.0 (hits the target)
#: arm -> (its coefficient set by the calibration, the largest value allowed). DIVER's cap keeps the bonus at most
#: the task reward (1); the entropy bonus is linear in its coefficient, so it is solved for, not scanned.
CALIBRATED = {"diver": ("lam", 1.0), "dqo": ("alpha", math.inf), "entropy": ("coef", math.inf)}
# C0 is GRPO's path, grey the start; one colour per arm of the largest comparison (SmolLM2: 10 arms besides GRPO).
COLORS = ("C1", "C2", "C3", "C4", "C5", "C6", "C8", "C9", "k", "navy", "lime")


@dataclass(frozen=True)
class Report:
    """What the comparison's figure and table say about the task they come from."""

    task: str  # e.g. "Countdown, tiny LM"
    note: str  # after the setting: methods not applicable and why
    caveats: str


COUNTDOWN = Report(
    "Countdown, tiny LM",
    "GAPO: not applicable to Countdown (no given valid-answer set; see the module docstring).",
    "Caveats of scale: a 0.14M-parameter character model, one task, one start; the hyperparameters are the "
    "papers' where the spec gives them, else matched to SetPO's term size, not tuned per method.",
)


@dataclass(frozen=True)
class Arm:
    """One arm: a diversity method (a ``setpo.methods`` name) with its parameters, and what the trainer needs."""

    name: str
    method: str = "setpo"
    kwargs: dict[str, Any] = field(default_factory=dict)
    setpo: dict[str, Any] = field(default_factory=lambda: {"setpo_lambda": 0.0})
    temperature: float = 1.0
    embedder: bool = False  # the commutative answer embedder (SetPO, DRA-GRPO, DQO)
    answers: bool = False  # the commutative answer extractor (DARLING)

    def config_fields(self) -> dict[str, Any]:
        """The SetPOConfig fields that make this arm (the rest is the shared RL budget)."""
        out: dict[str, Any] = {"diversity_method": self.method, **self.setpo, "temperature": self.temperature}
        if self.method != "setpo":
            out["diversity_method_kwargs"] = dict(self.kwargs)
            out["diversity_correct_threshold"] = CORRECT_THRESHOLD
        return out


ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        Arm("grpo"),
        Arm(f"setpo_r{SETPO_RATIO:g}", setpo=evidence.setpo_args(SETPO_RATIO, False), embedder=True),
        Arm("dra_grpo", "dra_grpo", {"scope": "group", "clamp": True}, {}, embedder=True),
        Arm("darling", "darling", {"partition": "answer", "floor": 0.1}, {}, answers=True),
        Arm("diver", "diver", {"correct_only": True, "tokenization": "char"}, {}),  # lam: calibrated
        Arm("dqo", "dqo", {"ridge": 1.0}, {}, embedder=True),  # alpha: calibrated
        Arm("passk", "passk", {"k": 4}, {}),
        Arm("entropy", "entropy_bonus", {}, {}),  # coef: calibrated
        Arm("grpo_t1.3", temperature=1.3),
    )
}


def coefficient_grid(cap: float = math.inf) -> tuple[float, ...]:
    """The coefficients a calibration scans: 10^(k/4) for k = -8..16 (0.01 ... 10^4) up to ``cap``, 2 significant
    figures, and ``cap`` itself when it is finite and not on the grid."""
    grid = [float(f"{10 ** (k / 4):.2g}") for k in range(-8, 17)]
    out = [c for c in grid if c <= cap]
    return tuple(out + ([cap] if math.isfinite(cap) and cap not in out else []))


def choose_coefficient(scan: Sequence[tuple[float, float]], target: float) -> tuple[float, bool]:
    """(coefficient, reached) from a scan of (coefficient, term size), coefficients ascending (module docstring).

    The coefficient whose size is closest to ``target`` in ratio; when no size reaches ``target`` (the term
    saturates, e.g. a reward term under the group z-score, or the cap stops it), the smallest one within 90% of the
    largest size.
    """
    good = [(c, r) for c, r in scan if r > 0 and math.isfinite(r)]
    if not good:
        raise ValueError("no coefficient gives a term of positive size on the calibration rollouts (no group with "
                         "unequal rewards?): raise calibration_prompts")  # fmt: skip
    top = max(r for _, r in good)
    if top < target:
        return next(c for c, r in good if r >= 0.9 * top), False
    return min(good, key=lambda cr: abs(math.log(cr[1] / target)))[0], True


def setpo_size(batch, ratio: float = SETPO_RATIO) -> dict[str, float]:
    """SetPO's term on the calibration batch in the methods' quotient (`term_sizes_of`), lambda set as the trainer
    sets it (mean|lambda s| / mean|A_bar| = ``ratio`` over all rows, equal-reward groups included)."""
    from setpo.core import group_advantages, group_credits
    from setpo.core.controls import ratio_lambda

    G = batch.group_size
    base = group_advantages(batch.rewards.reshape(-1), G).reshape(-1, G)
    s = group_credits(batch.embeddings, G)
    lam = ratio_lambda(s.reshape(-1), base.reshape(-1), ratio)
    if lam is None:
        raise ValueError("SetPO's lambda cannot be set on the calibration rollouts (no credit or no advantage): "
                         "raise calibration_prompts")  # fmt: skip
    unequal = batch.rewards.std(-1) > 0
    if not bool(unequal.any()):
        raise ValueError("no calibration group has unequal rewards: raise calibration_prompts")
    moved = (lam * s).abs()
    return {"ratio": float(moved[unequal].mean() / base[unequal].abs().mean()), "all_rows_ratio": ratio,
            "lambda": lam, "equal_groups_moved": float((moved[~unequal].amax(-1) > 1e-9).double().mean())
            if bool((~unequal).any()) else 0.0}  # fmt: skip


def calibrate(batch, names: Sequence[str], entropy_ratio: Callable[[torch.Tensor], float] | None = None,
              arms: dict[str, Arm] | None = None) -> dict[str, Any]:  # fmt: skip
    """Term sizes of the arms ``names`` on one calibration batch, with the coefficients of `CALIBRATED` chosen so that
    each term is about SetPO's (module docstring, Calibration). Returns `term_sizes_of`'s dict (at the chosen
    parameters, in ``params``) plus SetPO's size as the target and, per calibrated arm, its scan and ``reached``."""
    arms = arms or ARMS
    target = setpo_size(batch) if any(n in CALIBRATED for n in names) else None
    if entropy_ratio is not None:  # one gradient pass over the rollouts (GRPO's advantages are the same each call)
        entropy_ratio = _first_value(entropy_ratio)
    chosen: dict[str, dict[str, Any]] = {}
    scans: dict[str, Any] = {}
    for name in names:
        if name not in CALIBRATED:
            continue
        key, cap = CALIBRATED[name]
        arm = arms[name]
        if arm.method == "entropy_bonus":
            if entropy_ratio is None:
                continue
            at_one = term_sizes_of(batch, [arm], {name: {key: 1.0}}, entropy_ratio)[name]["ratio"]
            coef, reached = float(f"{min(cap, target['ratio'] / at_one):.2g}"), True
            scans[name] = {"ratio_at_1": at_one, "reached_target": reached}
        else:
            scan = [(c, term_sizes_of(batch, [arm], {name: {key: c}})[name]["ratio"]) for c in coefficient_grid(cap)]
            coef, reached = choose_coefficient(scan, target["ratio"])
            scans[name] = {"scan": scan, "reached_target": reached}
        chosen[name] = {key: coef}
    sizes = term_sizes_of(batch, [arms[n] for n in names], chosen, entropy_ratio)
    for name, extra in scans.items():
        sizes[name].update(extra)
    return sizes if target is None else {**sizes, f"setpo_r{SETPO_RATIO:g}": target}


def _first_value(fn: Callable[..., float]) -> Callable[..., float]:
    """``fn`` computed on the first call only; later calls return that value."""
    memo: list[float] = []

    def once(*args: Any) -> float:
        if not memo:
            memo.append(fn(*args))
        return memo[0]

    return once


def calibrated_arms(names: Sequence[str], sizes: dict[str, Any], arms: dict[str, Arm] | None = None) -> list[Arm]:
    """The arms ``names`` with the coefficients the calibration chose (``sizes[arm]["params"]``)."""
    arms = arms or ARMS
    out = []
    for name in names:
        arm = arms[name]
        if name in CALIBRATED:
            arm = replace(arm, kwargs=dict(sizes[name]["params"]))
        out.append(arm)
    return out


def term_sizes_of(batch, arms: Sequence[Arm], overrides: dict[str, dict[str, Any]] | None = None,
                  entropy_ratio: Callable[[torch.Tensor], float] | None = None) -> dict[str, Any]:  # fmt: skip
    """Each arm's term relative to GRPO's advantage on one batch of rollouts (module docstring, Calibration).

    ``batch`` is a ``setpo.methods.GroupBatch`` of the start model's rollouts; ``overrides`` replace method
    parameters per arm (the calibration grid); ``entropy_ratio(A)`` gives ||grad H|| / ||grad L_pg|| at coefficient 1
    for GRPO's advantages A (B, G). Returns per arm ``ratio`` (mean|A - A_bar| / mean|A_bar| over groups with unequal
    rewards; for the entropy bonus the gradient-norm ratio) and ``equal_groups_moved`` (share of equal-reward groups
    whose advantages the term changes).
    """
    from setpo.core import group_advantages
    from setpo.methods import get_method

    G = batch.group_size
    rewards = batch.rewards.reshape(-1)
    base = group_advantages(rewards, G).reshape(-1, G)
    unequal = rewards.reshape(-1, G).std(-1) > 0
    out: dict[str, Any] = {"G": G, "unequal_groups": int(unequal.sum())}
    for arm in arms:
        params = {**arm.kwargs, **(overrides or {}).get(arm.name, {})}
        if arm.method == "entropy_bonus":
            if entropy_ratio is not None:
                out[arm.name] = {"ratio": params["coef"] * entropy_ratio(base), "params": params}
            continue
        if arm.method == "setpo":
            continue  # GRPO (no term), the T 1.3 arm (no term) and SetPO (its ratio is set by the trainer)
        method = get_method(arm.method)
        if method.entry == "reward":
            scale = "none" if method.group_scale == "none" else "group"
            adv = group_advantages(method(batch, **params).reshape(-1), G, scale).reshape(-1, G)
        else:
            adv = method(batch, base, **params)
        moved = (adv - base).abs()
        ratio = float(moved[unequal].mean() / base[unequal].abs().mean()) if bool(unequal.any()) else float("nan")
        equal_moved = float((moved[~unequal].amax(-1) > 1e-9).double().mean()) if bool((~unequal).any()) else 0.0
        out[arm.name] = {"ratio": ratio, "equal_groups_moved": equal_moved, "params": params}
    return out


def entropy_gradient_ratio(model, tok, prompts: list[str], samples: list[list[str]], adv: torch.Tensor) -> float:
    """||grad H_bar|| / ||grad L_pg||: token-mean entropy vs the token-mean policy-gradient loss -A log pi (ratio 1).

    Both gradients are summed one rollout at a time (the memory of one forward pass); the token count cancels."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    g_ent = [torch.zeros_like(p) for p in params]
    g_pg = [torch.zeros_like(p) for p in params]
    for b, (prompt, row) in enumerate(zip(prompts, samples)):
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        for g, text in enumerate(row):
            c_ids = tok(text, add_special_tokens=False)["input_ids"]
            if not c_ids:
                continue
            ids = torch.tensor([p_ids + c_ids])
            logits = model(ids).logits[0, len(p_ids) - 1 : -1].float()
            logp = torch.log_softmax(logits, -1)
            entropy = -(logp.exp() * logp).sum()
            pg = -float(adv[b, g]) * logp.gather(-1, ids[0, len(p_ids) :, None]).sum()
            for acc, loss in ((g_ent, entropy), (g_pg, pg)):
                for total, grad in zip(acc, torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)):
                    if grad is not None:
                        total += grad

    def norm(gs) -> float:
        return float(torch.sqrt(sum((g.double() ** 2).sum() for g in gs)))

    pg = norm(g_pg)
    if pg == 0:
        raise ValueError("the policy-gradient term is 0 on the calibration rollouts (all rewards equal?): raise "
                         "calibration_prompts")  # fmt: skip
    return norm(g_ent) / pg


# --------------------------------------------------------------------------- analysis


def added_seconds(log: dict) -> float | None:
    """Seconds a diversity term added to one logged step: a method's ``time_s``, or SetPO's embed + credit time."""
    method = [v for k, v in log.items() if k.startswith("method/") and k.endswith("/time_s")]
    if method:
        return float(sum(method))
    if "setpo/embed_time_s" in log:
        return float(log["setpo/embed_time_s"] + log.get("setpo/credit_time_s", 0.0))
    return None


def step_times(load: Callable[[str], dict], prof: Any, names: Sequence[str]):
    """One row per (arm, G, seed): median TRL step_time (s) over the run's steps (a step slowed by other load on the
    machine moves the mean, not the median), the median seconds the method itself added to a step (its logged
    ``method/<name>/time_s``, or SetPO's embedding plus credit time; NaN where none is logged: GRPO, the entropy
    bonus inside TRL's loss, a temperature), and the run's wall time.

    ``load(step)`` reads a finished step's record (``RunDir.load``; the runs of several folders can be combined)."""
    import pandas as pd

    rows = []
    for G in prof.group_sizes:
        for seed in range(prof.seeds):
            for name in names:
                rec = load(f"rl_{name}_g{G}_s{seed}")
                times = [h["step_time"] for h in rec["log"] if "step_time" in h]
                added = [added_seconds(h) for h in rec["log"] if "step_time" in h]
                added = [a for a in added if a is not None]
                rows.append({"arm": name, "G": G, "seed": seed, "step_time_s": float(np.median(times)),
                             "added_s": float(np.median(added)) if added else float("nan"),
                             "steps": len(times), "wall_s": rec["wall_s"]})  # fmt: skip
    return pd.DataFrame(rows)


#: Declared family: at each G and decoding, every method (controls left out) lies above GRPO's frontier at
#: pass@(n/2); Holm's step-down runs over the methods of one decoding. Minimum useful gap: 0.02.
FAMILY, MIN_EFFECT = "methods at {dec}", 0.02


def comparison(per_problem, times, prof: Any, names: Sequence[str] | None = None, controls: Sequence[str] = (),
               timed_with_grpo: Sequence[str] | None = None):  # fmt: skip
    """The pre-registered contrasts (module docstring) per G and decoding from the per-problem counts, paired by seed,
    with Holm's adjustment over the methods of one decoding and the verdicts of `reproduce.stats.decide`.

    ``names``: the arms compared, GRPO first (default: the profile's ``arms``); ``controls`` (e.g. a placebo) get
    the same contrasts but stay out of the Holm family of the methods. ``timed_with_grpo``: the arms whose step
    times were measured in GRPO's process (default: all); only they get a step-time ratio to GRPO."""
    import pandas as pd

    names = list(names or prof.arms)
    timed = set(names if timed_with_grpo is None else timed_with_grpo)
    table = ProblemTable.from_counts(per_problem)
    P, K = table.n_problems, f"pass@{evidence.decision_k(prof.eval_n)}"
    out = []
    for G in prof.group_sizes:
        for dec in sorted(per_problem.decoding.unique()):
            start = ("start", 0, -1, 0, dec)
            seeds = table.seeds("grpo", G, prof.rl_steps, dec)
            end = {a: [(a, G, s, prof.rl_steps, dec) for s in seeds] for a in names}
            paths = evidence.frontier_paths(table, G, dec, seeds, prof.rl_steps, start)
            row = {"G": G, "decoding": dec}
            regime = "GRPO raises pass@n over its start (regime check)"
            out.append(contrast_row(end_diff(table, end["grpo"], [start] * len(seeds), K), P, arm="grpo",
                                    family="regime", base=per_seed_values(table, [start] * len(seeds), K),
                                    claim=regime, metric=K, **row))  # fmt: skip
            for arm in names[1:]:
                front = frontier_values(table, paths, end[arm], "pass@1", K)
                decides = arm not in controls
                out.append(contrast_row(frontier_gap(table, paths, end[arm], "pass@1", K), P, arm=arm,
                                        family=FAMILY.format(dec=dec) if decides else None, base=front,
                                        min_effect=MIN_EFFECT if decides else None, ceiling=front,
                                        claim="lies above GRPO's frontier", metric=f"{K} gap", **row))  # fmt: skip
                for metric in dict.fromkeys(("pass@1", K, "distinct")):
                    out.append(contrast_row(end_diff(table, end[arm], end["grpo"], metric), P, arm=arm,
                                            base=per_seed_values(table, end["grpo"], metric),
                                            claim="minus GRPO end point", metric=metric, **row))  # fmt: skip
                if arm not in timed:
                    continue
                t = times[times.G == G].pivot(index="seed", columns="arm", values="step_time_s")
                ratio = np.array([t.loc[s, arm] / t.loc[s, "grpo"] - 1 for s in seeds])
                out.append(contrast_row(lambda w, r=ratio: np.tile(r, (len(w), 1)), P, arm=arm,
                                        claim="step time over GRPO's", metric="relative", **row))  # fmt: skip
    return pd.DataFrame(apply_rule(out))


def figure(run: RunDir, prof: Any, df, names: Sequence[str] | None = None, report: Report = COUNTDOWN) -> Path:
    """(pass@1, pass@n) per decoding: GRPO's path (mean over seeds), each arm's end point with 95% CIs."""
    import matplotlib.pyplot as plt

    names = list(names or prof.arms)
    kmax = f"pass@{prof.eval_n}"
    decs = list(df.decoding.unique())
    G = prof.group_sizes[0]
    fig, axes = plt.subplots(1, len(decs), figsize=(6 * len(decs), 5), squeeze=False)
    markers = "DvP^X*<>ph"
    for c, dec in enumerate(decs):
        ax, d = axes[0][c], df[(df.decoding == dec) & ((df.G == G) | (df.arm == "start"))]
        start = d[d.arm == "start"]
        path = d[d.arm == "grpo"].groupby("step")[["pass@1", kmax]].mean()
        pts = [(float(start["pass@1"].iloc[0]), float(start[kmax].iloc[0]))] + list(path.itertuples(index=False))
        ax.plot(*zip(*pts), "-o", color="C0", label="GRPO path (start, checkpoints, end; mean over seeds)")
        ax.plot(start["pass@1"], start[kmax], "s", color="grey", ms=9, label="start (SFT)")
        for i, arm in enumerate(names[1:]):
            e = d[(d.arm == arm) & (d.step == prof.rl_steps)]
            x, y = e["pass@1"].to_numpy(), e[kmax].to_numpy()
            style = {"fmt": markers[i % len(markers)], "color": COLORS[i % len(COLORS)], "label": arm, "ms": 7}
            if len(x) > 1:
                (_, xl, xh), (_, yl, yh) = bootstrap_ci(x), bootstrap_ci(y)
                ax.errorbar(x.mean(), y.mean(), xerr=[[x.mean() - xl], [xh - x.mean()]],
                            yerr=[[y.mean() - yl], [yh - y.mean()]], capsize=2, **style)  # fmt: skip
            else:
                ax.errorbar(x, y, **style)
        ax.set_title(f"{report.task}, G={G}, {dec} ({prof.seeds} seeds)", fontsize=9)
        ax.set_xlabel("pass@1")
        ax.set_ylabel(kmax)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the panel: hides no point
    fig.tight_layout()
    path = save_figure(fig, run.path / "methods_frontier", df)
    plt.close(fig)
    return path


def _p(p: float) -> str:
    return "-" if not math.isfinite(p) else f"{p:.3f}"


def _seconds(t: float | None) -> str:
    return "-" if t is None or not math.isfinite(t) else f"{t:.4f}"


def term_sizes_text(sizes: dict) -> str:
    """One paragraph on the calibration: each term's size, its coefficient and what it does to equal-reward groups."""
    target = sizes.get(f"setpo_r{SETPO_RATIO:g}")
    parts = []
    for name, v in sizes.items():
        if not isinstance(v, dict) or "ratio" not in v or name.startswith("setpo_r"):
            continue
        text = f"{name} {v['ratio']:.2f}"
        coef = {k: c for k, c in (v.get("params") or {}).items() if name in CALIBRATED and k == CALIBRATED[name][0]}
        if coef:
            text += " (" + ", ".join(f"{k} {c:g}" for k, c in coef.items())
            text += ", short of the target)" if v.get("reached_target") is False else ")"
        if v.get("equal_groups_moved"):
            text += f", moves {v['equal_groups_moved']:.0%} of equal-reward groups"
        parts.append(text)
    head = (
        "Term sizes at the start (`term_sizes.json`): mean|A - A_grpo| / mean|A_grpo| over the calibration groups "
        "with unequal rewards (the entropy bonus: its gradient-norm share)"
    )
    if target is not None:
        head += (
            f"; SetPO at ratio {SETPO_RATIO} (over all rows) measures {target['ratio']:.2f} there and moves "
            f"{target['equal_groups_moved']:.0%} of equal-reward groups: the calibration's target"
        )
    return head + ". " + "; ".join(parts) + "."


def _ci(r) -> str:
    return f"{r['mean']:+.3f} {fmt_ci(r['t_lo'], r['t_hi'])}"


def summary_table(folder: Path, prof: Any, con, times, sizes: dict, setting: str, report: Report = COUNTDOWN,
                  controls: Sequence[str] = ()) -> Path:  # fmt: skip
    """Markdown: per decoding, one line per method (frontier gap, verdict, pass@1 cost, distinct, time), ranked;
    the ``controls`` below them."""
    kmax = f"pass@{evidence.decision_k(prof.eval_n)}"
    mean_t = times.groupby("arm")["step_time_s"].mean()  # mean over seeds of each run's median
    added = times.groupby("arm")["added_s"].mean()
    ratio_note = (
        "step time vs GRPO: the paired mean of the ratio minus 1, for arms timed alongside GRPO in one process."
        if (con.claim == "step time over GRPO's").any()
        else "step time vs GRPO: given only for arms timed alongside GRPO in one uninterrupted process (none here: "
        "whole-step seconds of runs made at different times under different load do not compare; the methods' own "
        "seconds do)."
    )
    lines = [
        f"# Diversity methods vs GRPO's frontier ({report.task})",
        "",
        f"{setting} Mean paired difference over seeds [Student-t 95% CI]; p: exact two-sided sign-flip (Holm's "
        "step-down over the methods of one decoding); seeds x problems: the 95% bootstrap interval resampling seeds "
        "and test problems together. Verdict on the frontier gap at pass@(n/2) (`reproduce.stats.decide`): confirmed "
        "when the Holm p < 0.05 and both intervals lie above 0; refuted when the same holds below 0, or both intervals "
        f"end below the minimum useful gap {MIN_EFFECT}; too few seeds when the exact test cannot reach 0.05 over the "
        f"family; inconclusive otherwise. {report.note} s/step: each run's median TRL step time, mean over seeds; "
        "method s/step: the same for the time the method's own code took inside the step (logged by the trainer; - "
        f"where none runs); {ratio_note}",
        "",
    ]
    for (G, dec), c in con.groupby(["G", "decoding"], sort=False):
        regime = c[c.arm == "grpo"].iloc[0]
        lines += [f"## G = {G}, decoding {dec}", ""]
        note = "" if regime["t_lo"] > 0 else " — RL did not raise pass@n here: the start is on the frontier"
        lines += [f"Regime check, GRPO end minus start, {kmax}: {_ci(regime)}{note}.", ""]
        lines += [
            f"| rank | method | {kmax} gap above GRPO's frontier | p (Holm) | seeds x problems | seeds up | verdict | "
            f"pass@1 - GRPO | {kmax} - GRPO | distinct - GRPO | s/step | method s/step | step time vs GRPO |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        gaps = c[c.claim == "lies above GRPO's frontier"].sort_values("mean", ascending=False)
        ranked = gaps[~gaps.arm.isin(list(controls))].to_dict("records")
        for rank, g in [(str(i), g) for i, g in enumerate(ranked, 1)] + [
            ("control", g) for g in gaps[gaps.arm.isin(list(controls))].to_dict("records")
        ]:
            rows = c[(c.arm == g["arm"]) & (c.claim == "minus GRPO end point")].set_index("metric")
            t = c[(c.arm == g["arm"]) & (c.claim == "step time over GRPO's")]
            ratio = f"{t.iloc[0]['mean']:+.0%}" if len(t) else "-"
            lines.append(
                f"| {rank} | {g['arm']} | {_ci(g)} | {fmt_p(g['p_exact'])} ({_p(g['p_holm'])}) | "
                f"{fmt_ci(g['boot_lo'], g['boot_hi'])} | {seeds_up(g)} | {_verdict(g)} | {_ci(rows.loc['pass@1'])} | "
                f"{_ci(rows.loc[kmax])} | "
                f"{_ci(rows.loc['distinct'])} | {mean_t[g['arm']]:.3f} | {_seconds(added.get(g['arm']))} | {ratio} |"
            )
        lines.append(f"| - | grpo | 0 (the frontier) | - | - | - | - | - | - | - | {mean_t['grpo']:.3f} | - | - |")
        lines.append("")
    lines += [term_sizes_text(sizes), "", report.caveats]
    path = Path(folder) / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _verdict(g: dict) -> str:
    return g["verdict"] + (f" ({g['reason']})" if g.get("reason") else "")


def analyse(run: RunDir, prof: Any, evals: dict, sizes: dict, setting: str, names: Sequence[str] | None = None,
            report: Report = COUNTDOWN, load: Callable[[str], dict] | None = None,
            controls: Sequence[str] = (), timed_with_grpo: Sequence[str] | None = None) -> list[Path]:  # fmt: skip
    """results.csv, per_problem.csv.gz, timing.csv, contrasts.csv, methods_frontier.png and summary.md.

    ``names``: the arms, GRPO first (default: the profile's); ``load`` reads their RL records (default: ``run``'s);
    ``timed_with_grpo``: see `comparison`."""
    names = list(names or prof.arms)
    df = results_frame(prof, evals)
    run.write_csv("results.csv", df)
    run.write_csv("per_problem.csv.gz", per_problem_frame(evals), compression=evidence.GZIP)
    times = step_times(load or run.load, prof, names)
    run.write_csv("timing.csv", times)
    con = comparison(per_problem_frame(evals), times, prof, names, controls, timed_with_grpo)
    run.write_csv("contrasts.csv", con)
    run.claim("summary.md")  # written by summary_table, which also renders published folders
    return [figure(run, prof, df, names, report),
            summary_table(run.path, prof, con, times, sizes, setting, report, controls),
            run.path / "results.csv",
            run.path / "per_problem.csv.gz", run.path / "timing.csv", run.path / "contrasts.csv",
            run.path / "term_sizes.json"]  # fmt: skip
