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
    from verl_fakes import CharTokenizer, InMemoryTQ


@pytest.fixture
def tokenizer() -> CharTokenizer:
    return CharTokenizer()


@pytest.fixture
def store(monkeypatch) -> InMemoryTQ:
    """An in-memory KV store patched into the ``transfer_queue`` module that verl's trainer imported as ``tq``."""
    import transfer_queue

    s = InMemoryTQ()
    monkeypatch.setattr(transfer_queue, "kv_batch_get", s.kv_batch_get)
    monkeypatch.setattr(transfer_queue, "kv_batch_put", s.kv_batch_put)
    return s
