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
    assert cfg.trainer.v1.trainer_mode == "sync" and setpo_cfg.enabled  # defaults, unused by the sync trainer


def test_setpo_estimator_name_is_refused_not_silent():
    """verl 0.9.1 never passes the responses to an estimator: the name ``setpo`` must not exist, and asking for it
    is a clear error at launch, never a silent GRPO run."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    runner.register()
    assert "setpo" not in ADV_ESTIMATOR_REGISTRY
    cfg = runner.compose_config(["algorithm.adv_estimator=setpo", "actor_rollout_ref.rollout.name=vllm"])
    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4
    cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4
    with pytest.raises(ValueError, match="adv_estimator=setpo does not exist.*trainer_mode=setpo_sync"):
        runner.check_config(cfg)


def test_setting_verl_ignores_is_refused():
    """verl 0.9.1's V1 replay buffer only logs a warning for filter_groups.max_num_gen_batches; the check refuses it."""
    args = [
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.name=vllm",
        "algorithm.filter_groups.enable=true",
    ]
    cfg = runner.compose_config([*args, "algorithm.filter_groups.max_num_gen_batches=10"])
    assert any("max_num_gen_batches=10 is ignored" in m for m in runner.verl_ignored_settings(cfg))
    assert runner.verl_ignored_settings(runner.compose_config(args)) == []
    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4
    cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4
    with pytest.raises(ValueError, match="would ignore these settings.*max_num_gen_batches"):
        runner.check_config(cfg)


def test_cuda_embedder_runner_keeps_gpu_visibility_in_its_runtime_env():
    from setpo.integrations.verl.config import SetPOVerlConfig

    options = runner.task_runner_options(SetPOVerlConfig(embed_device="cuda"), active=True)
    assert options == {"runtime_env": {"env_vars": {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}}}
    assert hasattr(runner.task_runner(SetPOVerlConfig(embed_device="cuda"), active=True), "options"), "run_ppo calls it"
    assert runner.task_runner(SetPOVerlConfig(embed_device="cpu"), active=True) is runner.SetPOTaskRunner
    assert runner.task_runner(SetPOVerlConfig(embed_device="cuda"), active=False) is runner.SetPOTaskRunner


@pytest.mark.slow
def test_cuda_embedder_runner_sees_the_node_gpus_where_ray_would_hide_them(monkeypatch):
    """On a real local Ray, with Ray's old blanking forced on (RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1, the default
    before Ray 2.60): a GPU-less actor gets CUDA_VISIBLE_DEVICES="", the SetPO TaskRunner for embed_device=cuda
    keeps the node's value. No GPU is needed: Ray sets the variable from its resource accounting."""
    import os

    import ray

    from setpo.integrations.verl.config import SetPOVerlConfig

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "1")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        visible = lambda self: os.environ.get("CUDA_VISIBLE_DEVICES")  # noqa: E731
        plain = runner.SetPOTaskRunner.remote()
        cuda = runner.task_runner(SetPOVerlConfig(embed_device="cuda"), active=True).remote()
        assert ray.get(plain.__ray_call__.remote(visible)) == ""
        assert ray.get(cuda.__ray_call__.remote(visible)) == "0"
    finally:
        ray.shutdown()
