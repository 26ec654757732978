"""The credit benchmark's fused closed form (the function it hands to torch.compile) against Algorithm 1, and the
benchmark's command line on a small case (eager only: compiling needs a C++ compiler and takes seconds)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from setpo import cosine_kernel, loo_credits_reference

SPEC = importlib.util.spec_from_file_location(
    "bench_credits", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_credits.py"
)
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("G", [3, 6, 17])
def test_fused_closed_form_matches_algorithm_1(G):
    K = cosine_kernel(torch.randn(5, G, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(G)))
    s, lo, hi, asym = bench.fused_neglog1p(K)
    assert torch.allclose(s, loo_credits_reference(K), atol=1e-12, rtol=0)
    assert lo == K.min() and hi == K.max() and asym == (K - K.mT).max()


def test_fused_validation_sees_an_asymmetric_kernel():
    K = cosine_kernel(torch.randn(2, 4, 8, dtype=torch.float64))
    K[1, 0, 2] += 0.1
    assert bench.fused_neglog1p(K)[3] == pytest.approx(0.1)


def test_benchmark_prints_its_ratios(capsys, tmp_path):
    assert bench.main(["--batch", "4", "--groups", "6", "16", "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "G=6:" in out and "G=16:" in out and (tmp_path / "b.json").is_file()
