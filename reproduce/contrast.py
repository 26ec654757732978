"""Paired contrasts computed from per-problem counts, so that seeds and test problems can be resampled together.

A contrast is a function ``per_seed(W) -> (B, S)``: the paired difference of every seed under B weightings ``W``
(B, P) of the P test problems (a model's metric is ``W @`` its per-problem values). Row 0 of `stats.problem_weights`
is the data itself; the other rows are the bootstrap's resamples, shared by every arm, seed and checkpoint.
`contrast_row` turns one into a table row; `apply_rule` adds Holm's adjustment per declared family and the verdicts
of `reproduce.stats.decide`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reproduce import stats
from setpo.metrics import pass_at_k

Key = tuple  # (arm, G, seed, step, decoding)
PerSeed = Callable[[np.ndarray], np.ndarray]


@dataclass
class ProblemTable:
    """Per-problem values of every evaluated model: ``values[(key, metric)]`` is a (P,) array."""

    columns: dict[Key, dict[str, np.ndarray]]
    n_problems: int

    @classmethod
    def from_counts(cls, frame) -> ProblemTable:
        """From a per_problem frame (arm, G, seed, step, decoding, problem, n, n_correct, n_distinct)."""
        cols: dict[Key, dict[str, np.ndarray]] = {}
        sizes = set()
        for key, g in frame.sort_values("problem").groupby(["arm", "G", "seed", "step", "decoding"], sort=False):
            cols[tuple(_plain(k) for k in key)] = {"n": g.n.to_numpy(), "c": g.n_correct.to_numpy(),
                                                   "distinct": g.n_distinct.to_numpy(dtype=float)}  # fmt: skip
            sizes.add(len(g))
        if len(sizes) != 1:
            raise ValueError(f"every evaluated model needs the same test problems, got sizes {sorted(sizes)}")
        return cls(cols, sizes.pop())

    def values(self, key: Key, metric: str) -> np.ndarray:
        """(P,) per-problem values of ``metric`` ('pass@k' from the counts, or a stored column) for one model."""
        if key not in self.columns:
            raise KeyError(f"no evaluation of {key} in the per-problem file")
        col = self.columns[key]
        if metric not in col and metric.startswith("pass@"):
            col[metric] = np.asarray(pass_at_k(col["n"], col["c"], int(metric[5:])), dtype=np.float64)
        if metric not in col:
            raise KeyError(f"no per-problem {metric!r} for {key}")
        return col[metric]

    def mean(self, w: np.ndarray, key: Key, metric: str) -> np.ndarray:
        """(B,) the metric of one model under problem weights ``w`` (B, P)."""
        return w @ self.values(key, metric)

    def has(self, key: Key) -> bool:
        return key in self.columns

    def seeds(self, arm: str, G: int, step: int, decoding: str) -> list:
        """The seeds with an evaluation of ``arm`` at group size G, ``step`` and ``decoding``, sorted."""
        return sorted(k[2] for k in self.columns if k[:2] == (arm, G) and k[3] == step and k[4] == decoding)


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def end_diff(table: ProblemTable, a: Sequence[Key], b: Sequence[Key], metric: str, metric_b: str | None = None
             ) -> PerSeed:  # fmt: skip
    """Per seed: model a[s]'s metric minus model b[s]'s (``metric_b`` for b when it differs)."""
    return lambda w: np.stack([table.mean(w, x, metric) - table.mean(w, y, metric_b or metric)
                               for x, y in zip(a, b)], axis=1)  # fmt: skip


def frontier_values(table: ProblemTable, paths: Sequence[Sequence[Key]], at: Sequence[Key], x: str, y: str
                    ) -> PerSeed:  # fmt: skip
    """Per seed: the frontier (`stats.frontier_at`) of path[s]'s models in (x, y), at model at[s]'s x."""

    def f(w: np.ndarray) -> np.ndarray:
        cols = []
        for path, key in zip(paths, at):
            xs = np.stack([table.mean(w, k, x) for k in path], axis=1)
            ys = np.stack([table.mean(w, k, y) for k in path], axis=1)
            cols.append(stats.frontier_batch(xs, ys, table.mean(w, key, x)))
        return np.stack(cols, axis=1)

    return f


def frontier_gap(table: ProblemTable, paths: Sequence[Sequence[Key]], at: Sequence[Key], x: str, y: str) -> PerSeed:
    """Per seed: model at[s]'s y minus the frontier of path[s] at its x."""
    front = frontier_values(table, paths, at, x, y)
    return lambda w: np.stack([table.mean(w, k, y) for k in at], axis=1) - front(w)


