"""The confirmatory analysis (`reproduce.confirm`): H1 and H2 in one Holm family of two, H1's gap equal to a
by-hand frontier over GRPO's checkpoints and temperature sweep, and no analysis before every seed is in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reproduce import confirm, stats
from reproduce.common import UsageError
from setpo.metrics import pass_at_k

P, N, SEEDS, STEPS = 6, 8, 7, 30
SWEEP = ("T1_p1", "T1.2_p1")


def _frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []

    def add(arm, G, s, step, dec, p):
        c = rng.binomial(N, p, size=P)
        rows.extend({"arm": arm, "G": G, "seed": s, "step": step, "decoding": dec, "problem": i, "n": N,
                     "n_correct": int(c[i]), "n_distinct": int(min(c[i], 2))} for i in range(P))  # fmt: skip

    add("start", 0, -1, 0, confirm.PAPER, 0.2)
    for s in range(SEEDS):
        for step, p in ((10, 0.25), (20, 0.3), (STEPS, 0.35)):
            add("grpo", 4, s, step, confirm.PAPER, p)
        for dec in SWEEP:
            add("grpo", 4, s, STEPS, dec, 0.3)
        add("setpo_r0.3", 4, s, STEPS, confirm.PAPER, 0.3)
        add("placebo_r0.3", 4, s, STEPS, confirm.PAPER, 0.3)
    return pd.DataFrame(rows)


DESIGN = confirm.Design(G=4, rl_steps=STEPS, n=N, seeds=SEEDS, sweep=SWEEP)


def _mean(df, arm, s, step, dec, k):
    g = df[(df.arm == arm) & (df.seed == s) & (df.step == step) & (df.decoding == dec)].sort_values("problem")
    return float(np.mean(pass_at_k(g.n.to_numpy(), g.n_correct.to_numpy(), k)))


def test_h1_and_h2_form_one_family_of_two_and_h1_is_the_frontier_gap_by_hand():
    df = _frame()
    con = confirm.contrasts(df, DESIGN)
    h = con[con.claim.str.match(r"H[12]: ")]
    assert len(h) == 2 and set(h.family) == {confirm.FAMILY} and set(h.family_size) == {2}
    assert np.allclose(sorted(h.p_holm), sorted(stats.holm_adjust(list(h.p_exact))))
    k = N // 2
    gaps = []
    for s in range(SEEDS):
        pts = [(_mean(df, "start", -1, 0, confirm.PAPER, 1), _mean(df, "start", -1, 0, confirm.PAPER, k))]
        pts += [(_mean(df, "grpo", s, st, confirm.PAPER, 1), _mean(df, "grpo", s, st, confirm.PAPER, k))
                for st in (10, 20, STEPS)]  # fmt: skip
        pts += [(_mean(df, "grpo", s, STEPS, d, 1), _mean(df, "grpo", s, STEPS, d, k)) for d in SWEEP]
        x, y = _mean(df, "setpo_r0.3", s, STEPS, confirm.PAPER, 1), _mean(df, "setpo_r0.3", s, STEPS, confirm.PAPER, k)
        gaps.append(y - stats.frontier_at(pts, x))
    h1 = con[con.claim.str.startswith("H1: ")].iloc[0]
    assert h1.metric == f"pass@{k} gap" and h1["mean"] == pytest.approx(np.mean(gaps), abs=1e-12)
    h3 = con[con.claim.str.startswith("H3: ")]
    assert list(h3.metric) == ["pass@1"] and set(h3.verdict) == {"-"}  # reported, not decided
    assert {f"setpo_r0.3 minus GRPO end point sampled at {d}" for d in SWEEP} <= set(con.claim)


def test_no_interim_analysis():
    df = _frame()
    with pytest.raises(UsageError, match="no interim analysis"):
        confirm.contrasts(df[df.seed < SEEDS - 1], DESIGN)


def test_passk_curve_has_every_k_up_to_half_n_for_every_end_point():
    curve = confirm.passk_curve(_frame(), DESIGN)
    assert set(curve.k) == set(range(1, N // 2 + 1))
    assert set(curve.arm) == {"start", "grpo", "setpo_r0.3", "placebo_r0.3"}
    assert (curve.groupby(["arm", "seed"])["pass@k"].apply(lambda v: np.all(np.diff(v.to_numpy()) >= 0))).all()


def test_countdown_confirm_smoke_profile_runs_the_design_end_to_end(tmp_path):
    from reproduce import countdown_confirm

    assert countdown_confirm.main(["--profile", "smoke", "--threads", "1", "--out", str(tmp_path / "r")]) == 0
    con = pd.read_csv(tmp_path / "r" / "contrasts.csv")
    h = con[con.claim.str.match(r"H[12]: ")]
    assert len(h) == 2 and set(h.family_size) == {2}
    assert (tmp_path / "r" / "frontier.png").exists() and (tmp_path / "r" / "passk_curve.csv").exists()
