"""The evidence experiments end to end at smoke size: Countdown frontier/placebo (paired seeds, GRPO checkpoints,
contrasts recomputed from the saved per-problem counts) and the credit-scale measurement on SmolLM2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from reproduce import countdown_evidence as ce
from reproduce import credit_scale as cs
from reproduce import evidence
from reproduce.stats import frontier_at
from setpo.core import cosine_kernel, group_advantages, loo_credits_reference
from setpo.metrics import pass_at_k


@pytest.fixture(scope="module")
def evidence_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("evidence")
    assert ce.main(["--profile", "smoke", "--out", str(out)]) == 0
    return out


def test_every_arm_and_seed_ran_from_one_start(evidence_run):
    prof = ce.PROFILES["smoke"]
    steps = {p.stem for p in (evidence_run / "steps").glob("*.json")}
    for G in prof.group_sizes:
        for seed in range(prof.seeds):
            for arm, ratio, placebo in evidence.arms(prof):
                rl = json.loads((evidence_run / "steps" / f"rl_{arm}_g{G}_s{seed}.json").read_text())
                assert (rl["ratio"], rl["placebo"], rl["seed"]) == (ratio, placebo, seed)
                if ratio > 0:  # the trainer set lambda from the target ratio and logged it
                    assert len(rl["log"]) == prof.rl_steps and all("setpo/lambda" in h for h in rl["log"])
                    assert all(h["setpo/placebo"] == float(placebo) for h in rl["log"])
                    ratios = [h["setpo/shaping_ratio"] for h in rl["log"] if "setpo/shaping_ratio" in h]
                    assert all(r == pytest.approx(ratio, rel=1e-4) for r in ratios)
                assert f"eval_{arm}_g{G}_s{seed}" in steps
    assert "eval_start" in steps


def test_contrasts_recompute_from_per_problem_counts(evidence_run):
    prof = ce.PROFILES["smoke"]
    df = pd.read_csv(evidence_run / "results.csv")
    con = pd.read_csv(evidence_run / "contrasts.csv")
    K = evidence.decision_k(prof.eval_n)  # the decision metric: pass@(n/2)
    kmax = f"pass@{K}"
    G, dec = prof.group_sizes[0], "T1_p1"
    start = json.loads((evidence_run / "steps" / "eval_start.json").read_text())["metrics"][dec]
    gaps, diffs = [], []
    for seed in range(prof.seeds):
        ev = {
            arm: json.loads((evidence_run / "steps" / f"eval_{arm}_g{G}_s{seed}.json").read_text())["metrics"][dec]
            for arm, _, _ in evidence.arms(prof)
        }
        for m in [start, *ev.values()]:  # pass@k from the saved counts, independently of the run's own numbers
            c = np.asarray(m["n_correct"])
            assert m["pass@k"][str(K)] == pytest.approx(np.mean(pass_at_k(prof.eval_n, c, K)))
        s = ev["setpo_r0.3"]
        p1, pk = s["pass@k"]["1"], s["pass@k"][str(K)]
        path = [(start["pass@k"]["1"], start["pass@k"][str(K)])]
        path.append((ev["grpo"]["pass@k"]["1"], ev["grpo"]["pass@k"][str(K)]))
        gaps.append(pk - frontier_at(path, p1))
        diffs.append(pk - ev["placebo_r0.3"]["pass@k"][str(K)])
    row = con[
        (con.claim == "setpo_r0.3 lies above GRPO's frontier") & (con.decoding == dec) & (con.metric == f"{kmax} gap")
    ]
    assert row.iloc[0]["mean"] == pytest.approx(np.mean(gaps)) and row.iloc[0]["n"] == prof.seeds
    row = con[(con.claim == "setpo_r0.3 beats placebo_r0.3") & (con.metric == kmax)].iloc[0]
    assert row["mean"] == pytest.approx(np.mean(diffs)) and row["family"] == "placebo"
    assert row["verdict"] in ("too few seeds", "no difference")  # 2 seeds: the exact test cannot reach 0.05
    assert set(df.arm) == {"start", "grpo", "setpo_r0.3", "placebo_r0.3"}
    counts = pd.read_csv(evidence_run / "per_problem.csv.gz")
    start_counts = counts[(counts.arm == "start") & (counts.decoding == dec)].sort_values("problem")
    assert start_counts.n_correct.tolist() == start["n_correct"] and len(counts) == len(df) * prof.n_test
    assert (evidence_run / "frontier.png").is_file() and (evidence_run / "summary.md").read_text().count("|") > 20


def test_grpo_frontier_checkpoints_are_saved_and_evaluated(tmp_path):
    prof = ce.EvidenceProfile(rl_steps=8, frontier_points=5)
    assert evidence.checkpoint_steps(prof.rl_steps, prof.frontier_points) == [0, 2, 4, 6, 8]
    assert evidence.saved_steps(prof) == [2, 4, 6]  # the start and the end are evaluated as such
    with pytest.raises(ValueError, match="placebo_ratio"):
        ce.EvidenceProfile(ratios=(0.1,), placebo_ratio=0.3)
    with pytest.raises(ValueError, match="frontier_points"):
        ce.EvidenceProfile(frontier_points=1)


def test_rerun_resumes_without_new_work(evidence_run):
    before = {p.name: p.stat().st_mtime_ns for p in (evidence_run / "steps").glob("*.json")}
    assert ce.main(["--profile", "smoke", "--out", str(evidence_run)]) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (evidence_run / "steps").glob("*.json")}
    assert before == after


def test_credit_scale_matches_algorithm_1():
    rng = np.random.default_rng(0)
    completions = [[f"answer {rng.integers(5)} {'x' * int(rng.integers(4))}" for _ in range(6)] for _ in range(5)]
    correct = [[bool(rng.integers(2)) for _ in range(6)] for _ in range(5)]
    table = torch.tensor(rng.random((64, 8)))

    def embed(texts):
        return torch.stack([table[hash(t) % 64] for t in texts])

    out = cs.credit_scale(completions, correct, embed, 4)
    s = torch.stack([loo_credits_reference(cosine_kernel(embed(row[:4]).double())) for row in completions])
    rewards = torch.tensor([[float(x) for x in row[:4]] for row in correct], dtype=torch.float64)
    adv = group_advantages(rewards.reshape(-1), 4).reshape(-1, 4)
    varied = rewards.std(dim=1) > 0
    assert out["mean_abs_s"] == pytest.approx(float(s.abs().mean()), rel=1e-12)
    assert out["mean_abs_A"] == pytest.approx(float(adv[varied].abs().mean()), rel=1e-12)
    ratio = 0.05 * float(s[varied].abs().mean()) / out["mean_abs_A"]
    assert out["ratio_at_lambda_0.05"] == pytest.approx(ratio, rel=1e-12)
    assert out["lambda_for_ratio_0.1"] * float(s[varied].abs().mean()) / out["mean_abs_A"] == pytest.approx(0.1)


def test_credit_scale_smoke_on_smollm2(tmp_path, bench_dir, monkeypatch):
    monkeypatch.setenv("SETPO_BENCHMARK_DIR", str(bench_dir))
    assert cs.main(["--profile", "smoke", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "credit_scale.json").read_text())
    assert [r["G"] for r in rows] == [3] and rows[0]["mean_abs_s"] > 0
    samples = json.loads((tmp_path / "steps" / "samples.json").read_text())
    assert len(samples["completions"]) == 2 and all(len(c) == 3 for c in samples["completions"])


def test_gsm8k_rows_from_every_source_agree(bench_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("SETPO_BENCHMARK_DIR", str(bench_dir))
    rows = cs.gsm8k_rows(3)
    monkeypatch.delenv("SETPO_BENCHMARK_DIR")
    monkeypatch.setattr(cs, "REPO", tmp_path / "repo")  # no shared/ beside it: the shipped archive is read
    assert cs.gsm8k_rows(3) == rows and rows[0]["answer"].endswith("#### 18")
    monkeypatch.setenv("SETPO_BENCHMARK_DIR", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="SETPO_BENCHMARK_DIR"):
        cs.gsm8k_rows(3)
