"""Minimal end-to-end runs of the CPU-scale reproductions (toy bandit, Countdown, overhead) at smoke sizes.

These check that each pipeline runs, writes its figures with the data beside them, resumes, refuses a
different config and publishes only when asked. The science is reported by the scripts, not asserted here.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reproduce import countdown, overhead, toy_bandit
from reproduce.common import RunExistsError, read_config


def test_toy_bandit_smoke_run_resume_and_publish(tmp_path, monkeypatch):
    out = tmp_path / "toy"
    monkeypatch.setattr(toy_bandit, "PAPER_FIGURES", tmp_path / "paper_figures")
    assert toy_bandit.main(["--profile", "smoke", "--out", str(out)]) == 0
    for f in ("fig1_toy_bandit", "mode_probs", "lambda_sweep"):
        assert (out / f"{f}.png").stat().st_size > 0 and (out / f"{f}.csv").is_file()
    probs = pd.read_csv(out / "mode_probs_runs.csv")
    sums = probs.groupby(["method", "seed", "step"]).prob.sum()
    assert len(sums) == 2 * 2 * 6 and sums.between(1 - 1e-9, 1 + 1e-9).all()
    means = pd.read_csv(out / "mode_probs.csv")
    assert len(means) == 2 * 6
    assert means[[f"mode{k}_mean" for k in range(12)]].sum(axis=1).between(1 - 1e-5, 1 + 1e-5).all()
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary.method.unique()) == ["grpo", "setpo"] and len(summary) == 4
    assert summary.modes_kept.between(0, 4).all()
    assert not (tmp_path / "paper_figures").exists()  # nothing published without --publish

    first = (out / "summary.md").read_text()
    assert toy_bandit.main(["--profile", "smoke", "--out", str(out), "--publish"]) == 0  # resumes every step
    assert (out / "summary.md").read_text() == first
    published = tmp_path / "paper_figures" / "toy_bandit"
    assert (published / "fig1_toy_bandit.png").is_file() and (published / "fig1_toy_bandit.csv").is_file()
    assert (published / "summary.md").read_text() == first

    with pytest.raises(RunExistsError):
        toy_bandit.main(["--profile", "smoke", "--out", str(out), "--seeds", "3"])
    assert toy_bandit.main(["--profile", "smoke", "--out", str(out), "--seeds", "3", "--overwrite"]) == 0
    assert len(pd.read_csv(out / "summary.csv")) == 6


def test_countdown_profile_checks(tmp_path):
    with pytest.raises(ValueError, match="group size"):
        countdown.CountdownProfile(group_sizes=(2,))
    with pytest.raises(ValueError, match="n_test"):
        countdown.CountdownProfile(n_test=0)
    bad = tmp_path / "bad.yaml"
    bad.write_text("n_train: 10\nlearning_rate: 3\n")
    with pytest.raises(ValueError, match="unknown countdown profile field"):
        read_config(bad, countdown.CountdownProfile, "countdown profile")


def test_countdown_smoke_pipeline(tmp_path, monkeypatch):
    out = tmp_path / "cd"
    monkeypatch.setattr(countdown, "PAPER_FIGURES", tmp_path / "paper_figures")
    assert countdown.main(["--profile", "smoke", "--out", str(out), "--publish"]) == 0
    prof = countdown.PROFILES["smoke"]
    train = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (out / "test.jsonl").read_text().splitlines()]
    assert len(train) == prof.n_train and len(test) == prof.n_test
    assert not {(r["target"], tuple(sorted(r["nums"]))) for r in train} & {
        (r["target"], tuple(sorted(r["nums"]))) for r in test
    }
    steps = {p.stem for p in (out / "steps").glob("*.json")}
    assert {"data", "sft", "eval_sft", "rl_grpo_g3_b0.001_s0", "rl_setpo_l5_g3_b0.001_s0"} <= steps
    ev = json.loads((out / "steps" / "eval_setpo_l5_g3_b0.001_s0.json").read_text())["metrics"]["1"]
    passk = [ev["pass@k"][str(k)] for k in range(1, prof.eval_n + 1)]
    assert all(0 <= a <= b <= 1 for a, b in zip(passk, passk[1:]))  # pass@k is non-decreasing in k
    assert set(ev["table3"]) == {"tree", "commutative", "associative"}
    log = json.loads((out / "steps" / "rl_setpo_l5_g3_b0.001_s0.json").read_text())["log"]
    assert "setpo/credit_mean" in log[0]  # SetPO ran with the credit term
    grpo_log = json.loads((out / "steps" / "rl_grpo_g3_b0.001_s0.json").read_text())["log"]
    assert "setpo/credit_mean" not in grpo_log[0]  # lambda = 0: plain GRPO
    df = pd.read_csv(out / "fig3_countdown_passk.csv")
    assert set(df.method) == {"sft", "grpo", "setpo_l5"} and df.k.max() == prof.eval_n
    md = (out / "table3_countdown.md").read_text()
    assert "415 / 3.5" not in md  # G=7 rows are not part of the smoke grid
    assert "321 / 2.1" in md and "Scale:" in md
    published = tmp_path / "paper_figures" / "countdown"
    assert (published / "fig3_countdown_passk.png").is_file() and (published / "table3_countdown.md").is_file()


def test_overhead_smoke_run(tmp_path):
    out = tmp_path / "oh"
    assert overhead.main(["--profile", "smoke", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [s["method"] for s in summary] == ["grpo", "setpo_hashed"]
    grpo, setpo = summary
    assert grpo["ratio_to_grpo"] == 1.0 and grpo["setpo_embed_s"] == 0.0
    assert setpo["setpo_embed_s"] > 0 and setpo["setpo_credit_s"] > 0
    for s in summary:
        assert s["generation_s"] > 0 and s["backward_s"] > 0 and s["step_median_s"] > 0
    assert (out / "fig9_overhead.png").is_file() and (out / "fig9_overhead.csv").is_file()


def test_countdown_reads_a_benchmark_folder(tmp_path):
    from reproduce.tasks.countdown_problems import generate_problems

    bench = tmp_path / "bench" / "countdown"
    bench.mkdir(parents=True)
    train = generate_problems(40, seed=5)
    test = generate_problems(6, seed=6, exclude={p.key for p in train})
    rows = lambda ps: "".join(json.dumps({"target": p.target, "nums": list(p.nums)}) + "\n" for p in ps)  # noqa: E731
    (bench / "train.jsonl").write_text(rows(train))
    (bench / "test.jsonl").write_text(rows(train[:2] + test))  # two overlap with train and must be dropped
    out = tmp_path / "cd"
    assert countdown.main(["--profile", "smoke", "--out", str(out), "--benchmark-dir", str(tmp_path / "bench")]) == 0
    got_test = [json.loads(x) for x in (out / "test.jsonl").read_text().splitlines()]
    assert got_test == [{"target": p.target, "nums": list(p.nums)} for p in test[:4]]
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["train_file"].endswith("train.jsonl")
    with pytest.raises(SystemExit):
        countdown.main(["--profile", "smoke", "--out", str(tmp_path / "x"), "--benchmark-dir", str(tmp_path)])
