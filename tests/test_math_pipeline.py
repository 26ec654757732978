"""The single-node TRL math pipeline: configs and presets, and the cpu-smoke run end to end on real problems."""

from __future__ import annotations

import dataclasses
import json

import pytest
from bench_paths import BENCH, needs_bench

from reproduce.common import RunExistsError, publish, read_config
from reproduce.math_pipeline import (
    PROFILES,
    MathPipelineConfig,
    base_algorithm,
    main,
    method_label,
)


def test_every_full_profile_names_a_math_preset_on_its_model():
    from setpo.integrations.trl import get_preset

    full = [name for name in PROFILES if name.startswith("full")]
    assert full == ["full", "full_table4_grpo_7b", "full_table5_gspo_1.5b", "full_table6_dapo_1.5b"]
    for name in full:
        cfg = PROFILES[name]
        assert base_algorithm(cfg.preset) in ("GRPO", "GSPO", "DAPO") and cfg.model == get_preset(cfg.preset).model
        assert dataclasses.replace(cfg, model=PROFILES["full"].model, preset="table4_grpo_1.5b") == PROFILES["full"]


def test_full_profile_builds_a_valid_trainer_config(tmp_path):
    from setpo.integrations.trl import SetPOConfig

    full = PROFILES["full"]
    # bf16 needs a GPU; everything else is checked as it would be on one
    args = SetPOConfig.from_preset(full.preset, output_dir=str(tmp_path), **{**full.train_overrides, "bf16": False})
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == args.generation_batch_size == 64 * 6
    assert (args.num_generations, args.setpo_lambda, args.temperature) == (6, 0.05, 0.9)  # Table 4
    paper_n = {"college_math": 16, "aime24": 256}  # College Math Avg@16; AIME24 pass@256 (Fig. 8)
    assert (full.n, full.n_overrides, full.temperature, full.top_p) == (64, paper_n, 0.5, 0.9)


def test_method_labels_follow_the_paper_rows():
    assert [method_label(m, "table6_dapo_7b") for m in ("base", "baseline", "setpo")] == [
        "base model",
        "DAPO",
        "SetPO+DAPO",
    ]
    assert method_label("setpo", "table5_gspo_1.5b") == "SetPO+GSPO"
    with pytest.raises(ValueError, match="not a math preset"):
        base_algorithm("table8_countdown_g3")


def test_bad_configs_are_refused(tmp_path):
    base = PROFILES["cpu-smoke"]
    for bad in (
        dict(methods=("setpo", "ppo")),
        dict(eval_benchmarks=("gsm8k", "mmlu")),
        dict(train_split="validation"),
        dict(seeds=()),
        dict(eval_limit=0),
        dict(backend="tgi"),
        dict(preset="table8_countdown_g7"),
        dict(top_p=1.5),
    ):
        with pytest.raises(ValueError):
            dataclasses.replace(base, **bad)
    f = tmp_path / "x.yaml"
    f.write_text("model: tiny\nlearning_rate: 1.0\n")
    with pytest.raises(ValueError, match="unknown math pipeline field"):
        read_config(f, MathPipelineConfig, "math pipeline")


@needs_bench
@pytest.mark.slow
def test_cpu_smoke_runs_the_whole_pipeline_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--profile", "cpu-smoke", "--out", str(out), "--local-dir", str(BENCH), "--no-hub"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| GRPO | paper | 83.0 |" in printed and "Plumbing run" in printed

    cfg = PROFILES["cpu-smoke"]
    steps = {p.stem: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")}
    assert set(steps) == {"prepare", "base_model", "train_baseline_s0", "train_setpo_s0"} | {
        "eval_oracle_s0",
        "eval_baseline_s0",
        "eval_setpo_s0",
    }
    prep = json.loads((out / "steps" / "prepare.json").read_text())
    assert set(prep["missing"]) == {"college_math"}  # Hub-only, reported instead of faked

    # training: two RL steps each; only the SetPO run computed credits
    for method, lam in (("baseline", 0.0), ("setpo", 0.05)):
        t = json.loads((out / "steps" / f"train_{method}_s0.json").read_text())
        assert t["steps"] == 2 and t["setpo_lambda"] == lam
        credit_std = [h["setpo/credit_std"] for h in t["log_history"] if "setpo/credit_std" in h]
        assert (len(credit_std) == 2 and all(s > 0 for s in credit_std)) if lam else credit_std == []
        assert (out / "models" / f"{method}_s0" / "final" / "model.safetensors").is_file()

    # evaluation: results agree with the dumped generations; GSM8K skips the 4 training problems
    for method in ("oracle", "baseline", "setpo"):
        for bench in prep["available"]:
            res = json.loads((out / "eval" / f"{method}_s0" / "results" / f"{bench}.json").read_text())
            lines = (out / "eval" / f"{method}_s0" / "generations" / f"{bench}.jsonl").read_text().splitlines()
            dumped = [json.loads(x) for x in lines]
            assert res["problems"] == len(dumped) == cfg.eval_limit and res["n"] == cfg.n
            flags = [s["correct"] for d in dumped for s in d["samples"]]
            assert len(flags) == cfg.eval_limit * cfg.n and res["avg@n"] == sum(flags) / len(flags)
            assert list(res["pass@k"]) == ["1", "2", "4"]
            if bench == "gsm8k":
                assert [d["index"] for d in dumped] == [4, 5]

    # the oracle's samples are exactly half correct: Avg@4 = 1/2, pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass@4 = 1,
    # on every benchmark, through verification, pass@k and both tables
    for bench in prep["available"]:
        res = json.loads((out / "eval" / "oracle_s0" / "results" / f"{bench}.json").read_text())
        assert res["avg@n"] == 0.5 and res["pass@k"] == pytest.approx({"1": 0.5, "2": 5 / 6, "4": 1.0}, abs=1e-12)
    row = "| oracle (half correct) | measured | 50.0 | 50.0 | - | 50.0 | 50.0 | 50.0 | - |"
    assert row in (out / "tables" / "pass1.md").read_text()
    assert "| oracle (half correct) | AIME24 | 4 | 50.0 | 83.3 | 100.0 |" in (out / "tables" / "passk.md").read_text()

    pass1 = (out / "tables" / "pass1.md").read_text()
    assert pass1.startswith("Measured: a tiny random qwen2 model") and "| SetPO+GRPO | measured |" in pass1
    for f in ("figures/passk.png", "figures/passk.csv", "figures/train_curves.png", "tables/passk.md"):
        assert (out / f).is_file()

    # a second call finds every step done; a different config in the same folder is refused
    assert main(args) == 0
    assert {p.stem: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")} == steps
    with pytest.raises(RunExistsError):
        main([*args, "--seeds", "2"])


def test_publish_copies_tables_and_figures_with_their_data(tmp_path):
    run = tmp_path / "run"
    (run / "figures").mkdir(parents=True)
    for f in ("figures/passk.png", "figures/passk.csv", "pass1.md"):
        (run / f).write_text(f)
    dest = publish([run / "figures" / "passk.png", run / "pass1.md"], tmp_path / "paper_figures" / "math_pipeline")
    assert sorted(p.name for p in dest.iterdir()) == ["pass1.md", "passk.csv", "passk.png"]
