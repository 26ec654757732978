"""reproduce/gapo_lists.py: config presets, rewards, and a minimal end-to-end run (tiny sizes)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import yaml

from reproduce import gapo_lists as gl
from reproduce.common import RunExistsError, publish, read_config


def test_config_file_overrides_the_profile_and_rejects_unknown(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rl_steps: 7\nseeds: [3, 4]\n")
    cfg = read_config(f, gl.GapoListsConfig, "gapo_lists config", gl.PROFILES["full"])
    assert cfg.rl_steps == 7 and cfg.seeds == (3, 4)
    assert cfg.sft_steps == gl.PROFILES["full"].sft_steps
    f.write_text("rl_stepz: 7\n")
    with pytest.raises(ValueError, match="rl_stepz"):
        read_config(f, gl.GapoListsConfig, "gapo_lists config", gl.PROFILES["quick"])
    with pytest.raises(SystemExit):  # --config FILE with an unknown field, or an unknown profile: one-line errors
        gl.prepare(["--config", str(f)])
    with pytest.raises(SystemExit):
        gl.prepare(["--profile", "huge"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"seeds": (1, 1)}, "distinct"),
        ({"seeds": ()}, "distinct"),
        ({"methods": ("grpo", "ppo")}, "unknown method"),
        ({"num_generations": 2}, ">= 3"),
        ({"setpo_lambda": 0.0}, "setpo_lambda"),
        ({"n_categories": 0}, "n_categories"),
        ({"n_categories": 3, "open_categories": 4}, "open_categories"),
        ({"eval_samples": 1}, ">= 2"),
        ({"rl_open_fraction": 1.5}, "rl_open_fraction"),
    ],
)
def test_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        replace(gl.PROFILES["quick"], **kwargs)


def test_quick_profile_settings():
    q, f = gl.PROFILES["quick"], gl.PROFILES["full"]
    assert set(q.methods) == set(gl.METHODS)
    assert q.eval_lists == 10 and q.eval_samples == 100  # GAPO's list evaluation size
    assert f.open_samples == 500 and len(f.seeds) >= 3  # Unique@500, several seeds
    assert all(m.setpo_lambda > 0 for m in (q, f))


def test_validity_reward_and_group_distinct_monitor():
    comps = [" apple", " Plum.", " rock", "", " fig", " fig"]
    valid = [["apple", "plum", "fig"]] * 6
    assert gl.validity_reward(None, comps, valid) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    # groups of 3: {apple, plum} distinct valid -> 2/3; {fig} -> 1/3
    assert gl._group_distinct(None, comps, 3, valid) == pytest.approx([2 / 3] * 3 + [1 / 3] * 3)


def test_reward_setup_per_method():
    from setpo.integrations.trl import GroupRewardFunction, SetPOConfig

    cfg = gl.PROFILES["quick"]
    for method in ("grpo", "gapo", "setpo_grpo"):
        funcs, weights = gl.reward_setup(method, cfg)
        assert funcs[0] is gl.validity_reward and weights == [1.0, 0.0]
    # GAPO is the method: its R~ replaces the validity reward; SetPO's fields stay unset
    gapo = gl.method_fields("gapo", cfg)
    assert gapo == {"diversity_method": "gapo", "diversity_method_kwargs": {"form": "published", "count": "inclusive"}}
    assert SetPOConfig(output_dir="unused", use_cpu=True, bf16=False, **gapo).method_params["form"] == "published"
    assert gl.method_fields("setpo_gapo", cfg) == {"setpo_lambda": cfg.setpo_lambda}
    assert gl.method_fields("grpo", cfg) == {"setpo_lambda": 0.0}
    # SetPO+GAPO: GAPO's reward is the task reward and SetPO's credit is added to it
    funcs, weights = gl.reward_setup("setpo_gapo", cfg)
    assert isinstance(funcs[0], GroupRewardFunction) and funcs[0].__name__ == "gapo" and weights == [1.0, 0.0, 0.0]
    # the GAPO function is setpo.gapo_rewards on the extracted answers: group (apple, apple, fig), L = 3
    r = funcs[0].score(["p"] * 3, [" apple", " apple", " fig"], 3, valid_answers=[["apple", "fig", "kiwi"]] * 3)
    assert r.tolist() == pytest.approx([1 - (2 / 3 - 1 / 3)] * 2 + [1 - (1 / 3 - 1 / 3)])


def test_the_gapo_arm_logs_its_own_reward():
    row = {"step": 1, "reward": 0.5, "reward_std": 0.1, "frac_reward_zero_std": 0.0,
           "rewards/validity_reward/mean": 0.5, "method/gapo/reward": -0.2, "method/gapo/reward_std": 0.3,
           "method/gapo/frac_reward_zero_std": 0.25, "setpo/shaping_ratio": 2.0, "method/gapo/time_s": 0}  # fmt: skip
    assert gl._log_row(row, "gapo") == {
        "step": 1, "reward": -0.2, "reward_std": 0.3, "frac_reward_zero_std": 0.25, "rewards/validity_reward/mean": 0.5,
        "rewards/gapo/mean": -0.2, "rewards/gapo/std": 0.3,
    }  # fmt: skip
    assert gl._log_row(row, "setpo_grpo") == {
        "step": 1, "reward": 0.5, "reward_std": 0.1, "frac_reward_zero_std": 0.0, "rewards/validity_reward/mean": 0.5,
        "setpo/shaping_ratio": 2.0,
    }  # fmt: skip


TINY = dict(
    seeds=[0],
    hidden_size=16,
    num_layers=1,
    num_heads=2,
    n_categories=2,
    sft_steps=2,
    sft_batch_size=4,
    rl_steps=1,
    rl_prompts_per_step=1,
    num_generations=3,
    eval_lists=2,
    eval_samples=3,
    open_categories=2,
    open_samples=3,
    metric_embedder="hashed",
)


def test_minimal_pipeline_runs_resumes_and_refuses_other_config(tmp_path, monkeypatch):
    cfg_file = tmp_path / "tiny.yaml"
    cfg_file.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "run"
    argv = ["--profile", "quick", "--config", str(cfg_file), "--out", str(out), "--no-progress"]
    assert gl.main(argv) == 0

    steps = sorted(p.stem for p in (out / "steps").glob("*.json"))
    expected = ["sft_s0", "eval_sft_s0"] + [f"{k}_{m}_s0" for m in gl.METHODS for k in ("rl", "eval")]
    assert steps == sorted(expected)
    for name in ("gapo_lists", "gapo_lists_distributions", "gapo_lists_training"):
        assert (out / f"{name}.png").stat().st_size > 0
        assert (out / f"{name}.csv").stat().st_size > 0
    table = (out / "table.md").read_text()
    assert "Scale:" in table and "0.31" in table and "147" in table  # beside GAPO's reported numbers
    for label in ("SFT start", "GRPO", "GAPO", "SetPO+GRPO", "SetPO+GAPO"):
        assert f"| {label} |" in table
    ev = json.loads((out / "steps" / "eval_gapo_s0.json").read_text())
    assert len(ev["lists"]) == 2 and len(ev["open"]) == 2
    assert all(sum(r["counts"]) <= 3 for r in ev["lists"])
    for key in ("validity_lists", "favourite_rate", "first_item_rate", "unlisted_same_category_rate", "validity_open"):
        assert 0.0 <= ev["summary"][key] <= 1.0
    # every list answer is a listed item, a same-category item missing from the list, or something else
    assert ev["summary"]["validity_lists"] + ev["summary"]["unlisted_same_category_rate"] <= 1.0 + 1e-12
    log = json.loads((out / "steps" / "rl_setpo_gapo_s0.json").read_text())["log"]
    assert "setpo/diversity" in log[0] and "rewards/gapo/mean" in log[0]
    assert "setpo/diversity" not in json.loads((out / "steps" / "rl_gapo_s0.json").read_text())["log"][0]

    # resume: every unit is recorded, so nothing is trained again
    def boom(*a, **k):
        raise AssertionError("a finished step was recomputed")

    monkeypatch.setattr(gl, "train_sft", boom)
    monkeypatch.setattr(gl, "train_rl", boom)
    monkeypatch.setattr(gl, "evaluate_model", boom)
    assert gl.main(argv) == 0

    # a different config in the same folder is refused without --overwrite
    cfg_file.write_text(yaml.safe_dump({**TINY, "rl_lr": 1e-2}))
    with pytest.raises(RunExistsError):
        gl.main(argv)
    assert json.loads((out / "config.json").read_text())["config"]["rl_lr"] == asdict(gl.PROFILES["quick"])["rl_lr"]


def test_publish_copies_figure_with_its_data(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    (src / "fig.png").write_bytes(b"png")
    (src / "fig.csv").write_text("a\n1\n")
    (src / "table.md").write_text("# t\n")
    dest = publish([src / "fig.png", src / "table.md"], dest=tmp_path / "pub")
    assert sorted(p.name for p in dest.iterdir()) == ["fig.csv", "fig.png", "table.md"]
