"""Every command line of the package, the theory checks and the benchmarks ends a usage error in one line."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from setpo._cli import Parser

ROOT = Path(__file__).resolve().parents[1]
# `python -m X` runs the module on the right
MODULES = {
    "setpo.eval": "setpo.eval.__main__",
    "setpo.eval.checkpoint": "setpo.eval.checkpoint",
    "setpo.data.prepare": "setpo.data.prepare",
    "setpo.tiny": "setpo.tiny.__main__",
    "theory": "theory.__main__",
    "theory.mutants": "theory.mutants",
}
SCRIPTS = ["bench_credits", "bench_embedders", "bench_smollm2"]


def _main_of(target: str):
    if target in SCRIPTS:
        spec = importlib.util.spec_from_file_location(target, ROOT / "benchmarks" / f"{target}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.main
    return importlib.import_module(MODULES[target]).main


@pytest.mark.parametrize("target", [*MODULES, *SCRIPTS])
def test_an_unknown_option_is_one_line_naming_it(target, capsys):
    main = _main_of(target)
    with pytest.raises(SystemExit) as exit_info:
        main(["--no-such-option"])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert exit_info.value.code == 2
    assert len(lines) == 1 and lines[0].endswith("(see --help)"), err
    assert ": error: " in lines[0] and "usage:" not in err


def test_the_parser_reports_the_problem_not_only_that_there_was_one(capsys):
    p = Parser(prog="tool")
    p.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit):
        p.parse_args(["--n", "two"])
    assert capsys.readouterr().err == "tool: error: argument --n: invalid int value: 'two' (see --help)\n"


@pytest.mark.parametrize("target", ["theory", *SCRIPTS])
def test_ctrl_c_ends_in_one_line_with_the_command_that_reruns(target, capsys, monkeypatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    main = _main_of(target)
    monkeypatch.setitem(main.__globals__, "_main", interrupted)
    assert main(["--seed", "3"]) == 130
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted (SIGINT): "), lines
    assert lines[0].endswith(" --seed 3") and "run again with: python " in lines[0]


@pytest.mark.parametrize("target", ["setpo.eval", "setpo.data.prepare"])
def test_ctrl_c_in_a_resumable_command_says_resume_and_leaves_overwrite_out(target, capsys, monkeypatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    main = _main_of(target)
    monkeypatch.setitem(main.__globals__, "_main", interrupted)
    assert main(["--out", "o", "--overwrite"]) == 130
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and "kept" in lines[0] and lines[0].endswith(f"; resume with: python -m {target} --out o")
