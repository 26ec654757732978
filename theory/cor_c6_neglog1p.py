"""Cor C.6 (the paper's shaping function satisfies the curvature condition).

Statement: g(m) = -log(1+m) satisfies m g''(m) < -2 g'(m) for all m >= 0, with
phi'(m) = -(m+2)/(1+m)^2 < 0, and |g'| <= 1 on [0,1] (so M = 1; also L = max |g''| = 1 on [0,1]).
Also checked: the other registered shapings (linear, exp, inverse) satisfy the condition on (0,1], the
exp(-beta x) family satisfies it on (0,1] exactly when beta < 2, and the core's g, g', g'' agree with sympy.
"""

from __future__ import annotations

import sympy as sp
import torch

from setpo import Shaping
from theory import symbolic as S
from theory.instances import DTYPE, SHAPINGS, generator, resolve
from theory.proxy import phi_prime
from theory.records import CheckRecord, count_record, record, search_record

RESULT = "Cor C.6"
NO_GENERAL_PROOF = "a statement about g alone (no group size involved)"


def check_symbolic() -> CheckRecord:
    """Exact: phi' = -(m+2)/(1+m)^2, {m >= 0 : phi' >= 0} is empty, max_{[0,1]} |g'| = 1 = max_{[0,1]} |g''|."""
    m = sp.Symbol("m", real=True)
    g = -sp.log(1 + m)
    dg, d2g = sp.diff(g, m), sp.diff(g, m, 2)
    phi_p = sp.diff(g + m * dg, m)
    checks = {
        "phi' = -(m+2)/(1+m)^2": sp.simplify(phi_p + (m + 2) / (1 + m) ** 2) == 0,
        "phi' < 0 for all m >= 0": sp.solveset(phi_p >= 0, m, sp.Interval(0, sp.oo)) == sp.EmptySet,
        "m g'' < -2 g' for all m >= 0": sp.solveset(m * d2g + 2 * dg >= 0, m, sp.Interval(0, sp.oo)) == sp.EmptySet,
        "|g'| <= 1 on [0,1], = 1 at 0": sp.solveset(sp.Abs(dg) > 1, m, sp.Interval(0, 1)) == sp.EmptySet
        and sp.Abs(dg.subs(m, 0)) == 1,
        "|g''| <= 1 on [0,1]": sp.solveset(sp.Abs(d2g) > 1, m, sp.Interval(0, 1)) == sp.EmptySet,
    }
    bad = [k for k, ok in checks.items() if not ok]
    return count_record(
        RESULT,
        "g = -log(1+m): " + "; ".join(checks),
        "symbolic",
        len(checks),
        bad,
        metric="failures",
        scope="size-free",
    )


def check_other_shapings() -> CheckRecord:
    """Where the curvature condition holds for each registered g (exact sets), and the exp(-beta x) family."""
    m = sp.Symbol("m", real=True)
    beta = sp.Symbol("beta", positive=True)
    regions, bad = {}, []
    for name in SHAPINGS:
        g = S.SYMPY_SHAPINGS[name](m)
        fails = sp.solveset(m * sp.diff(g, m, 2) + 2 * sp.diff(g, m) >= 0, m, sp.Interval(0, sp.oo))
        regions[name] = fails
        if fails.intersect(sp.Interval.Lopen(0, 1)) != sp.EmptySet:
            bad.append(name)
    g = sp.exp(-beta * m)
    condition = sp.simplify((m * sp.diff(g, m, 2) + 2 * sp.diff(g, m)) / sp.exp(-beta * m))  # beta (beta m - 2)
    threshold = sp.solve(sp.Eq(condition, 0), m)  # fails from m = 2/beta on
    if threshold != [2 / beta]:
        bad.append("exp(-beta x) family")
    detail = "condition fails on: " + ", ".join(f"{k} {v}" for k, v in regions.items())
    detail += f"; exp(-beta x) fails from m = {threshold}, so it holds on (0,1] iff beta < 2"
    return count_record(
        RESULT,
        "curvature condition on (0,1] for linear, exp, inverse; exp(-beta x) iff beta < 2",
        "symbolic",
        len(SHAPINGS) + 1,
        bad,
        metric="failures",
        detail=detail,
        scope="size-free",
    )


def check_registry(points: int = 10_000, seed: int = 60) -> CheckRecord:
    """The core registry's g, g', g'' equal the sympy derivatives at random points of [0, 1]; phi' < 0 there."""
    x = sp.Symbol("x", real=True)
    u = torch.rand(points, generator=generator(seed), dtype=DTYPE)
    u[:2] = torch.tensor([0.0, 1.0], dtype=DTYPE)
    worst, largest = 0.0, -float("inf")
    for name in SHAPINGS:
        core = resolve(name)
        expr = S.SYMPY_SHAPINGS[name](x)
        fns = [sp.lambdify(x, e, "numpy") for e in (expr, sp.diff(expr, x), sp.diff(expr, x, 2))]
        for fn, mine in zip(fns, (core.g, core.dg, core.d2g)):
            ref = torch.as_tensor(fn(u.numpy()), dtype=DTYPE).expand_as(u)
            worst = max(worst, float((ref - mine(u)).abs().max()))
        largest = max(largest, float(phi_prime(name, u).max()))
    return record(
        RESULT,
        f"core g, g', g'' vs sympy for {list(SHAPINGS)}; phi' < 0 on [0,1]",
        "numeric",
        points * len(SHAPINGS),
        "max abs error",
        worst,
        worst <= 1e-13 and largest < 0,
        f"largest phi' {largest:.3f} (must be < 0)",
    )


def check_steep_exp() -> CheckRecord:
    """beta = 3 > 2: g = exp(-3x) is strictly decreasing and smooth but violates the condition on (2/3, 1]."""
    x = torch.linspace(0.0, 1.0, 1001, dtype=DTYPE)
    steep = Shaping(
        "exp3", lambda t: torch.exp(-3 * t), lambda t: -3 * torch.exp(-3 * t), lambda t: 9 * torch.exp(-3 * t)
    )
    violated = x[(x * steep.d2g(x) + 2 * steep.dg(x)) >= 0]
    found = violated.numel() > 0
    return search_record(
        RESULT,
        "g = exp(-3x): condition on a grid of [0,1]",
        1001,
        found,
        float(violated.min()) if found else float("nan"),
        "fails from m = 2/3 on (exactly 2/beta)",
        expect_found=True,
        metric="first failing m",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Cor C.6."""
    return [check_symbolic(), check_other_shapings(), check_registry(1_000 if quick else 10_000), check_steep_exp()]
