"""verl's platform interface for plain CPU processes (device ``cpu``, collectives over ``gloo``)."""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase

CPU_DEVICE = torch.device("cpu")


def _noop(*_: Any, **__: Any) -> None:
    return None


def _zero(*_: Any, **__: Any) -> int:
    return 0


def _device_module() -> types.ModuleType:
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes on its device module (memory stats, seeding)."""
    module = types.ModuleType("setpo_verl_cpu_device")
    for name in ("Event", "Stream", "current_stream", "stream", "synchronize", "is_available", "device_count"):
        setattr(module, name, getattr(torch.cpu, name))
    module.current_device = lambda: CPU_DEVICE
    module.get_device_name = lambda *_: "CPU"
    module.set_device = _noop
    module.empty_cache = _noop
    module.set_per_process_memory_fraction = _noop
    module.reset_peak_memory_stats = _noop
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(module, name, _zero)
    module.mem_get_info = lambda *_, **__: (0, 0)
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.get_rng_state = torch.get_rng_state
    module.set_rng_state = torch.set_rng_state
    module.is_initialized = lambda: True
    sys.modules.setdefault(module.__name__, module)
    return module


DEVICE_MODULE = _device_module()


class PlatformCPU(PlatformBase):
    """The ``cpu`` platform: the device id is ``torch.device("cpu")`` so that verl's ``.to(get_device_id())`` stays
    on the CPU; Ray "GPUs" are logical (``ray_init.num_gpus``) and only place the workers."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> Any:
        return CPU_DEVICE

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def nvtx_range(self, msg: str):
        return contextlib.nullcontext()

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