def minus(a: PerSeed, b: PerSeed) -> PerSeed:
    """Per seed: a - b (e.g. SetPO's frontier gap minus the placebo's: the placebo contrast at matched pass@1)."""
    return lambda w: a(w) - b(w)


def per_seed_values(table: ProblemTable, keys: Sequence[Key], metric: str) -> PerSeed:
    """Per seed: one model's metric (a reference level, for relative changes)."""
    return lambda w: np.stack([table.mean(w, k, metric) for k in keys], axis=1)


def contrast_row(per_seed: PerSeed, n_problems: int, *, family: str | None = None, min_effect: float | None = None,
                 base: PerSeed | None = None, ceiling: PerSeed | None = None, **fields: Any) -> dict:  # fmt: skip
    """One contrast: n seeds, mean paired difference, relative change (mean over the mean of ``base``), Student-t
    95% CI, exact sign-flip p, seeds x problems 95% interval, seeds up/down.

    ``family``: the declared family whose Holm adjustment and verdict the row gets (`apply_rule`); None for a
    descriptive row. ``ceiling``: per seed, the reference that is at the metric's maximum 1 when no gap above 0 is
    possible (a frontier gap's frontier)."""
    data = stats.problem_weights(n_problems, n_boot=0)
    d = np.asarray(per_seed(data))[0]
    t_lo, t_hi = stats.t_interval(d)
    b_lo, b_hi = stats.seeds_problems_ci(per_seed, d.size, n_problems)
    row = {**fields, "n": d.size, "mean": float(d.mean()), "t_lo": t_lo, "t_hi": t_hi,
           "p_exact": stats.sign_flip_pvalue(d), "boot_lo": b_lo, "boot_hi": b_hi,
           "seeds_up": int(np.sum(d > 0)), "seeds_down": int(np.sum(d < 0)), "family": family or "",
           "min_effect": np.nan if min_effect is None else min_effect}  # fmt: skip
    if base is not None:
        ref = float(np.asarray(base(data))[0].mean())
        row.update(base=ref, rel=row["mean"] / ref if ref else np.nan, rel_lo=t_lo / ref if ref else np.nan,
                   rel_hi=t_hi / ref if ref else np.nan)  # fmt: skip
    if ceiling is not None:
        row["at_ceiling"] = int(np.sum(np.asarray(ceiling(data))[0] >= 1.0))
    row["_diffs"] = d
    return row


def apply_rule(rows: list[dict]) -> list[dict]:
    """Holm within each declared family, then `stats.decide`; descriptive rows get p_holm NaN and verdict '-'."""
    families: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r["family"]:
            families.setdefault(r["family"], []).append(i)
    out = [dict(r) for r in rows]
    for r in out:
        r.update(p_holm=np.nan, family_size=0, verdict="-", reason="")
    for idx in families.values():
        adj = stats.holm_adjust([rows[i]["p_exact"] for i in idx])
        for i, p in zip(idx, adj):
            r = out[i]
            top = r.get("at_ceiling")
            at_ceiling = top is not None and top == top and int(top) == r["n"]
            me = r["min_effect"]
            v = stats.decide(r["n"], p, (r["t_lo"], r["t_hi"]), (r["boot_lo"], r["boot_hi"]), len(idx),
                             None if me != me else me, at_ceiling, not np.any(r["_diffs"]))  # fmt: skip
            r.update(p_holm=p, family_size=len(idx), verdict=v, reason=stats.why(v, r["n"], len(idx)))
    for r in out:
        r.pop("_diffs")
    return out


def fmt_ci(lo: float, hi: float, digits: int = 3) -> str:
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def fmt_rel(r: dict) -> str:
    """'+12% [-39%, +21%]' of a row with a base, else '-'."""
    rel = r.get("rel")
    if rel is None or rel != rel:
        return "-"
    return f"{100 * rel:+.0f}% [{100 * r['rel_lo']:+.0f}%, {100 * r['rel_hi']:+.0f}%]"


def fmt_p(p: float) -> str:
    return "-" if p != p else f"{p:.4f}" if p < 0.01 else f"{p:.3f}"
