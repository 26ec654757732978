"""CPU support for a small verl 0.9.1 run (a smoke test of the SetPO trainer mode, not a way to train models).

It lives beside the verl tests, outside the installed package: ``tests/verl`` must be on ``PYTHONPATH`` (pytest
puts it on ``sys.path``; ``test_cpu_training.run_verl`` passes it to the training process and its Ray workers).

Stock verl 0.9.1 cannot train on a machine without accelerators. This package fills the gaps from outside verl,
through its plugin registries, in every process of the run (verl imports it when ``VERL_USE_EXTERNAL_MODULES``
names it):

* a ``cpu`` platform (``VERL_PLATFORM=cpu``) with plain ``gloo`` as its collective backend;
* the FSDP training engine registered for the ``cpu`` device (run it with ``strategy=fsdp2``: FSDP1 passes an
  integer device id, i.e. a GPU);
* an ``hf`` rollout backend (``rollout.name=hf``, ``hf_rollout.py``): ``transformers.generate`` in a Ray actor
  per replica, with the trainer's weights synced into it after every update;
* a TransferQueue start-up that fails with a clear error after ``TQ_INIT_TIMEOUT_S`` instead of waiting forever
  for storage units that the Ray cluster has no CPUs for.

``cpu_overrides`` gives the matching hydra overrides (logical Ray GPUs, eager attention, fsdp2, one TransferQueue
storage unit, ...). Launch::

    PYTHONPATH=tests/verl:$PYTHONPATH VERL_USE_EXTERNAL_MODULES=verl_cpu VERL_PLATFORM=cpu \\
        python -m setpo.integrations.verl <data/model overrides> <cpu_overrides(...)> \\
        trainer.v1.trainer_mode=setpo_sync +setpo.lambda=0.1 +setpo.embedder=hashed

It needs a Llama-family model (verl's Qwen token builder wants a single-token "\\n"), e.g. ``python -m setpo.tiny
--family llama``. Written against verl 0.9.1 exactly: any other version is refused at import.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any

import verl

from setpo.integrations.verl.version import VERL_VERSION
from verl_cpu.platform import PlatformCPU

PLUGIN_MODULE = "verl_cpu"
#: environment of every process of a CPU run (the driver's own and, through Ray's runtime_env, the actors')
CPU_ENV = {"VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE, "VERL_PLATFORM": "cpu"}
TQ_INIT_TIMEOUT_S = float(os.environ.get("SETPO_VERL_TQ_INIT_TIMEOUT_S", "300"))
#: when set, the TaskRunner writes each trained batch's rows (uid, response, reward, advantages) there as JSON
DUMP_ENV = "SETPO_VERL_DUMP_DIR"

__all__ = [
    "CPU_ENV",
    "VERL_VERSION",
    "PlatformCPU",
    "check_verl_version",
    "constant_on_even_targets_reward",
    "cpu_overrides",
    "digit_share_reward",
    "install",
]


def check_verl_version(version: str | None = None) -> None:
    """Refuse any verl but the one this support was written against (it relies on verl internals); no override."""
    version = verl.__version__ if version is None else version
    if version != VERL_VERSION:
        raise RuntimeError(
            f"verl_cpu supports verl {VERL_VERSION} only, found verl {version}: the CPU "
            "platform, the hf rollout and the registrations depend on that version's internals"
        )


def cpu_overrides(
    n_workers: int = 1, num_cpus: int = 8, response_length: int = 16, dynamic_bsz: bool = False
) -> list[str]:
    """Hydra overrides for a CPU run with `n_workers` FSDP ranks (data parallel) on one Ray node.

    `num_cpus` is Ray's logical CPU count (TaskRunner, TransferQueue controller and storage unit, rollout
    actors each reserve one), independent of the physical cores.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if num_cpus < n_workers + 4:
        raise ValueError(f"num_cpus={num_cpus} is too few for {n_workers} workers: Ray needs n_workers + 4")
    overrides = [
        "trainer.device=cpu",
        "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={n_workers}",
        f"+ray_kwargs.ray_init.num_gpus={n_workers}",  # logical GPUs: verl's resource pools count them
        f"ray_kwargs.ray_init.num_cpus={num_cpus}",
        "+ray_kwargs.ray_init.include_dashboard=false",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        "actor_rollout_ref.model.use_remove_padding=false",
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.rollout.response_length={response_length}",
        f"data.max_response_length={response_length}",
        f"actor_rollout_ref.actor.use_dynamic_bsz={str(dynamic_bsz).lower()}",
    ]
    # every Ray process imports the plugin (the local raylet inherits the driver's environment too; this is
    # explicit so that it also holds when the driver sets the variables only for itself)
    overrides += [f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}={v}" for k, v in CPU_ENV.items()]
    return overrides


def digit_share_reward(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
) -> float:
    """Smoke-test reward (verl's ``compute_score`` signature): the share of digits in the response.

    A random tiny model never earns a task reward, so GRPO would see all-zero groups; this one varies
    within every group. Use ``reward.custom_reward_function.path=pkg://verl_cpu``.
    """
    return sum(c.isdigit() for c in solution_str) / max(1, len(solution_str))


