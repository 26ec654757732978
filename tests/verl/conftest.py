"""Tests of the verl adapter: they need verl 0.9.1 (``bash scripts/setup_verl_env.sh``) and run as
``.venv-verl/bin/python -m pytest tests/verl -q``. In an environment without verl (the main ``.venv``) this
folder is not collected at all: it is a separate suite, not a set of skipped tests.
"""

from __future__ import annotations

import importlib.util

import pytest

# The real package, not this folder: with pytest's rootdir imports, tests/verl itself is importable as a
# namespace package named "verl", which has no origin file.
_spec = importlib.util.find_spec("verl")
HAVE_VERL = _spec is not None and _spec.origin is not None


def pytest_ignore_collect(collection_path, config):
    if not HAVE_VERL:
        return True
    return None


def pytest_configure(config):
    # verl lists the training engines it could not import (megatron, torchtitan, ...); none is needed on CPU.
    config.addinivalue_line("filterwarnings", "ignore:.*engine is not available:UserWarning")


if HAVE_VERL:
    from verl_fakes import InMemoryTQ


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A ``setpo.tiny`` Llama-architecture model with the character tokenizer, saved to a folder."""
    from setpo.tiny import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "llama", family="llama"))


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir):
    """The tiny model's tokenizer as verl loads it (``HFModelConfig.tokenizer``, what the trainer uses)."""
    from verl.utils.config import omega_conf_to_dataclass

    from setpo.integrations.verl.runner import compose_config

    cfg = compose_config([f"actor_rollout_ref.model.path={tiny_model_dir}"])
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.model).tokenizer


@pytest.fixture
def store(monkeypatch) -> InMemoryTQ:
    """An in-memory KV store patched into the ``transfer_queue`` module that verl's trainer imported as ``tq``."""
    import transfer_queue

    s = InMemoryTQ()
    monkeypatch.setattr(transfer_queue, "kv_batch_get", s.kv_batch_get)
    monkeypatch.setattr(transfer_queue, "kv_batch_put", s.kv_batch_put)
    return s
