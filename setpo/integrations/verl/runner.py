"""Entry point ``python -m setpo.integrations.verl <hydra overrides>``: verl's PPO main with the SetPO extension.

It composes verl's own ``ppo_trainer`` config (so every normal verl override works), reads the top-level
``setpo`` section (``+setpo.lambda=0.05 +setpo.embedder=... +setpo.embed_device=cpu``), checks the whole
config, and runs verl's ``run_ppo`` with a TaskRunner that registers the ``setpo_sync`` trainer mode inside the
Ray actor (registries are per process) before verl looks it up. With ``setpo.embed_device=cuda`` that
TaskRunner is started with ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0`` so that Ray leaves the node's GPUs visible
to it although it reserves none.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from typing import Any

import hydra
import ray
from omegaconf import DictConfig, OmegaConf

from setpo.embedders import available_embedders
from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.version import check_verl_version

check_verl_version()  # before verl's internals are imported: another verl is refused, not run

from verl.trainer.main_ppo import TaskRunnerV1, run_ppo  # noqa: E402

TRAINER_MODE = "setpo_sync"
CONFIG_MODULE = "verl.trainer.config"
CONFIG_NAME = "ppo_trainer"
#: Ray >= 2.49 reads it in each worker (ray-project/ray#54928): "0" keeps CUDA_VISIBLE_DEVICES of an actor that
#: reserves no GPU as the node set it; older Ray always blanks it, Ray >= 2.60 does not by default.
RAY_GPU_VISIBILITY_ENV = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
#: An advantage-estimator name users try, which verl cannot have (below).
NO_SUCH_ESTIMATOR = "setpo"
NO_SETPO_ESTIMATOR = (
    "algorithm.adv_estimator=setpo does not exist: verl 0.9.1 passes an advantage estimator the rewards, mask, "
    f"uids and config.algorithm but never the responses, so no estimator can compute the SetPO credit. Use "
    f"trainer.v1.trainer_mode={TRAINER_MODE} with algorithm.adv_estimator=grpo (python -m setpo.integrations.verl)"
)


def register() -> None:
    """Import the module whose decorator registers the ``setpo_sync`` trainer mode with verl."""
    import setpo.integrations.verl.trainer  # noqa: F401


def verl_ignored_settings(config: DictConfig) -> list[str]:
    """The warnings verl 0.9.1 logs while building the V1 trainer's replay buffer about settings it ignores.

    verl reads ``algorithm.filter_groups`` there and only *warns* about keys its V1 ReplayBuffer does not use
    (``max_num_gen_batches``); this builds the buffer from `config` on a bare trainer (no Ray, no workers) and
    returns those warnings.
    """
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    trainer = PPOTrainerSync.__new__(PPOTrainerSync)
    trainer.config = config
    mode = config.trainer.v1.trainer_mode
    trainer.trainer_mode = "sync" if mode == TRAINER_MODE else mode  # setpo_sync takes the sync branches
    trainer._add_prompts_to_generate = lambda n: n  # the refill callback; never called while building
    captured: list[str] = []

    class _Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if record.levelno >= logging.WARNING and "ignored" in message:
                captured.append(message)

    handler = _Capture()
    trainer_base.logger.addHandler(handler)
    try:
        trainer._build_replay_buffer()
    finally:
        trainer_base.logger.removeHandler(handler)
    return captured


def compose_config(overrides: Sequence[str]) -> DictConfig:
    """verl's ``ppo_trainer`` config with hydra command-line `overrides` applied (no Ray, no GPU)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=list(overrides))


