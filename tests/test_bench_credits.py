"""The credit benchmark's command line: it times the closed form against Algorithm 1 (and reports the share of a
given step), and refuses arguments that would time nothing with a one-line error."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "bench_credits", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_credits.py"
)
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def test_benchmark_prints_and_writes_its_rows(capsys, tmp_path):
    out = tmp_path / "b.json"
    assert bench.main(["--batch", "4", "--groups", "6", "16", "--step-ms", "1000", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["G"] for r in rows] == [6, 16]
    for r in rows:
        assert r["speedup"] == pytest.approx(r["algorithm1_ms"] / r["closed_form_ms"])
        assert r["share_of_step"] == pytest.approx(r["closed_form_ms"] / 1000)
    assert "%" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--batch", "0"], "--batch must be >= 1"),
        (["--groups"], "--groups needs at least one"),
        (["--groups", "2"], r"--groups sizes must lie in \[3,"),
        (["--groups", "6", "5000"], r"\[5000\]"),
        (["--dim", "0"], "--dim must be >= 1"),
        (["--threads", "0"], "--threads must be >= 1"),
        (["--step-ms", "0"], "--step-ms must be > 0"),
        (["--shaping", "nope"], "--shaping: unknown"),
    ],
)
def test_arguments_that_time_nothing_are_refused(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(match, err), err
