"""D(S) as an estimator of F(P) (Sec. 2: S is a set of |S| i.i.d. rollouts).

Claim checked: D(S) is a consistent estimator of F(P): for S ~ P^n, D(S) -> F(P) in probability, with
bias O(1/n) (m_hat(y; S) is an unbiased U-statistic for m_P(y) given y, and g is smooth) and spread O(1/sqrt n).
For linear g, D(S) = 1 - mean_{i != j} k(y_i, y_j) is exactly unbiased for F(P) = 1 - kappa(P).
Method: for a few finite-support P, draw many groups of each size n, compute D with the core's set_diversity
on the sampled kernel, and compare with the exact F(P) from population_diversity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from setpo import cosine_kernel, population_diversity, set_diversity
from theory.instances import DTYPE, generator, random_kernel
from theory.records import CheckRecord, Verdict

RESULT = "D(S) consistency"
NO_GENERAL_PROOF = "a statistical property: bias and spread measured by simulation"
SIZES = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


@dataclass(frozen=True)
class Distribution:
    """A named finite-support P: weights and kernel over its atoms."""

    name: str
    p: torch.Tensor
    K: torch.Tensor


def distributions(seed: int = 90) -> list[Distribution]:
    """Three test distributions: uniform over 12 random atoms; the Fig. 1 toy (12 modes in 50-d, 4 dominant);
    a collapsed one (90% of the mass on one mode)."""
    gen = generator(seed)
    uniform = Distribution(
        "uniform, 12 atoms (cosine, 5-d)",
        torch.full((12,), 1 / 12, dtype=DTYPE),
        random_kernel("cosine", 1, 12, gen)[0],
    )
    modes = torch.randn(12, 50, generator=gen, dtype=DTYPE)
    toy_w = torch.tensor([4.0] * 4 + [1.0] * 8, dtype=DTYPE)
    toy = Distribution("12 modes in 50-d (Fig. 1 toy), 4 dominant", toy_w / toy_w.sum(), cosine_kernel(modes))
    coll_w = torch.tensor([0.9] + [0.1 / 11] * 11, dtype=DTYPE)
    collapsed = Distribution("collapsed: 90% on one mode", coll_w, random_kernel("clustered", 1, 12, gen)[0])
    return [uniform, toy, collapsed]


def estimate(dist: Distribution, g: str, n: int, reps: int, gen: torch.Generator) -> tuple[float, float, float]:
    """(bias, std, standard error of the bias) of D(S) for |S| = n over `reps` sampled groups."""
    idx = torch.multinomial(dist.p.expand(reps, -1), n, replacement=True, generator=gen)
    K_S = dist.K[idx.unsqueeze(-1), idx.unsqueeze(-2)]
    K_S.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    D = set_diversity(K_S, g)
    err = D - population_diversity(dist.p, dist.K, g)
    std = float(D.std())
    return float(err.mean()), std, std / math.sqrt(reps)


def slope(ns, values) -> float:
    """Least-squares slope of log(values) on log(n)."""
    x = torch.log(torch.tensor(ns, dtype=DTYPE))
    y = torch.log(torch.tensor(values, dtype=DTYPE))
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x * x).sum())


def check_consistency(
    reps: int = 400, seed: int = 91, shapings: tuple = ("neglog1p", "linear"), sizes: tuple[int, ...] = SIZES
) -> CheckRecord:
    """RMSE of D(S) - F(P) falls like n^-1/2 (log-log slope in [-0.7, -0.3] over n >= 8) for every P and g;
    for linear g the bias is within 4 standard errors of 0 at every n. The record's table holds the
    (distribution, g, n, bias, std, se) rows."""
    gen = generator(seed)
    rows, bad, slopes = [], [], []
    for dist in distributions():
        for g in shapings:
            rmse = []
            for n in sizes:
                bias, std, se = estimate(dist, g, n, reps, gen)
                rmse.append(math.sqrt(bias**2 + std**2))
                rows.append((dist.name, g, n, bias, std, se))
                if g == "linear" and abs(bias) > 4 * se + 1e-12:
                    bad.append(f"{dist.name}/{g}/n={n}: bias {bias:.2e} > 4 SE")
            big = [i for i, n in enumerate(sizes) if n >= 8]
            s = slope([sizes[i] for i in big], [rmse[i] for i in big])
            slopes.append(s)
            if not -0.7 <= s <= -0.3:
                bad.append(f"{dist.name}/{g}: RMSE slope {s:.2f}")
    return CheckRecord(
        RESULT,
        f"RMSE ~ n^-1/2 and (linear g) zero bias, 3 distributions, g in {list(shapings)}, n = {sizes[0]}..{sizes[-1]}",
        "consistency",
        len(rows) * reps,
        "worst RMSE slope",
        max(slopes, key=lambda v: abs(v + 0.5)),
        Verdict.FAIL if bad else Verdict.PASS,
        detail="; ".join(bad) if bad else f"RMSE slopes {min(slopes):.2f}..{max(slopes):.2f}",
        table=tuple(rows),
    )


BIAS_CONSTANT = 1.0  # C in |bias| <= C / n; the full run measures max n |bias| = 0.14


def check_bias_order(table: tuple[tuple, ...]) -> CheckRecord:
    """n * |bias| stays bounded for neglog1p (bias O(1/n)): n |bias| <= C + 4 n SE at every n >= 8 (C = 1; the
    4 standard errors allow for the Monte Carlo noise of the bias estimate), from the rows of a consistency run."""
    rows = [(n, b, se) for _, g, n, b, _, se in table if g == "neglog1p" and n >= 8]
    if not rows:
        raise ValueError("table has no g = neglog1p rows with n >= 8: pass the table of a check_consistency record")
    scaled = [n * abs(b) for n, b, _ in rows]
    over = [f"n={n}: n|bias| {n * abs(b):.3f} > {BIAS_CONSTANT} + 4 n SE" for n, b, se in rows
            if n * abs(b) > BIAS_CONSTANT + 4 * n * se]  # fmt: skip
    at_six = [
        f"{d.split(',')[0].split(':')[0]} {b:+.4f} (std {s:.4f})"
        for d, g, n, b, s, _ in table
        if g == "neglog1p" and n == 6
    ]
    return CheckRecord(
        RESULT,
        f"n |bias| <= {BIAS_CONSTANT} + 4 n SE for g = -log(1+x), n >= 8 (bias = O(1/n))",
        "consistency",
        len(scaled),
        "max n |bias|",
        max(scaled),
        Verdict.FAIL if over else Verdict.PASS,
        detail=("; ".join(over) + "; " if over else "") + "bias of D(S) at n = 6 (the paper's G): " + ", ".join(at_six),
    )


def bias_table(records: list[CheckRecord]) -> list[str]:
    """Markdown table of bias and spread of D(S) from the consistency records among `records` (none: no lines)."""
    rows = [row for r in records if r.result == RESULT for row in r.table if row[1] == "neglog1p"]
    if not rows:
        return []
    lines = [
        "### D(S) versus F(P): bias and spread by group size (g = -log(1+x))",
        "",
        "| distribution | n | bias E[D(S)] - F(P) | std D(S) | SE of bias |",
        "|---|---|---|---|---|",
    ]
    return lines + [f"| {d} | {n} | {b:+.5f} | {s:.5f} | {se:.5f} |" for d, _, n, b, s, se in rows] + [""]


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of the consistency claim."""
    consistency = check_consistency(100 if quick else 400)
    return [consistency, check_bias_order(consistency.table)]
