"""Where the tests find the offline benchmark copies (shared/ beside the repository by default)."""

import os
from pathlib import Path

import pytest

BENCH = Path(
    os.environ.get("SETPO_BENCHMARK_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"
)
# Outside CI a checkout without the copies skips these tests (with the reason shown); under CI they must run.
needs_bench = pytest.mark.skipif(
    not BENCH.is_dir() and not os.environ.get("CI"), reason=f"benchmark copies not found at {BENCH}"
)
