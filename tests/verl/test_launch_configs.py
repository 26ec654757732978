"""Dry run of every full-scale launch (``python -m reproduce.scale``): verl's hydra config composed with each
setting's overrides and validated by verl's own checks (plus the SetPO ones), without GPUs and without Ray."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import InstantiationException

from reproduce.scale.settings import RAW_PROMPT_TEMPLATE, SETTINGS, overrides
from setpo.integrations.verl.runner import check_config, compose_config, verl_ignored_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_launch_script_composes_and_validates():
    seen_tables = set()
    for s in SETTINGS.values():
        cfg = compose_config(overrides(s, "/data", 1, "/runs/x"))
        setpo_cfg = check_config(cfg)
        actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
        assert actor.optim.lr == pytest.approx(s.lr)
        assert (rollout.n, rollout.temperature) == (s.n, s.temperature)
        assert (actor.clip_ratio_low, actor.clip_ratio_high) == (pytest.approx(s.clip_low), pytest.approx(s.clip_high))
        assert actor.kl_loss_coef == pytest.approx(s.kl) and actor.use_kl_loss
        assert (cfg.data.train_batch_size, actor.ppo_mini_batch_size) == (s.batch, s.mini_batch)
        assert cfg.data.max_response_length == s.max_response
        assert cfg.trainer.total_epochs == s.epochs
        assert actor.policy_loss.loss_mode == ("gspo" if s.base == "gspo" else "vanilla")
        assert cfg.algorithm.filter_groups.enable == (s.base == "dapo")
        assert cfg.trainer.max_actor_ckpt_to_keep == 1 and cfg.trainer.resume_mode == "auto"
        raw = cfg.actor_rollout_ref.model.custom_chat_template
        assert raw == (RAW_PROMPT_TEMPLATE if s.table == 8 else None)
        if s.lam is None:
            assert cfg.trainer.v1.trainer_mode == "sync" and "setpo" not in cfg
        else:
            assert cfg.trainer.v1.trainer_mode == "setpo_sync"
            assert setpo_cfg.lam == pytest.approx(s.lam) and setpo_cfg.embedder == "Qwen/Qwen3-Embedding-0.6B"
            assert setpo_cfg.embedder_kwargs["batch_size"] == (8 if s.table == 7 else 64)
        seen_tables.add(s.table)
    assert seen_tables == {4, 5, 6, 7, 8}


def test_check_composes_both_arms_of_a_named_run(capsys):
    from reproduce.scale.__main__ import main

    assert main(["table6_dapo_7b", "--check"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("ok ")] == [
        "ok table6_dapo_math7b (trainer mode sync)",
        "ok table6_setpo_dapo_math7b (trainer mode setpo_sync)",
    ]


def test_no_launch_script_sets_a_key_verl_ignores():
    """verl 0.9.1 logs a warning, and goes on, for settings its V1 trainer does not read (DAPO's
    max_num_gen_batches); no script may carry one."""
    for s in SETTINGS.values():
        assert verl_ignored_settings(compose_config(overrides(s, "/data", 1, "/runs/x"))) == [], s.name
    dapo = [o for o in overrides(SETTINGS["table6_setpo_dapo_math1.5b"], "/d", 1, "/r") if "filter_groups" in o]
    assert dapo == ["algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=reward"]


def test_no_launch_script_sets_a_key_the_v1_trainer_reads_nowhere():
    """``data.truncation`` (stored by verl/utils/dataset/rl_dataset.py, used by nothing) and
    ``rollout.val_kwargs.do_sample`` (read only by the V0 trainer, verl/trainer/ppo/ray_trainer.py)."""
    for s in SETTINGS.values():
        keys = {o.split("=", 1)[0] for o in overrides(s, "/data", 1, "/runs/x")}
        assert not keys & {"data.truncation", "actor_rollout_ref.rollout.val_kwargs.do_sample"}, s.name


def _base():
    return overrides(SETTINGS["table4_setpo_grpo_math1.5b"], "/data", 1, "/runs/x")


@pytest.mark.parametrize(
    "change, match",
    [
        (["actor_rollout_ref.actor.ppo_mini_batch_size=128"], "ppo_mini_batch_size"),
        (["data.train_batch_size=63"], "divisible"),
        (["trainer.v1.trainer_mode=sync"], "would be ignored"),
        (["algorithm.adv_estimator=gae"], "cannot use algorithm.adv_estimator=gae"),
        (["actor_rollout_ref.actor.loss_agg_mode=mean"], "loss_agg_mode"),
        (["actor_rollout_ref.actor.policy_loss.loss_mode=nope"], "nope"),
        (["+setpo.embed_device=tpu"], "embed_device"),
        (["algorithm.adv_estimator=setpo"], "adv_estimator=setpo does not exist"),
        (["algorithm.filter_groups.enable=true", "algorithm.filter_groups.max_num_gen_batches=10"], "would ignore"),
    ],
)
def test_the_check_rejects_broken_configs(change, match):
    args = [a for a in _base() if not any(a.split("=")[0] == c.split("=")[0] for c in change)] + change
    with pytest.raises((ValueError, AssertionError, InstantiationException), match=match):
        check_config(compose_config(args))


def test_missing_rollout_engine_is_reported():
    args = [a for a in _base() if not a.startswith("actor_rollout_ref.rollout.name=")]
    with pytest.raises(ValueError, match="rollout.name"):
        check_config(compose_config(args))


def test_runtime_check_needs_the_data_files(tmp_path):
    cfg = compose_config(overrides(SETTINGS["table4_grpo_math1.5b"], str(tmp_path), 1, str(tmp_path / "run")))
    with pytest.raises(ValueError, match="data.train_files not found"):
        check_config(cfg, runtime=True)


def test_entry_point_composes_through_its_hydra_main():
    """``python -m setpo.integrations.verl ... --cfg job`` prints the composed config and runs nothing."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    args = [sys.executable, "-m", "setpo.integrations.verl", "+setpo.lambda=0.25", "+setpo.embedder=hashed"]
    out = subprocess.run([*args, "trainer.v1.trainer_mode=setpo_sync", "--cfg", "job"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "setpo:" in out.stdout and "lambda: 0.25" in out.stdout and "trainer_mode: setpo_sync" in out.stdout
