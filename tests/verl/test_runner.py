"""The Ray TaskRunner of the entry point: verl's V1 runner, registering the SetPO pieces in its own process first."""

from __future__ import annotations

import pytest
from verl.trainer.main_ppo import TaskRunnerV1

from setpo.integrations.verl import runner


def test_task_runner_is_verl_v1_runner_with_registration(monkeypatch):
    cls = runner.SetPOTaskRunner.__ray_actor_class__
    assert issubclass(cls, TaskRunnerV1.__ray_actor_class__)
    calls = []
    monkeypatch.setattr(runner, "register", lambda: calls.append("register"))
    monkeypatch.setattr(TaskRunnerV1.__ray_actor_class__, "run", lambda self, config: calls.append(("run", config)))
    cls.run(object.__new__(cls), "CONFIG")
    assert calls == ["register", ("run", "CONFIG")], "registration must happen before verl looks the trainer up"


def test_baseline_config_without_setpo_section_passes():
    cfg = runner.compose_config(["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.name=vllm"])
    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4
    cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4
    setpo_cfg = runner.check_config(cfg)
    assert cfg.trainer.v1.trainer_mode == "sync" and setpo_cfg.lam > 0  # defaults, unused by the sync trainer


def test_setpo_estimator_without_trainer_mode_warns():
    cfg = runner.compose_config(["algorithm.adv_estimator=setpo", "actor_rollout_ref.rollout.name=vllm"])
    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4
    cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4
    with pytest.warns(RuntimeWarning, match="falls back to GRPO"):
        runner.check_config(cfg)
