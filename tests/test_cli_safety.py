"""Run folders and command lines of `python -m reproduce` (issue 15, items 16, 17, 19, 21, 22, 24, 25).

--overwrite deletes only what a run wrote; foreign folders and `--out ''` are refused; --publish keeps larger
published results; --seeds means a count everywhere; quick/full check everything first; damaged files and bad
options end in one line; interrupts say what was kept and how to resume.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

import reproduce.__main__ as cli_entry
from reproduce import common, countdown, gapo_lists, overhead, toy_bandit
from reproduce.common import MANIFEST, PublishError, RunDir, RunExistsError, cli, publish, write_json
from reproduce.tasks import countdown as countdown_task

SMOKE = ["--profile", "smoke"]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """`python -m reproduce ARGV` in-process: (exit code, stdout, stderr)."""
    try:
        rc = cli_entry.main(argv)
    except SystemExit as err:
        rc = err.code
    out, err = capsys.readouterr()
    return rc, out, err


def _model_folder(path: Path) -> dict[str, bytes]:
    path.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": b'{"model_type": "qwen2", "hidden_size": 896}',
        "model.safetensors": b"\x00weights\x01",
        "tokenizer.json": b'{"version": "1.0"}',
    }
    for name, data in files.items():
        (path / name).write_bytes(data)
    return files


def _contents(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir()}


# -- item 16: overwrite only what the run wrote ------------------------------------------------------------------


def test_overwrite_never_touches_a_model_folder(tmp_path, capsys):
    model = tmp_path / "model"
    files = _model_folder(model)
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(model), "--overwrite"], capsys)
    assert rc == 2 and _contents(model) == files
    assert len(err.strip().splitlines()) == 1 and "holds no setpo run" in err
    assert "pass --overwrite" not in err  # the refusal does not suggest the flag that would have deleted it


def test_out_dot_in_a_project_and_empty_out_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    files = _model_folder(tmp_path)
    for argv in (["--out", ".", "--overwrite"], ["--out", ""], ["--out", "", "--overwrite"], ["--out", "."]):
        rc, _, err = _run(["toy_bandit", *SMOKE, *argv], capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (argv, err)
    assert _contents(tmp_path) == files


def test_overwrite_deletes_the_runs_files_and_keeps_a_users(tmp_path, capsys):
    out = tmp_path / "run"
    assert toy_bandit.main([*SMOKE, "--out", str(out)]) == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert {"config.json", "summary.md", "fig1_toy_bandit.png", "steps/grpo.json"} <= set(manifest["files"])
    assert manifest["command"] == "reproduce toy_bandit" and not (out / common.LOCK).exists()
    (out / "my_notes.txt").write_text("keep me")
    with pytest.raises(RunExistsError, match="pass --overwrite"):  # a run folder: --overwrite is the way
        toy_bandit.main([*SMOKE, "--out", str(out), "--seeds", "3"])
    assert toy_bandit.main([*SMOKE, "--out", str(out), "--seeds", "3", "--overwrite"]) == 0
    assert (out / "my_notes.txt").read_text() == "keep me"
    assert json.loads((out / "config.json").read_text())["config"]["seeds"] == 3
    assert "my_notes.txt" not in json.loads((out / MANIFEST).read_text())["files"]


def test_quick_gives_each_experiment_its_own_folder(tmp_path):
    argvs, notes = cli_entry._plan("quick", ["--out", str(tmp_path / "q"), "--overwrite", "--seeds", "2"])
    outs = {exp: argv[argv.index("--out") + 1] for exp, argv in argvs.items()}
    assert outs == {exp: str(tmp_path / "q" / exp) for exp in cli_entry.EXPERIMENTS}
    assert "--seeds" not in argvs["overhead"] and any("overhead has no --seeds" in n for n in notes)
    assert argvs["gapo_lists"][-2:] == ["--seeds", "2"]


def test_a_folder_without_a_file_list_is_refused_even_with_overwrite(tmp_path):
    """config.json and steps/ but no file list (an older setpo): nothing says which files are the run's, so
    nothing is resumed or touched, and the refusal says what to do."""
    out = tmp_path / "old"
    config = {"profile": "x", "a": 1}
    (out / "steps").mkdir(parents=True)
    write_json(out / "config.json", {"config": config, "versions": {}, "started": "then"})
    write_json(out / "steps" / "data.json", {"n": 1})
    for overwrite in (False, True):
        with pytest.raises(RunExistsError) as exc:
            RunDir(out, config, overwrite=overwrite)
        assert str(exc.value) == (
            f"{out} holds a run of an older setpo (it kept no {MANIFEST}), so which files are the run's is not "
            "known: it is neither resumed nor cleared by --overwrite; move out any file of yours, delete the folder, "
            "and run again (or choose another --out folder)"
        )
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["config.json", "steps", "steps/data.json"]


def test_a_list_made_by_watching_the_folder_is_refused_whole(tmp_path, capsys):
    """A file list of the earlier format (setpo_run 1, made by watching the folder) may name a user's file: the
    folder is neither resumed nor cleared, and the command line says so in one line."""
    out = tmp_path / "v1"
    config = {"profile": "smoke", **toy_bandit.asdict(toy_bandit.PROFILES["smoke"])}
    write_json(out / "config.json", {"config": config, "versions": common.versions(), "started": "then"})
    write_json(out / "steps" / "grpo.json", {"n": 1})
    (out / "notes.txt").write_text("mine")
    lists = {"files": ["config.json", "steps/grpo.json", "notes.txt"], "dirs": ["steps"]}
    write_json(out / MANIFEST, {"setpo_run": 1, **lists, "open_since": None})
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for overwrite in (False, True):
        with pytest.raises(RunExistsError, match="older setpo \\(its list of files was made by watching the folder"):
            RunDir(out, config, overwrite=overwrite)
        rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out), *(["--overwrite"] if overwrite else [])], capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "move out any file of yours" in err, err
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# -- item 22: damaged run folders ----------------------------------------------------------------------------------


def test_damaged_config_is_named_and_overwrite_recovers(tmp_path, capsys):
    out = tmp_path / "run"
    assert toy_bandit.main([*SMOKE, "--out", str(out)]) == 0
    (out / "config.json").write_text('{"config": {"profile": "sm')
    capsys.readouterr()
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert str(out / "config.json") in err and "damaged" in err and "--overwrite" in err
    assert _run(["toy_bandit", *SMOKE, "--out", str(out), "--overwrite"], capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["config"]["profile"] == "smoke"


def test_config_json_is_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    write_json(path, {"old": 1})
    real = Path.write_text

    def half_then_fail(self, text, *a, **k):
        real(self, text[: len(text) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_text", half_then_fail)
    with pytest.raises(OSError):
        write_json(path, {"new": 2, "more": list(range(50))})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"old": 1}


# -- item 17: publish ----------------------------------------------------------------------------------------------


def test_publish_refuses_a_smaller_profile(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    (src / "summary.md").write_text("smoke")
    dest = tmp_path / "paper_figures" / "toy"
    dest.mkdir(parents=True)
    (dest / "summary.md").write_text("committed full")
    with pytest.raises(PublishError, match="force-publish"):  # no record: the committed full-profile results
        publish([src / "summary.md"], dest, "smoke", {"seeds": 2, "steps": 5})
    assert (dest / "summary.md").read_text() == "committed full"
    publish([src / "summary.md"], dest, "full", {"seeds": 20, "steps": 400})
    with pytest.raises(PublishError, match="seeds"):
        publish([src / "summary.md"], dest, "full", {"seeds": 1, "steps": 400})
    with pytest.raises(PublishError, match="profile"):
        publish([src / "summary.md"], dest, "quick", {"seeds": 20, "steps": 400})
    publish([src / "summary.md"], dest, "smoke", {"seeds": 2, "steps": 5}, force=True)
    assert (dest / "summary.md").read_text() == "smoke"
    assert json.loads((dest / common.PUBLISH_RECORD).read_text())["profile"] == "smoke"


def test_smoke_publish_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    figures = tmp_path / "paper_figures"
    (figures / "toy_bandit").mkdir(parents=True)
    (figures / "toy_bandit" / "summary.md").write_text("full")
    monkeypatch.setattr(toy_bandit, "PAPER_FIGURES", figures)
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(tmp_path / "r"), "--publish"], capsys)
    assert rc == 2 and "--force-publish" in err and not (tmp_path / "r").exists()
    assert (figures / "toy_bandit" / "summary.md").read_text() == "full"


# -- item 19: --seeds and quick/full -------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [toy_bandit, countdown, gapo_lists])
def test_seeds_is_a_count_everywhere(module, tmp_path):
    for bad in (["--seeds", "0"], ["--seeds", "-1"], ["--seeds", "0", "1", "2"], ["--seeds", "x"]):
        with pytest.raises(SystemExit):
            module.prepare(["--out", str(tmp_path / "r"), *bad])
    assert not (tmp_path / "r").exists()


def test_gapo_seeds_n_means_seeds_0_to_n_minus_1(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(gapo_lists, "_execute", lambda args, cfg, *rest: seen.setdefault("cfg", cfg) and 0)
    gapo_lists.prepare(["--out", str(tmp_path / "r"), "--seeds", "3"])()
    assert seen["cfg"].seeds == (0, 1, 2)


def test_quick_checks_every_experiment_before_running_any(tmp_path, monkeypatch, capsys):
    started = []
    for mod in (toy_bandit, countdown, overhead, gapo_lists):
        monkeypatch.setattr(mod, "_execute", lambda *a, _m=mod.NAME: started.append(_m) or 0)
    missing = tmp_path / "missing.yaml"
    rc, out, err = _run(["quick", "--out", str(tmp_path / "q"), "--config", str(missing)], capsys)
    assert rc == 2 and started == []
    assert "countdown" in out and "gapo_lists" in out and "nothing started" in out
    rc, _, err = _run(["quick", "--seeds", "0"], capsys)
    assert rc == 2 and started == [] and "Traceback" not in err
    rc, _, err = _run(["quick", "--no-such-option"], capsys)
    assert rc == 2 and "--no-such-option" in err and started == []


def test_a_failing_experiment_does_not_hide_the_others(tmp_path, monkeypatch, capsys):
    started = []

    def boom(*a):
        started.append("countdown")
        raise RuntimeError("countdown broke")

    for name in cli_entry.EXPERIMENTS:
        mod = importlib.import_module(f"reproduce.{name}")
        monkeypatch.setattr(mod, "_execute", lambda *a, _m=name: started.append(_m) or 0)
    monkeypatch.setattr(countdown, "_execute", boom)
    rc, out, _ = _run(["quick", "--out", str(tmp_path / "q")], capsys)
    assert rc == 1 and started == cli_entry.EXPERIMENTS
    assert "summary:" in out and "countdown failed: RuntimeError: countdown broke" in out
    assert "failed: countdown" in out


# -- item 21: Countdown run names ----------------------------------------------------------------------------------


def test_countdown_run_names_are_exact_and_unique():
    prof = countdown.CountdownProfile(lams=(1.0000001, 1.0000002), betas=(0.001,), group_sizes=(3,))
    names = [n for n, *_ in countdown.run_names(prof)]
    assert len(set(names)) == len(names) == 3
    assert "setpo_l1.0000001_g3_b0.001_s0" in names
    assert countdown.methods(countdown.PROFILES["quick"])[1][0] == "setpo_l5"  # unchanged where {:g} is exact
    with pytest.raises(ValueError, match="distinct"):
        countdown.CountdownProfile(lams=(0.5, 0.5))
    with pytest.raises(ValueError, match="lams"):
        countdown.CountdownProfile(lams=0.5)


def test_countdown_yaml_reads_exponent_strings_and_refuses_wrong_types(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("sft_lr: 5e-3\nlams: [1e-1]\n")
    prof = common.read_config(f, countdown.CountdownProfile, "countdown profile")
    assert prof.sft_lr == 0.005 and prof.lams == (0.1,)
    f.write_text("n_train: 12.5\n")
    with pytest.raises(ValueError, match="n_train"):
        common.read_config(f, countdown.CountdownProfile, "countdown profile")


def test_countdown_file_target_is_not_truncated(tmp_path):
    from setpo.tasks.countdown import load_problems

    f = tmp_path / "t.jsonl"
    f.write_text('{"target": 3.7, "nums": [1, 2]}\n')
    with pytest.raises(ValueError, match="whole numbers"):
        load_problems(f)
    f.write_text('{"target": 3.0, "nums": [1, 2]}\n')
    assert load_problems(f)[0].target == 3


# -- item 24: interrupts and the Countdown SFT checkpoint ----------------------------------------------------------


def test_interrupt_says_what_was_kept_and_how_to_resume(tmp_path, capsys):
    out = tmp_path / "run"

    def main(argv):
        run = RunDir(out, {"a": 1}, overwrite=True)
        run.save("first", {"x": 1})
        raise KeyboardInterrupt

    assert cli(main, ["--out", str(out), "--overwrite"], prog="python -m reproduce toy") == 130
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(out) in err and "1 finished step" in err
    assert err.endswith(f"resume with: python -m reproduce toy --out {out}")  # never with --overwrite


def test_sigterm_exits_143_with_one_line(tmp_path, capsys):
    def main(argv):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    before = signal.getsignal(signal.SIGTERM)
    assert cli(main, [], prog="p") == 143
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SIGTERM" in err and "nothing was written yet" in err
    assert signal.getsignal(signal.SIGTERM) == before


def test_interrupted_countdown_sft_resumes_to_the_same_weights(tmp_path, monkeypatch, capsys):
    import torch
    from safetensors.torch import load_file

    prof = countdown.replace(countdown.PROFILES["smoke"], sft_steps=6)
    monkeypatch.setattr(countdown_task, "SFT_CHECKPOINT_EVERY", 2)
    train = countdown.generate_problems(prof.n_train, prof.n_numbers, prof.max_number, 1, prof.max_target, 1, 0)

    ref = RunDir(tmp_path / "ref", {"x": 1})
    ref_model = countdown.stage_sft(ref, prof, train)

    real = countdown_task._sft_batches

    def interrupted(*a, **k):
        for i, batch in enumerate(real(*a, **k)):
            if i == 5:  # during step 6: the checkpoint of step 4 is on disk
                raise KeyboardInterrupt
            yield batch

    run = RunDir(tmp_path / "run", {"x": 1})
    monkeypatch.setattr(countdown_task, "_sft_batches", interrupted)
    with pytest.raises(KeyboardInterrupt):
        countdown.stage_sft(run, prof, train)
    assert torch.load(tmp_path / "run" / "models" / "sft_checkpoint.pt", weights_only=False)["step"] == 4
    monkeypatch.setattr(countdown_task, "_sft_batches", real)
    model = countdown.stage_sft(run, prof, train)
    assert "resuming from step 4 of 6" in capsys.readouterr().out
    a, b = load_file(ref_model / "model.safetensors"), load_file(model / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert run.load("sft")["loss"] == ref.load("sft")["loss"]
    assert not (tmp_path / "run" / "models" / "sft_checkpoint.pt").exists()


# -- item 25: every user error is one line -------------------------------------------------------------------------


def _bad_cases(tmp: Path) -> list[list[str]]:
    bad_yaml = tmp / "bad.yaml"
    bad_yaml.write_text("n_train: [unclosed\n")
    wrong = tmp / "wrong.yaml"
    wrong.write_text("no_such_field: 1\n")
    a_file = tmp / "a_file"
    a_file.write_text("x")
    return [
        ["toy_bandit", "--profile", "nope"],
        ["toy_bandit", *SMOKE, "--seeds", "0"],
        ["toy_bandit", *SMOKE, "--seeds", "two"],
        ["toy_bandit", *SMOKE, "--out", ""],
        ["toy_bandit", *SMOKE, "--out", str(a_file)],
        ["toy_bandit", *SMOKE, "--bogus"],
        ["countdown", *SMOKE, "--config", str(tmp / "missing.yaml")],
        ["countdown", *SMOKE, "--config", str(bad_yaml)],
        ["countdown", *SMOKE, "--config", str(wrong)],
        ["countdown", *SMOKE, "--threads", "0"],
        ["countdown", *SMOKE, "--benchmark-dir", str(tmp)],
        ["overhead", *SMOKE, "--rounds", "0"],
        ["overhead", *SMOKE, "--seeds", "2"],
        ["gapo_lists", "--seeds", "0", "1"],
        ["gapo_lists", "--config", str(wrong)],
        ["no_such_experiment"],
        ["quick", "--profile", "smoke"],
        ["full", "stray"],
        ["quick", "--nope"],
    ]


def test_bad_invocations_end_in_one_line(tmp_path, capsys):
    for argv in _bad_cases(tmp_path):
        rc, _, err = _run(argv, capsys)
        lines = [x for x in err.strip().splitlines() if x.strip()]
        assert rc == 2, (argv, rc, err)
        assert "Traceback" not in err and len(lines) == 1, (argv, err)
        assert "SETPO_TRACEBACK" not in err, (argv, err)  # named problems, not wrapped exceptions


def test_quick_with_a_bad_value_says_one_line_per_experiment(capsys):
    rc, out, err = _run(["quick", "--seeds", "0"], capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and "Traceback" not in err
    assert [x.split(":")[0] for x in lines] == [
        f"python -m reproduce {e}"  # the experiments that have --seeds, in the order quick runs them
        for e in (
            "countdown_evidence",
            "smollm2_primes",
            "smollm2_lists",
            "methods_comparison",
            "smollm2_methods",
            "toy_bandit",
            "countdown",
            "gapo_lists",
        )
    ]
    assert "nothing started" in out


def test_files_of_a_killed_call_count_as_the_runs(tmp_path):
    """A call killed mid-write (SIGKILL): its list was flushed before the write, so --overwrite still deletes it."""
    out = tmp_path / "run"
    run = RunDir(out, {"a": 1})
    run.claim("half_written.pt").write_bytes(b"x")  # no close(): the process died here
    common._OPEN_RUNS.remove(run)  # as after the death of its process: its lock is stale
    RunDir(out, {"a": 2}, overwrite=True).close()
    assert not (out / "half_written.pt").exists()


def test_an_experiment_refuses_fewer_seeds_in_a_larger_runs_folder(tmp_path):
    """Its analysis would rewrite the larger run's results from fewer seeds; the same or more seeds are fine."""
    import argparse

    out = tmp_path / "run"
    RunDir(out, {"a": 1, "seeds": 3}, extend=("seeds",)).close()

    def plan(seeds: int, overwrite: bool = False):
        args = argparse.Namespace(out=out, overwrite=overwrite, publish=False, force_publish=False, seeds=seeds)
        return common.RunPlan.check(args, "x", "full", {"a": 1, "seeds": seeds}, {}, tmp_path, extend=("seeds",))

    with pytest.raises(RunExistsError, match="holds a larger run \\(seeds 3\\)"):
        plan(2)
    assert plan(3).out == out and plan(5).out == out and plan(2, overwrite=True).out == out
    assert json.loads((out / "config.json").read_text())["config"]["seeds"] == 3  # checks write nothing