def check_config(config: DictConfig, runtime: bool = False) -> SetPOVerlConfig:
    """Validate a composed config the way verl's main does, plus the SetPO checks; returns the SetPO settings.

    Beyond ``verl.utils.config.validate_config`` this resolves every interpolation, builds the algorithm
    and rollout dataclasses and the V1 replay buffer, looks up the estimator, policy loss, trainer mode and
    custom reward function, refuses a ``setpo`` section that the chosen trainer mode would ignore and any
    setting verl warns it ignores. With ``runtime=True`` it also checks what only the launch machine can
    provide (data files, the embedder's package).
    """
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.import_utils import load_extern_object

    register()
    from setpo.integrations.verl.trainer import SetPOTrainerSync, check_base_estimator

    OmegaConf.to_container(config, resolve=True)  # every interpolation resolves
    if OmegaConf.is_missing(config.actor_rollout_ref.rollout, "name"):
        raise ValueError("actor_rollout_ref.rollout.name is not set (vllm or sglang)")
    setpo_cfg = SetPOVerlConfig.from_mapping(
        OmegaConf.to_container(config.setpo, resolve=True) if "setpo" in config else None
    )
    if not config.trainer.use_v1:
        raise ValueError("the SetPO entry point needs verl's V1 trainer (trainer.use_v1=true)")
    mode = config.trainer.v1.trainer_mode
    trainer_cls = get_trainer_cls(mode)
    adv_estimator = config.algorithm.adv_estimator
    if getattr(adv_estimator, "value", adv_estimator) == NO_SUCH_ESTIMATOR:
        raise ValueError(NO_SETPO_ESTIMATOR)
    if issubclass(trainer_cls, SetPOTrainerSync):
        check_base_estimator(adv_estimator)
    elif "setpo" in config and setpo_cfg.enabled:
        raise ValueError(
            f"setpo.method={setpo_cfg.method} ({setpo_cfg.as_overrides()}) would be ignored by trainer.v1.trainer_mode="
            f"{mode}: set trainer.v1.trainer_mode={TRAINER_MODE} (or drop the setpo section for a baseline run)"
        )
    get_adv_estimator_fn(adv_estimator)
    get_policy_loss_fn(config.actor_rollout_ref.actor.policy_loss.loss_mode)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.algorithm)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    ignored = verl_ignored_settings(config)
    if ignored:
        raise ValueError(f"verl 0.9.1 would ignore these settings (drop or replace them): {ignored}")
    reward_fn = config.reward.custom_reward_function
    if reward_fn.get("path"):
        if not callable(load_extern_object(module_path=reward_fn.path, object_name=reward_fn.name)):
            raise ValueError(f"custom reward {reward_fn.path}:{reward_fn.name} is not callable")
    if runtime:
        _check_runtime(config, setpo_cfg, active=_setpo_active(config, setpo_cfg))
    return setpo_cfg


def _check_runtime(config: DictConfig, setpo_cfg: SetPOVerlConfig, active: bool) -> None:
    for key in ("train_files", "val_files"):
        files = config.data.get(key)
        files = [files] if isinstance(files, str) else list(files or [])
        missing = [f for f in files if not os.path.exists(os.path.expanduser(f))]
        if missing:
            raise ValueError(f"data.{key} not found: {missing} (write them with python -m setpo.data.prepare)")
    if active and setpo_cfg.embedder.strip().lower() not in available_embedders():
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ValueError(
                f"setpo.embedder={setpo_cfg.embedder} needs sentence-transformers in this environment: "
                "pip install sentence-transformers"
            )


@ray.remote
class SetPOTaskRunner(TaskRunnerV1.__ray_actor_class__):
    """verl's V1 TaskRunner, registering the SetPO trainer mode in its own (actor) process first."""

    def run(self, config: DictConfig):
        register()
        return super().run(config)


def task_runner_options(setpo_cfg: SetPOVerlConfig, active: bool) -> dict[str, Any]:
    """Ray actor options of the TaskRunner: with an active ``embed_device=cuda``, ``RAY_GPU_VISIBILITY_ENV``.

    The SetPO embedder runs in this actor, which reserves no GPU. The env var in its own ``runtime_env``
    (merged with the job's) makes Ray >= 2.49 leave the node's GPUs visible to it; verl's other GPU-less
    actors keep Ray's default.
    """
    if active and setpo_cfg.embed_device == "cuda":
        return {"runtime_env": {"env_vars": dict(RAY_GPU_VISIBILITY_ENV)}}
    return {}


def task_runner(setpo_cfg: SetPOVerlConfig, active: bool) -> Any:
    """The TaskRunner actor class (with ``task_runner_options`` as its defaults) to hand to verl's ``run_ppo``.

    A Ray actor class rather than ``.options(...)``'s wrapper, so that ``run_ppo`` can still call ``.options``.
    """
    options = task_runner_options(setpo_cfg, active)
    return ray.remote(**options)(SetPOTaskRunner.__ray_actor_class__) if options else SetPOTaskRunner


@hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base=None)
def main(config: DictConfig) -> None:
    """Check the config (verl's validation plus SetPO's) and run verl's PPO with the SetPO TaskRunner."""
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    setpo_cfg = check_config(config, runtime=True)
    run_ppo(config, task_runner_class=task_runner(setpo_cfg, _setpo_active(config, setpo_cfg)))


def _setpo_active(config: DictConfig, setpo_cfg: SetPOVerlConfig) -> bool:
    from verl.trainer.ppo.v1 import get_trainer_cls

    from setpo.integrations.verl.trainer import SetPOTrainerSync

    return issubclass(get_trainer_cls(config.trainer.v1.trainer_mode), SetPOTrainerSync) and setpo_cfg.needs_embedder
