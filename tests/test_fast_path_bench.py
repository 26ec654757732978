"""The SmolLM2 arm-seed benchmark's command line and FLOP count (the timing itself runs SmolLM2: not in the tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "bench_smollm2", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_smollm2.py"
)
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"], ["--threads", "0"], ["--steps", "-3"]])
def test_refuses_arguments_that_time_nothing(argv, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(argv)
    assert err.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err


def test_flop_count_follows_the_stated_formula():
    dims = {"N": 10.0, "Vd": 3.0, "d_attn": 0.0, "layers": 1}
    tok = {"rows": 6, "distinct_prompts": 2, "prompt": 5, "completion": 4, "eval_prompt": 5, "eval_completion": 4}
    B, U, P, C, N, Vd = 6, 2, 5, 4, 10.0, 3.0
    legacy = bench.flops("legacy", tok, 2, dims, windows=3, n=4, decodings=2)
    fast = bench.flops("fast", tok, 2, dims, windows=3, n=4, decodings=2)
    # legacy step: generate B(P+C) tokens + head B C; loss B(P+C) tokens + head B(P+C); backward again + 2 heads
    step = 2 * N * B * (P + C) + 2 * Vd * B * C + 2 * N * B * (P + C) + 2 * Vd * B * (P + C)
    step += 2 * N * B * (P + C) + 4 * Vd * B * (P + C)
    assert legacy["train"] == pytest.approx(2 * step)
    assert legacy["eval"] == pytest.approx(2 * (2 * N * 4 * 3 * (P + C) + 2 * Vd * 4 * 3 * C))
    fast_step = 3 * (2 * N * (U * P + B * C) + 2 * Vd * B * C)
    assert fast["train"] == pytest.approx(2 * fast_step)
    assert fast["eval"] == pytest.approx(2 * (2 * N * (3 * P + 4 * 3 * C) + 2 * Vd * 4 * 3 * C))
