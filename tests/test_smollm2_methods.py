"""The SmolLM2 methods comparison: profiles that extend the primes experiment's, the baseline folder, the calibration
rule on known scans, a refused mismatched baseline, and one smoke run end to end (baseline + DARLING + DQO)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pandas as pd
import pytest

from reproduce import methods_comparison as mc
from reproduce import smollm2_methods as sm
from reproduce import smollm2_primes as sp
from reproduce.common import RunDir, RunExistsError, default_out


def test_profiles_extend_the_primes_profiles():
    for name, prof in sm.PROFILES.items():
        assert prof.baseline() == sp.PROFILES[name], name
        assert set(asdict(prof)) - set(asdict(sp.PROFILES[name])) == {"arms", "calibration_prompts"}
    assert sm.PROFILES["full"].arms == sm.METHOD_ARMS
    assert set(sm.METHOD_ARMS) == set(mc.ARMS) - {"grpo", "setpo_r0.3"}  # every method of the Countdown comparison
    with pytest.raises(ValueError, match="arms must be distinct"):
        replace(sm.PROFILES["quick"], arms=("grpo",))
    with pytest.raises(ValueError, match="arms must be distinct"):
        replace(sm.PROFILES["quick"], arms=("dqo", "dqo"))


def test_baseline_folder_is_the_primes_run_beside_this_one(tmp_path):
    assert sm.baseline_out(default_out(sm.NAME, "full", seeds=None), "full", None) == default_out(sp.NAME, "full")
    assert sm.baseline_out(default_out(sm.NAME, "full", seeds=8), "full", 8) == default_out(sp.NAME, "full", seeds=8)
    assert sm.baseline_out(tmp_path / "smollm2_methods", "quick", None) == tmp_path / "smollm2_primes"
    assert sm.baseline_out(tmp_path / "mine", "quick", None) == tmp_path / "mine" / "smollm2_primes"


def test_choose_coefficient_closest_in_ratio_or_where_it_saturates():
    linear = [(c, 0.1 * c) for c in sm.coefficient_grid()]
    assert sm.choose_coefficient(linear) == (3.2, True)  # 0.32 is closer to 0.3 in ratio than 0.18
    saturating = [(c, 0.2 * c / (1 + c)) for c in sm.coefficient_grid()]  # tops out below 0.2
    coef, reached = sm.choose_coefficient(saturating)
    assert not reached and 0.2 * coef / (1 + coef) >= 0.9 * max(r for _, r in saturating)
    assert all(0.2 * c / (1 + c) < 0.9 * 0.2 * 10**4 / (1 + 10**4) for c in sm.coefficient_grid() if c < coef)
    with pytest.raises(ValueError, match="raise calibration_prompts"):
        sm.choose_coefficient([(1.0, 0.0), (2.0, float("nan"))])
    grid = sm.coefficient_grid()
    assert grid[0] == 0.01 and grid[-1] == 10_000 and len(grid) == 25 and list(grid) == sorted(grid)


def test_calibrated_arms_take_the_chosen_coefficients():
    prof = sm.PROFILES["full"]
    sizes = {"dqo": {"params": {"alpha": 1.8, "ridge": 1.0}}, "entropy": {"params": {"coef": 0.018}}}
    arms = {a.name: a for a in sm.calibrated_arms(prof, sizes)}
    assert list(arms) == list(sm.METHOD_ARMS)
    assert arms["dqo"].kwargs == {"alpha": 1.8, "ridge": 1.0} and arms["dqo"].embedder
    assert arms["entropy"].config_fields()["diversity_method_kwargs"] == {"coef": 0.018}
    assert arms["darling"] == mc.ARMS["darling"] and arms["grpo_t1.3"].temperature == 1.3


def test_answer_is_the_first_integer():
    assert sm.answer("13. It is prime") == "13" and sm.answer("no") is None


def test_a_baseline_folder_of_other_settings_is_refused(tmp_path):
    RunDir(tmp_path / "smollm2_primes", {"profile": "smoke", "seeds": 99}).close()
    with pytest.raises(RunExistsError, match="different config"):
        sm.main(["--profile", "smoke", "--out", str(tmp_path / "smollm2_methods")])


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("smollm2_methods")
    assert sm.main(["--profile", "smoke", "--out", str(root / "smollm2_methods")]) == 0
    return root


def test_smoke_run_end_to_end(smoke_run):
    prof = sm.PROFILES["smoke"]
    G, here, base = prof.group_sizes[0], smoke_run / "smollm2_methods", smoke_run / "smollm2_primes"
    sizes = json.loads((here / "term_sizes.json").read_text())
    alpha = sizes["dqo"]["params"]["alpha"]
    assert alpha == sm.choose_coefficient([tuple(x) for x in sizes["dqo"]["scan"]])[0]
    for seed in range(prof.seeds):
        for arm in ("grpo", "setpo_r0.3", "placebo_r0.3"):  # the baseline runs live in the primes run folder
            assert (base / "steps" / f"rl_{arm}_g{G}_s{seed}.json").is_file()
            assert not (here / "steps" / f"rl_{arm}_g{G}_s{seed}.json").exists()
        for name in prof.arms:
            rl = json.loads((here / "steps" / f"rl_{name}_g{G}_s{seed}.json").read_text())
            assert rl["fields"]["diversity_method"] == mc.ARMS[name].method
            assert len(rl["log"]) == prof.rl_steps and all(f"method/{name}/advantage_delta" in h for h in rl["log"])
        dqo = json.loads((here / "steps" / f"rl_dqo_g{G}_s{seed}.json").read_text())
        assert dqo["fields"]["diversity_method_kwargs"] == {"alpha": alpha, "ridge": 1.0}
    con = pd.read_csv(here / "contrasts.csv")
    frontier = con[con.claim == "lies above GRPO's frontier"]
    assert set(frontier.arm) == {"setpo_r0.3", "placebo_r0.3", "darling", "dqo"}
    timing = pd.read_csv(here / "timing.csv")
    assert len(timing) == prof.seeds * (3 + len(prof.arms)) and (timing.step_time_s > 0).all()
    text = (here / "summary.md").read_text()
    assert "SmolLM2-135M, primes" in text and "not evidence" in text
    for f in ("methods_frontier.png", "results.csv", "per_problem.csv.gz"):
        assert (here / f).is_file(), f