#: The constant reward of `constant_on_even_targets_reward`.
CONSTANT_REWARD = 0.5


def constant_on_even_targets_reward(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
) -> float:
    """Smoke-test reward for DAPO's group filter: `CONSTANT_REWARD` for every response to a prompt whose
    ``ground_truth["target"]`` is even (a group without reward signal, which the filter drops), the digit share
    (`digit_share_reward`) otherwise."""
    if int(ground_truth["target"]) % 2 == 0:
        return CONSTANT_REWARD
    return digit_share_reward(data_source, solution_str, ground_truth, extra_info)


def _plain_gloo(init_fn: Any) -> Any:
    """verl's process-group init with ``backend="gloo"`` on CPU (verl builds the invalid ``cpu:gloo,cpu:gloo``)."""

    def init(timeout_second: Any = None, backend: str | None = None) -> Any:
        return init_fn(timeout_second=timeout_second, backend=backend or "gloo")

    init.__wrapped__ = init_fn
    return init


def _tq_init_with_timeout(init_fn: Any) -> Any:
    """``transfer_queue.init`` that raises a clear error after ``TQ_INIT_TIMEOUT_S`` instead of hanging."""

    def init(conf: Any = None) -> Any:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        try:
            return pool.submit(init_fn, conf).result(timeout=TQ_INIT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            import ray

            units = None
            try:
                units = conf.backend.SimpleStorage.num_data_storage_units
            except Exception:  # noqa: BLE001 - only for the message
                pass
            free = ray.available_resources().get("CPU", 0) if ray.is_initialized() else "no known CPU"
            raise TimeoutError(
                f"TransferQueue did not start within {TQ_INIT_TIMEOUT_S:.0f} s: its controller and each of its "
                f"{units} storage units reserve 1 Ray CPU, and Ray has {free} free; set "
                "transfer_queue.backend.SimpleStorage.num_data_storage_units lower or "
                "ray_kwargs.ray_init.num_cpus higher"
            ) from None
        finally:
            pool.shutdown(wait=False)

    init.__wrapped__ = init_fn
    return init


def _dump_before_clear(clear_fn: Any, dump_dir: str) -> Any:
    """``transfer_queue.kv_clear`` that first writes the trained batch (partition ``train``) to `dump_dir`."""
    counter = {"step": 0}

    def kv_clear(keys: Any, partition_id: str, *args: Any, **kwargs: Any) -> Any:
        if partition_id == "train" and keys:
            import json

            import transfer_queue

            fields = ["uid", "responses", "response_mask", "rm_scores", "advantages"]
            try:
                data = transfer_queue.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=fields)
            except ValueError:  # the replay buffer's clear of prompt entries, not a trained batch
                return clear_fn(keys, partition_id, *args, **kwargs)
            uids = data["uid"].tolist() if hasattr(data["uid"], "tolist") else list(data["uid"])
            rows = []
            for i, key in enumerate(keys):
                rows.append(
                    {
                        "key": key,
                        "uid": uids[i],
                        "responses": data["responses"][i].tolist(),
                        "response_mask": data["response_mask"][i].tolist(),
                        "reward": float(data["rm_scores"][i].sum()),
                        "advantages": data["advantages"][i].tolist(),
                    }
                )
            counter["step"] += 1
            os.makedirs(dump_dir, exist_ok=True)
            with open(os.path.join(dump_dir, f"batch_{counter['step']}.json"), "w") as f:
                json.dump(rows, f)
        return clear_fn(keys, partition_id, *args, **kwargs)

    kv_clear.__wrapped__ = clear_fn
    return kv_clear


def install() -> None:
    """Register the CPU platform, engine, rollout and start-up guards with verl (idempotent)."""
    check_verl_version()
    import transfer_queue
    import verl.utils.distributed as dist
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get("cpu") is None:
        PlatformRegistry.register(platform="cpu")(PlatformCPU)
    if not hasattr(dist.initialize_global_process_group_ray, "__wrapped__"):
        # engine_workers binds the name at its import, which comes after this plugin's
        dist.initialize_global_process_group_ray = _plain_gloo(dist.initialize_global_process_group_ray)
    if not hasattr(transfer_queue.init, "__wrapped__"):
        transfer_queue.init = _tq_init_with_timeout(transfer_queue.init)
    dump_dir = os.environ.get(DUMP_ENV)
    if dump_dir and not hasattr(transfer_queue.kv_clear, "__wrapped__"):
        transfer_queue.kv_clear = _dump_before_clear(transfer_queue.kv_clear, dump_dir)

    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    registry = EngineRegistry._engines.get("language_model", {})
    if "cpu" not in registry.get("fsdp2", {}):
        EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(
            FSDPEngineWithLMHead
        )

    from verl_cpu import hf_rollout

    hf_rollout.register()


install()
