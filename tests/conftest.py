"""Shared test setup: offline Hugging Face, one torch thread per worker, seeded RNGs, hypothesis profiles."""

from __future__ import annotations

import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# pytest -n 2 already runs one process per core; extra intra-op threads would only oversubscribe them.
torch.set_num_threads(1)

# "ci" (default) is reproducible: examples derive from the test name, not from a stored database.
# HYPOTHESIS_PROFILE=dev explores new random examples and more of them.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=40,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=300, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _seed_everything():
    """Every test starts from the same RNG state, whatever ran before it in the worker."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded numpy generator for tests that draw their own data."""
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    """The benchmark copies the tests read: $SETPO_BENCHMARK_DIR, else those shipped in tests/fixtures."""
    from bench_paths import BENCH

    return BENCH
