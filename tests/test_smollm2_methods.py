"""The SmolLM2 methods comparison: profiles that extend the primes experiment's, the baseline folder and its checks,
the calibrated arms, and one smoke run end to end (baseline + DARLING + DQO + GAPO)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pandas as pd
import pytest

from reproduce import comparison as mc
from reproduce import evidence
from reproduce import smollm2_methods as sm
from reproduce import smollm2_primes as sp
from reproduce.common import RunDir, RunExistsError, default_out
from reproduce.tasks import primes


def test_profiles_extend_the_primes_profiles():
    for name, prof in sm.PROFILES.items():
        assert prof.baseline() == sp.PROFILES[name], name
        assert set(asdict(prof)) - set(asdict(sp.PROFILES[name])) == {"arms", "calibration_prompts"}
    assert sm.PROFILES["full"].arms == sm.METHOD_ARMS
    # every method of the Countdown comparison, and GAPO, whose valid set is known here
    assert set(sm.METHOD_ARMS) == set(mc.ARMS) - {"grpo", "setpo_r0.3"} | {"gapo"}
    with pytest.raises(ValueError, match="arms must be distinct"):
        replace(sm.PROFILES["quick"], arms=("grpo",))
    with pytest.raises(ValueError, match="arms must be distinct"):
        replace(sm.PROFILES["quick"], arms=("dqo", "dqo"))


def test_baseline_folder_is_the_primes_run_beside_this_one(tmp_path):
    assert sm.baseline_out(default_out(sm.NAME, "full")) == default_out(sp.NAME, "full")
    assert sm.baseline_out(default_out(sm.NAME, "full", seeds=8)) == default_out(sp.NAME, "full", seeds=8)
    assert sm.baseline_out(tmp_path / "smollm2_methods") == tmp_path / "smollm2_primes"
    assert sm.baseline_out(tmp_path / "mine") == tmp_path / "mine-smollm2_primes"  # beside, never inside


def test_a_baseline_inside_the_run_or_of_other_settings_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "smollm2_methods"
    with pytest.raises(RunExistsError, match="must not contain each other"):
        sm.prepare(["--profile", "smoke", "--out", str(out), "--baseline", str(out / "base")])
    RunDir(tmp_path / "smollm2_primes", {"profile": "smoke", "seeds": 99}).close()
    with pytest.raises(RunExistsError, match="different config"):
        sm.prepare(["--profile", "smoke", "--out", str(out)])
    assert not out.exists()


def test_a_changed_baseline_is_refused(tmp_path):
    base = RunDir(tmp_path / "base", {"b": 1})
    base.save("rl_grpo_g6_s0", {"wall_s": 1.0})
    run = RunDir(tmp_path / "run", {"r": 1})
    kept = sm.stage_baseline_record(run, base)
    assert set(kept["steps"]) == {"rl_grpo_g6_s0"} and sm.stage_baseline_record(run, base) == kept  # unchanged: fine
    base.save("rl_grpo_g6_s0", {"wall_s": 2.0})
    with pytest.raises(RunExistsError, match="changed since this run first used it.*rl_grpo_g6_s0"):
        sm.stage_baseline_record(run, base)
    base.close()
    run.close()


def test_calibrated_arms_and_the_answers():
    sizes = {"dqo": {"params": {"alpha": 1.8, "ridge": 1.0}}, "entropy": {"params": {"coef": 0.018}},
             "diver": {"params": {"lam": 1.0, "correct_only": True, "tokenization": "char"}}}  # fmt: skip
    arms = {a.name: a for a in mc.calibrated_arms(sm.METHOD_ARMS, sizes, sm.ARMS)}
    assert list(arms) == list(sm.METHOD_ARMS)
    assert arms["dqo"].kwargs == {"alpha": 1.8, "ridge": 1.0} and arms["dqo"].embedder
    assert arms["entropy"].config_fields()["diversity_method_kwargs"] == {"coef": 0.018}
    assert arms["gapo"].answers and arms["gapo"].config_fields()["diversity_method"] == "gapo"
    assert sm.answer("13. It is prime") == "13" and sm.answer("no") is None
    assert sm.valid_answers(10, 20) == ["11", "13", "17", "19"] and sm.valid_answers(13, 17) == []
    rows = sm.calibration_rows(sm.PROFILES["full"])
    train = primes.windows("train", 12)
    assert len(rows) == 64 and rows[0] == train[0] and rows[-1] == train[-1] and len(set(rows)) == 64


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
    target = sizes["setpo_r0.3"]["ratio"]
    assert alpha == mc.choose_coefficient([tuple(x) for x in sizes["dqo"]["scan"]], target)[0]
    for seed in range(prof.seeds):
        for arm in ("grpo", "setpo_r0.3", "placebo_r0.3"):  # the baseline runs live in the primes run folder
            assert (base / "steps" / f"rl_{arm}_g{G}_s{seed}.json").is_file()
            assert not (here / "steps" / f"rl_{arm}_g{G}_s{seed}.json").exists()
        for name in prof.arms:
            rl = json.loads((here / "steps" / f"rl_{name}_g{G}_s{seed}.json").read_text())
            assert rl["fields"]["diversity_method"] == sm.ARMS[name].method
            assert len(rl["log"]) == prof.rl_steps and all(f"method/{name}/advantage_delta" in h for h in rl["log"])
        dqo = json.loads((here / "steps" / f"rl_dqo_g{G}_s{seed}.json").read_text())
        assert dqo["fields"]["diversity_method_kwargs"] == {"alpha": alpha, "ridge": 1.0}
    con = pd.read_csv(here / "contrasts.csv")
    frontier = con[con.claim == "lies above GRPO's frontier"]
    assert set(frontier.arm) == {"setpo_r0.3", "placebo_r0.3", "darling", "dqo", "gapo"}
    assert frontier.set_index("arm")["p_holm"].isna().to_dict() == {
        "setpo_r0.3": False,
        "placebo_r0.3": True,
        "darling": False,
        "dqo": False,
        "gapo": False,
    }  # the placebo is a control
    timing = pd.read_csv(here / "timing.csv")
    assert len(timing) == prof.seeds * (3 + len(prof.arms)) and (timing.step_time_s > 0).all()
    assert not (con.claim == "step time over GRPO's").any()  # the baseline ran in another process
    text = (here / "summary.md").read_text()
    assert "SmolLM2-135M, primes" in text and "too few seeds" in text and "| control | placebo_r0.3 |" in text
    record = json.loads((here / "steps" / "baseline.json").read_text())
    assert record["folder"] == str(base) and "rl_grpo_g3_s0" in record["steps"]
    for f in ("methods_frontier.png", "results.csv", "per_problem.csv.gz"):
        assert (here / f).is_file(), f


def test_a_baseline_grown_by_more_seeds_is_the_same_baseline(tmp_path):
    base = RunDir(tmp_path / "base", {"b": 1, "seeds": 2}, extend=evidence.EXTEND)
    base.save("rl_grpo_g6_s0", {"wall_s": 1.0})
    base.close()
    run = RunDir(tmp_path / "run", {"r": 1})
    kept = sm.stage_baseline_record(run, base)
    grown = RunDir(tmp_path / "base", {"b": 1, "seeds": 3}, extend=evidence.EXTEND)
    grown.save("rl_grpo_g6_s2", {"wall_s": 1.0})  # a new seed's step: added, not changed
    record = sm.stage_baseline_record(run, grown)
    assert record["steps"]["rl_grpo_g6_s0"] == kept["steps"]["rl_grpo_g6_s0"]
    assert set(record["steps"]) == {"rl_grpo_g6_s0", "rl_grpo_g6_s2"}  # the new seed is pinned from now on
    assert json.loads(record["config"])["config"]["seeds"] == 3 and run.load("baseline") == record
    grown.save("rl_grpo_g6_s2", {"wall_s": 3.0})  # the new seed's step changed after it was pinned
    with pytest.raises(RunExistsError, match="changed since this run first used it.*rl_grpo_g6_s2"):
        sm.stage_baseline_record(run, grown)
    grown.save("rl_grpo_g6_s2", {"wall_s": 1.0})
    grown.save("rl_grpo_g6_s0", {"wall_s": 2.0})
    with pytest.raises(RunExistsError, match="changed since this run first used it.*rl_grpo_g6_s0"):
        sm.stage_baseline_record(run, grown)
    grown.close()
    run.close()