def test_a_run_grows_by_more_seeds_and_its_first_seeds_are_a_run(tmp_path):
    """With extend=("seeds",) a config differing in the seed count alone resumes the run; anything else is refused."""
    out = tmp_path / "run"
    run = RunDir(out, {"a": 1, "seeds": 2}, extend=("seeds",))
    run.save("rl_s0", {"n": 0})
    run.close()
    with pytest.raises(RunExistsError, match="differs in: seeds"):
        RunDir(out, {"a": 1, "seeds": 3})  # not extendable unless the experiment says so
    grown = RunDir(out, {"a": 1, "seeds": 3}, extend=("seeds",))
    assert grown.done("rl_s0")
    grown.save("rl_s2", {"n": 2})
    grown.close()
    record = json.loads((out / "config.json").read_text())
    assert record["config"] == {"a": 1, "seeds": 3} and [e["seeds"] for e in record["extended_from"]] == [2]
    import torch

    assert record["extended_from"][0]["versions"]["torch"] == torch.__version__
    first = RunDir(out, {"a": 1, "seeds": 2}, extend=("seeds",))  # its first two seeds: read, config kept
    assert first.done("rl_s0") and first.done("rl_s2")
    first.close()
    assert json.loads((out / "config.json").read_text())["config"]["seeds"] == 3
    for other in ({"a": 2, "seeds": 3}, {"a": 1, "seeds": 4, "b": 0}, {"a": 1, "seeds": True}, {"a": 1, "seeds": "4"}):
        with pytest.raises(RunExistsError, match="different config"):
            RunDir(out, other, extend=("seeds",))
    with pytest.raises(RunExistsError, match="different config"):  # counts moving in opposite directions
        RunDir(out, {"a": 0, "seeds": 4}, extend=("seeds", "a"))
    assert json.loads((out / "config.json").read_text())["config"] == {"a": 1, "seeds": 3}
