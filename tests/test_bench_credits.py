"""The credit benchmark's fused closed form (the function it hands to torch.compile) against Algorithm 1, and the
benchmark's command line on a small case (the --inductor path with torch.compile replaced by the identity:
compiling needs a C++ compiler and takes seconds)."""

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
    sym = K.clone()
    sym[0, 0, 1] = sym[0, 1, 0] = -0.5  # a known minimum, symmetric
    sym[1, 1, 2] = 0.9  # a known asymmetry of 0.9 - K[1, 2, 1]
    _, lo, hi, asym = bench.fused_neglog1p(sym)
    assert lo == -0.5 and hi == pytest.approx(1.0) and asym == pytest.approx(0.9 - float(sym[1, 2, 1]))


def test_fused_validation_sees_an_asymmetric_kernel():
    K = cosine_kernel(torch.randn(2, 4, 8, dtype=torch.float64))
    K[1, 0, 2] += 0.1
    assert bench.fused_neglog1p(K)[3] == pytest.approx(0.1)


def test_benchmark_prints_its_ratios(capsys, tmp_path):
    assert bench.main(["--batch", "4", "--groups", "6", "16", "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "G=6:" in out and "G=16:" in out and (tmp_path / "b.json").is_file()


def test_inductor_path_times_the_checked_fused_function(capsys, tmp_path, monkeypatch):
    import json

    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(fn) or fn)
    out = tmp_path / "b.json"
    assert bench.main(["--batch", "4", "--groups", "6", "16", "--inductor", "--json", str(out)]) == 0
    assert compiled == [bench.fused_neglog1p] * 2  # compiled afresh for each G
    rows = json.loads(out.read_text())["rows"]
    assert [r["G"] for r in rows] == [6, 16] and all(r["inductor_ms"] > 0 for r in rows)
    assert "inductor" in capsys.readouterr().out


def test_inductor_refuses_other_shapings_and_tiny_groups(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--groups", "6", "--inductor", "--shaping", "exp"])
    with pytest.raises(SystemExit):
        bench.main(["--groups", "2", "6", "--inductor"])
    assert "--inductor compiles" in capsys.readouterr().err
