"""The SmolLM2 confirmatory design's window pilot: the chance of a frontier point at 1 against simulation, the
pre-registered choice rule, and the candidate windows (none a train prompt, each holding a valid answer)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reproduce import smollm2_confirm as sc
from reproduce.tasks.primes import is_prime, windows


def test_chance_at_one_matches_simulation():
    rng = np.random.default_rng(0)
    c, m, n = np.array([40, 50, 60]), 64, 32
    p = (c + 0.5) / (m + 1)
    draws = rng.binomial(n, p, size=(200_000, 3))
    simulated = np.mean(np.all(draws >= n - n // 2 + 1, axis=1))  # pass@(n/2) = 1 needs > n/2 valid samples
    assert sc.chance_at_one(c, m, n) == pytest.approx(simulated, rel=0.02)
    assert sc.chance_at_one(np.array([0, 64]), m, n) < 1e-12  # one hopeless window keeps the whole set below 1


def test_choice_rule_prefers_more_windows_then_fewer_samples():
    rows = []
    for cand, k in (("w30", 12), ("w15", 21)):
        for n, chance in ((32, 0.001 if cand == "w15" else 0.0), (64, 0.0)):
            rows += [{"windows": cand, "n_windows": k, "n": n, "k": n // 2, "seed": s, "chance_at_1": chance,
                      "frontier_max": 0.5} for s in (5, 6)]  # fmt: skip
    table = pd.DataFrame(rows)
    assert sc.pilot_choice(table) == ("w15", 32)
    table.loc[(table.windows == "w15") & (table.n == 32) & (table.seed == 6), "chance_at_1"] = 0.02
    assert sc.pilot_choice(table) == ("w15", 64)  # the chance must stay below 1% on every seed
    table["chance_at_1"] = 0.5
    with pytest.raises(ValueError, match="below 1%"):
        sc.pilot_choice(table)


def test_candidate_windows_are_not_train_prompts_and_hold_a_prime():
    train = set(windows("train", 0))
    for ws in sc.CANDIDATES.values():
        assert not train & set(ws)
        assert all(any(is_prime(x) for x in range(lo + 1, hi)) for lo, hi in ws)
    assert len(sc.CANDIDATES["w15"]) == 21 and len(sc.test_windows(sc.PROFILES["pilot"])) == 33


def test_smoke_profile_runs_the_design_end_to_end(tmp_path):
    assert sc.main(["--profile", "smoke", "--threads", "2", "--out", str(tmp_path / "r")]) == 0
    con = pd.read_csv(tmp_path / "r" / "contrasts.csv")
    h = con[con.claim.str.match(r"H[12]: ")]
    assert len(h) == 2 and set(h.family_size) == {2}
    per_problem = pd.read_csv(tmp_path / "r" / "per_problem.csv.gz")
    assert set(per_problem.decoding[per_problem.arm == "grpo"]) == {"T0.5_p0.9", "T1_p1"}  # GRPO's sweep
    assert set(per_problem.decoding[per_problem.arm != "grpo"]) == {"T0.5_p0.9"}
