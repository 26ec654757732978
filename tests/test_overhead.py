"""reproduce.overhead: profiles, the median CI, the per-step share, the figure (medians with CIs, no stacking), the
policy embedder's reused vs extra forward in a real timing run, and the GPU check script's dry run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reproduce import overhead
from reproduce.stats import bootstrap_ci

ROOT = Path(__file__).resolve().parent.parent


def test_profiles_measure_every_method_and_full_includes_smollm2():
    quick, full = overhead.PROFILES["quick"], overhead.PROFILES["full"]
    assert (
        quick.methods
        == tuple(overhead.METHODS)
        == (
            "grpo",
            "setpo_hashed",
            "setpo_minilm",
            "setpo_policy",
            "setpo_policy_extra",
        )
    )
    assert [p.policy for p in quick.policies] == ["tiny-h64xL2"]
    assert overhead.SMOLLM2 in [p.policy for p in full.policies] and full.group_size == 6
    assert all(p.beta > 0 for p in overhead.PROFILES.values())  # TRL runs a reference pass the policy can reuse


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"methods": ("setpo_hashed",)}, "must include 'grpo'"),
        ({"methods": ("grpo", "nope")}, "unknown: \\['nope'\\]"),
        ({"steps": 1}, "steps >= 2"),
        ({"policies": ()}, "at least one policy"),
    ],
)
def test_bad_profiles_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        overhead.OverheadProfile(**kwargs)


def test_policy_names():
    assert overhead.tiny_size("tiny-h64xL2") == (64, 2) and overhead.tiny_size(overhead.SMOLLM2) is None
    for bad in ("tiny-h63xL2", "tiny-h64", "smollm2", "Qwen/Qwen2.5-0.5B"):
        with pytest.raises(ValueError, match="unknown policy"):
            overhead.PolicySize(bad)


def test_smollm2_start_policy_is_the_offline_model_with_lora_as_in_smollm2_primes(tmp_path, monkeypatch):
    import setpo.models
    from reproduce.tasks.smollm2 import LORA_TARGETS

    loaded = []
    monkeypatch.setattr(setpo.models, "load_pretrained", lambda name: loaded.append(name) or ("model", "tok"))
    model, tok, lora = overhead.load_start_policy(overhead.PolicySize(overhead.SMOLLM2, 4, 48), tmp_path, lora_r=16)
    assert loaded == ["smollm2-135m-instruct"] and (model, tok) == ("model", "tok")
    assert lora.r == 16 and lora.lora_alpha == 32 and lora.lora_dropout == 0.0
    assert set(lora.target_modules) == set(LORA_TARGETS)


def test_median_ci_brackets_the_median_and_refuses_bad_input():
    values = [*range(1, 11), 1000.0]
    med, lo, hi = overhead.median_ci(values)
    assert med == 6.0 and lo < med < hi < 10  # the outlier does not drag the median's CI
    assert overhead.median_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="finite values"):
            overhead.median_ci(bad)


def rows_for(method: str, steps: list[float], added: list[float], policy: str = "tiny-h8xL1") -> list[dict]:
    out = []
    for t, a in zip(steps, added):
        row = {b: 0.01 for b in overhead.BUCKETS}
        row.update(setpo_embed=a / 2, setpo_credit=a / 2, step_total=t, grpo_part=t - a, share=a / (t - a))
        out.append({"policy": policy, "method": method, "policy_forward_reused": None, **row})
    return out


def test_summary_share_is_per_step_added_work_over_the_grpo_part():
    rows = rows_for("grpo", [1.0, 1.1, 0.9, 1.0], [0.0] * 4) + rows_for(
        "setpo_hashed", [1.1, 2.2, 1.05, 1.2], [0.1, 0.2, 0.05, 0.2]
    )
    grpo, setpo = overhead.summarise(rows, ("grpo", "setpo_hashed"))
    shares = [0.1 / 1.0, 0.2 / 2.0, 0.05 / 1.0, 0.2 / 1.0]
    assert setpo["share_median"] == pytest.approx(np.median(shares))
    assert setpo["share_ci"] == pytest.approx(list(overhead.median_ci(shares)[1:]))
    assert (setpo["share_mean"], *setpo["share_mean_ci"]) == pytest.approx(bootstrap_ci(shares))
    assert setpo["ratio_to_grpo"] == pytest.approx(np.median([1.1, 2.2, 1.05, 1.2]) / 1.0)
    assert grpo["share_median"] == 0.0 and grpo["ratio_to_grpo"] == 1.0
    assert setpo["setpo_embed_s"] == pytest.approx(np.median([0.05, 0.1, 0.025, 0.1]))  # a median, not a mean


def test_figure_shows_medians_with_their_cis_not_stacked_means(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    rows = (
        rows_for("grpo", [1.0, 1.2, 0.8, 5.0], [0.0] * 4)
        + rows_for("setpo_hashed", [1.1, 1.2, 1.0, 6.0], [0.01, 0.02, 0.01, 0.5])
        + rows_for("setpo_minilm", [1.3, 1.4, 1.2, 1.3], [0.3, 0.3, 0.2, 0.4])
    )
    summary = overhead.summarise(rows, ("grpo", "setpo_hashed", "setpo_minilm"))
    figs = []
    monkeypatch.setattr(overhead, "save_figure", lambda fig, path, data: figs.append(fig) or Path(path))

    class Run:
        path = tmp_path

    overhead.figure(Run(), summary, rows)
    (share_ax, step_ax) = figs[0].axes
    by = {s["method"]: s for s in summary}
    heights = [p.get_height() for p in share_ax.patches]
    assert heights == pytest.approx([100 * by[m]["share_median"] for m in ("setpo_hashed", "setpo_minilm")])
    heights = [p.get_height() for p in step_ax.patches]
    assert heights == pytest.approx([by[m]["step_median_s"] for m in ("grpo", "setpo_hashed", "setpo_minilm")])
    assert all(p.get_y() == 0 for ax in (share_ax, step_ax) for p in ax.patches)  # nothing stacked
    # error bars: one segment per bar spanning the CI of the median
    (bars,) = [c for c in step_ax.containers if hasattr(c, "errorbar") and c.errorbar is not None]
    segs = bars.errorbar.lines[2][0].get_segments()
    for seg, m in zip(segs, ("grpo", "setpo_hashed", "setpo_minilm")):
        assert [seg[0][1], seg[1][1]] == pytest.approx(by[m]["step_ci_s"])


def test_policy_embedder_reuses_trls_pass_and_the_extra_method_does_not(tmp_path):
    from datasets import Dataset
    from tqdm import tqdm

    prof = overhead.OverheadProfile(
        policies=(overhead.PolicySize("tiny-h16xL1", 2, 6),),
        methods=("grpo", "setpo_policy", "setpo_policy_extra"),
        group_size=3,
        steps=2,
    )
    data = Dataset.from_dict({"prompt": ["1 2 3 = 6", "4 5 = 9"], "target": [6, 9], "nums": [[1, 2, 3], [4, 5]]})
    got = {}
    with tqdm(disable=True) as bar:
        for m in ("setpo_policy", "setpo_policy_extra"):
            (row,) = overhead.time_method(prof, prof.policies[0], m, data, tmp_path, bar)
            got[m] = row
    assert got["setpo_policy"]["policy_forward_reused"] == 1.0
    assert got["setpo_policy_extra"]["policy_forward_reused"] == 0.0
    for row in got.values():
        assert row["setpo_embed"] > 0 and row["share"] == pytest.approx(
            (row["setpo_embed"] + row["setpo_credit"]) / row["grpo_part"]
        )


def test_cli_refuses_cuda_without_a_device_and_one_step(tmp_path, capsys):
    import torch

    from reproduce.common import cli

    if not torch.cuda.is_available():
        assert cli(overhead.main, ["--profile", "smoke", "--device", "cuda", "--out", str(tmp_path / "a")]) == 2
        assert "--device cuda" in capsys.readouterr().err
    assert cli(overhead.main, ["--profile", "smoke", "--steps", "1", "--out", str(tmp_path / "b")]) == 2
    assert "--steps must be >= 2" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_runs_a_subset_of_the_methods_and_refuses_one_without_grpo(tmp_path, capsys):
    from reproduce.common import cli

    out = tmp_path / "sub"
    assert cli(overhead.main, ["--profile", "smoke", "--methods", "grpo", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["methods"] == ["grpo"]
    assert {r["method"] for r in json.loads((out / "summary.json").read_text())} == {"grpo"}
    assert cli(overhead.main, ["--profile", "smoke", "--methods", "setpo_hashed", "--out", str(tmp_path / "x")]) == 2
    assert "must include 'grpo'" in capsys.readouterr().err and not (tmp_path / "x").exists()
    extra = ["--methods", "grpo", "setpo_minilm", "--out", str(tmp_path / "y")]
    assert cli(overhead.main, ["--profile", "smoke", *extra]) == 2
    assert "not in the smoke profile's methods" in capsys.readouterr().err and not (tmp_path / "y").exists()


def gpu_check(*args: str, out: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": out}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_gpu_check_dry_run_prints_every_command_under_out(tmp_path):
    out = tmp_path / "gpu out"
    r = gpu_check("--dry-run", out=str(out))
    assert r.returncode == 0, r.stderr
    commands = [line for line in r.stdout.splitlines() if line.startswith("timeout ")]
    assert len(commands) == 5
    tests, bench, compiled, oh, memory = commands
    assert "-m reproduce.scale.bench_embed_placement --memory --json" in memory and "embed_memory.json" in memory
    assert "-m pytest" in tests and "-k cuda" in tests and "cuda_tests.xml" in tests
    assert "benchmarks/bench_credits.py --device cuda" in bench and "--inductor" not in bench
    assert "benchmarks/bench_credits.py --device cuda" in compiled and "--inductor" in compiled
    assert "-m reproduce overhead --profile quick --device cuda" in oh
    assert all(str(out).replace(" ", "\\ ") in c for c in commands)
    assert sum(int(c.split()[1]) for c in commands) < 600  # the time limits fit in 10 minutes
    assert not out.exists()  # a dry run writes nothing


def test_gpu_check_refuses_unknown_arguments_and_a_machine_without_cuda(tmp_path):
    r = gpu_check("--fast", out=str(tmp_path / "x"))
    assert r.returncode == 2 and "unknown argument '--fast'" in r.stderr
    import torch

    if not torch.cuda.is_available():
        r = gpu_check(out=str(tmp_path / "y"))
        assert r.returncode == 2 and "sees no CUDA device" in r.stderr
        assert not (tmp_path / "y").exists()


def test_the_smollm2_profile_publishes_beside_the_full_profile_not_over_it():
    from reproduce.common import PAPER_FIGURES

    assert overhead.publish_dir("full") == overhead.publish_dir("quick") == PAPER_FIGURES / "overhead"
    assert overhead.publish_dir("smollm2") == PAPER_FIGURES / "overhead" / "smollm2"
    assert overhead.publish_dir("tiny") == PAPER_FIGURES / "overhead" / "tiny"
