"""Entry point ``python -m setpo.integrations.verl <hydra overrides>``: verl's PPO main with the SetPO extension.

It composes verl's own ``ppo_trainer`` config (so every normal verl override works), reads the top-level
``setpo`` section (``+setpo.lambda=0.05 +setpo.embedder=... +setpo.embed_device=cpu``), checks the whole
config, and runs verl's ``run_ppo`` with a TaskRunner that registers the ``setpo`` estimator and the
``setpo_sync`` trainer mode inside the Ray actor (registries are per process) before verl looks them up.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence

import hydra
import ray
from omegaconf import DictConfig, OmegaConf
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

from setpo.embedders import available_embedders
from setpo.integrations.verl.config import SetPOVerlConfig

TRAINER_MODE = "setpo_sync"
CONFIG_MODULE = "verl.trainer.config"
CONFIG_NAME = "ppo_trainer"


def register() -> None:
    """Import the modules whose decorators register ``setpo`` (estimator) and ``setpo_sync`` (trainer) with verl."""
    import setpo.integrations.verl.estimator  # noqa: F401
    import setpo.integrations.verl.trainer  # noqa: F401


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
    and rollout dataclasses, looks up the estimator, policy loss, trainer mode and custom reward function,
    and refuses a ``setpo`` section that the chosen trainer mode would ignore. With ``runtime=True`` it also
    checks what only the launch machine can provide (data files, the embedder's package).
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
    if issubclass(trainer_cls, SetPOTrainerSync):
        check_base_estimator(adv_estimator)
    elif "setpo" in config and setpo_cfg.lam > 0:
        raise ValueError(
            f"setpo.lambda={setpo_cfg.lam} would be ignored by trainer.v1.trainer_mode={mode}: "
            f"set trainer.v1.trainer_mode={TRAINER_MODE} (or drop the setpo section for a baseline run)"
        )
    if adv_estimator == "setpo" and not issubclass(trainer_cls, SetPOTrainerSync):
        warnings.warn(
            "algorithm.adv_estimator=setpo receives no responses from verl 0.9.1 and falls back to GRPO; "
            f"use trainer.v1.trainer_mode={TRAINER_MODE} with algorithm.adv_estimator=grpo",
            RuntimeWarning,
            stacklevel=2,
        )
    get_adv_estimator_fn(adv_estimator)
    get_policy_loss_fn(config.actor_rollout_ref.actor.policy_loss.loss_mode)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.algorithm)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    reward_fn = config.reward.custom_reward_function
    if reward_fn.get("path"):
        if not callable(load_extern_object(module_path=reward_fn.path, object_name=reward_fn.name)):
            raise ValueError(f"custom reward {reward_fn.path}:{reward_fn.name} is not callable")
    if runtime:
        _check_runtime(config, setpo_cfg, active=issubclass(trainer_cls, SetPOTrainerSync) and setpo_cfg.lam > 0)
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
    """verl's V1 TaskRunner, registering the SetPO estimator and trainer mode in its own (actor) process first."""

    def run(self, config: DictConfig):
        register()
        return super().run(config)


@hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base=None)
def main(config: DictConfig) -> None:
    """Check the config (verl's validation plus SetPO's) and run verl's PPO with the SetPO TaskRunner."""
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    check_config(config, runtime=True)
    run_ppo(config, task_runner_class=SetPOTaskRunner)
