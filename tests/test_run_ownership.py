"""Nothing a user owns is lost (issue 34): a run owns exactly the files its writers recorded, every command that
writes follows one --out rule, run folders are locked, silent acceptance is refused, and user errors are one line.

The end-to-end cases run the toy bandit's smoke profile (seconds); killed and concurrent runs are real processes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import reproduce.__main__ as cli_entry
from reproduce import common, toy_bandit
from reproduce.common import LOCK, MANIFEST, RunDir, RunExistsError, write_json
from setpo.files import OutError, check_out, read_table, read_yaml

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["--profile", "smoke"]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """`python -m reproduce ARGV` in-process: (exit code, stdout, stderr)."""
    try:
        rc = cli_entry.main(argv)
    except SystemExit as err:
        rc = err.code
    out, err = capsys.readouterr()
    return rc, out, err


def _python(code: str) -> subprocess.Popen:
    """A separate Python process running `code` with this checkout importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE, text=True)


def _holder(out: Path, config: dict, then: str) -> subprocess.Popen:
    """A process that opens a run in `out`, prints 'open', then does `then` ('sleep' or 'write and die')."""
    proc = _python(
        f"""
        import os, signal, sys, time
        from reproduce.common import RunDir
        run = RunDir({str(out)!r}, {config!r})
        if {then!r} == "write and die":
            run.save("first", {{"x": 1}})
            run.claim("half_written.pt").write_bytes(b"partial")
            print("open", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        print("open", flush=True)
        time.sleep(60)
        """
    )
    assert proc.stdout.readline().strip() == "open"
    return proc


# -- item 1: a run owns exactly the files it wrote -----------------------------------------------------------------


def test_a_file_written_into_a_running_runs_folder_survives_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "R"
    real = toy_bandit.train_bandit

    def train_while_the_user_writes(*args, **kwargs):
        (out / "notes.txt").write_text("my notes")  # appears while the run is writing its own files
        return real(*args, **kwargs)

    monkeypatch.setattr(toy_bandit, "train_bandit", train_while_the_user_writes)
    assert _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)[0] == 0
    monkeypatch.undo()
    listed = json.loads((out / MANIFEST).read_text())
    assert "notes.txt" not in listed["files"] and "samples_grpo.pt" in listed["files"]
    rc, _, err = _run(["toy_bandit", *SMOKE, "--seeds", "3", "--out", str(out), "--overwrite"], capsys)
    assert rc == 0 and (out / "notes.txt").read_text() == "my notes"
    assert f"--overwrite: kept 1 file(s) in {out} that the run did not write: notes.txt" in err
    renamed = {f for f in listed["files"] if f.endswith(".tmp")}  # the temporary files of atomic JSON writes
    assert renamed and not any((out / f).exists() for f in renamed)
    top = {f for f in listed["files"] if "/" not in f} - renamed
    assert {p.name for p in out.iterdir()} == top | {"notes.txt", MANIFEST, "steps"}  # no file of another run


def test_sigkill_then_a_users_file_then_overwrite(tmp_path, capsys):
    """The killed process's list was flushed before each write: --overwrite deletes its files, keeps the user's."""
    out = tmp_path / "R"
    proc = _holder(out, {"a": 1}, "write and die")
    assert proc.wait(timeout=60) == -signal.SIGKILL
    (out / "post_mortem.md").write_text("what happened")  # written after the kill
    assert (out / LOCK).exists()  # the dead process never released it
    run = RunDir(out, {"a": 2}, overwrite=True)
    run.close()
    err = capsys.readouterr().err
    assert f"taking over the lock of PID {proc.pid}" in err and "which is no longer running" in err
    assert "kept 1 file(s)" in err and "post_mortem.md" in err
    assert (out / "post_mortem.md").read_text() == "what happened"
    assert not (out / "half_written.pt").exists() and not (out / "steps" / "first.json").exists()


def test_a_json_write_cut_by_sigkill_leaves_only_files_the_list_names(tmp_path, capsys):
    """Killed between writing a step's temporary file and renaming it: the temporary file was recorded first, so
    --overwrite deletes it and keeps nothing but the user's file."""
    out = tmp_path / "R"
    proc = _python(
        f"""
        import os, signal
        from reproduce import common
        run = common.RunDir({str(out)!r}, {{"a": 1}})
        print("open", flush=True)

        replace = os.replace

        def die(src, dst):  # killed as it renames the step's file into place, after the list was flushed
            if str(dst).endswith("first.json"):
                os.kill(os.getpid(), signal.SIGKILL)
            replace(src, dst)

        common.os.replace = die
        run.save("first", {{"x": 1}})
        """
    )
    assert proc.stdout.readline().strip() == "open"
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (out / "steps" / ".first.json.tmp").is_file() and not (out / "steps" / "first.json").exists()
    (out / "notes.md").write_text("mine")
    RunDir(out, {"a": 2}, overwrite=True).close()
    assert f"kept 1 file(s) in {out} that the run did not write: notes.md" in capsys.readouterr().err
    assert not (out / "steps").exists() and (out / "notes.md").read_text() == "mine"


def test_a_writer_never_replaces_a_file_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "R"
    out.mkdir()
    write_json(
        out / MANIFEST, {"setpo_run": 2, "command": "reproduce toy_bandit", "files": [], "dirs": [], "trees": []}
    )
    (out / "summary.md").write_text("the user's summary")
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
    err = err.strip().splitlines()[-1]  # after the progress bar: one line
    assert rc == 2 and err.startswith("python -m reproduce toy_bandit: error: ")
    assert f"{out / 'summary.md'} is in the run folder but was not written by this run; refusing to replace" in err
    assert (out / "summary.md").read_text() == "the user's summary"
    assert "summary.md" not in json.loads((out / MANIFEST).read_text())["files"]


def test_a_claimed_tree_is_deleted_whole_and_nothing_outside_it(tmp_path):
    out = tmp_path / "R"
    run = RunDir(out, {"a": 1})
    model = run.tree("models/sft")
    (model / "model.safetensors").write_bytes(b"w")
    (out / "models" / "users_model").mkdir()
    (out / "models" / "users_model" / "w.bin").write_bytes(b"u")
    run.close()
    RunDir(out, {"a": 2}, overwrite=True).close()
    assert not (out / "models" / "sft").exists() and (out / "models" / "users_model" / "w.bin").read_bytes() == b"u"


def test_resumed_csvs_have_the_columns_of_a_fresh_run(tmp_path, capsys):
    """A fresh step's result is used as a resumed run reads it back, so every table has one column order: the
    published one."""
    out = tmp_path / "R"
    assert _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)[0] == 0
    fresh = {
        f: (out / f).read_text().splitlines()[0] for f in ("summary.csv", "lambda_sweep.csv", "mode_probs_runs.csv")
    }
    for name in ("summary.csv", "lambda_sweep.csv"):
        assert fresh[name] == (ROOT / "paper_figures" / "toy_bandit" / name).read_text().splitlines()[0]
    assert _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)[0] == 0  # every step loaded from disk
    assert {f: (out / f).read_text().splitlines()[0] for f in fresh} == fresh


# -- item 2: one --out rule ----------------------------------------------------------------------------------------


def test_check_out_is_the_rule(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "pass1.md").write_text("mine")
    cases = {
        "": "--out is an empty string; name a folder",
        str(tmp_path / "file.txt"): "is a file, not a folder",
        str(tmp_path / "foreign"): "is not empty and holds no setpo run of setpo.eval",
    }
    for path, message in cases.items():
        with pytest.raises(OutError, match=message):
            check_out(path, "setpo.eval")
    assert check_out(tmp_path / "new", "setpo.eval") == tmp_path / "new"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / ".setpo-run.json").write_text('{"command": "setpo.eval"}')
    (tmp_path / "mine" / "pass1.md").write_text("old")
    assert check_out(tmp_path / "mine", "setpo.eval") == tmp_path / "mine"
    with pytest.raises(OutError, match="holds a setpo run of 'setpo.eval'"):
        check_out(tmp_path / "mine", "setpo.data.prepare")
    with pytest.raises(OutError, match="--json .* exists; pass --overwrite"):
        check_out(tmp_path / "file.txt", "bench", flag="--json", is_file=True)
    assert check_out(tmp_path / "file.txt", "bench", flag="--json", is_file=True, overwrite=True)
    with pytest.raises(OutError, match="is a folder; name a file"):
        check_out(tmp_path / "foreign", "bench", flag="--json", is_file=True, overwrite=True)
    with pytest.raises(OutError, match="file.txt is a file, not a folder"):
        check_out(tmp_path / "file.txt" / "r.md", "theory", flag="--report", is_file=True)


def test_setpo_eval_out_dot_over_a_users_pass1_is_refused(tmp_path, monkeypatch, capsys):
    from setpo.eval.__main__ import main as eval_main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pass1.md").write_text("my table")
    (tmp_path / "notes.txt").write_text("notes")
    for out in (".", ""):
        with pytest.raises(SystemExit) as exc:
            eval_main(["--model", "none", "--out", out, "--data", str(tmp_path / "data")])
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and len(err.splitlines()) == 1, err
        assert "--out" in err and ("holds no setpo run of setpo.eval" in err or "empty string" in err)
    assert (tmp_path / "pass1.md").read_text() == "my table" and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt",
        "pass1.md",
    ]
    with pytest.raises(SystemExit) as exc:
        eval_main(["--model", "none", "--out", "notes.txt", "--data", "data"])
    assert exc.value.code == 2 and "notes.txt is a file, not a folder" in capsys.readouterr().err


def test_setpo_eval_keeps_the_tables_of_another_request(tmp_path, capsys):
    from setpo.eval.__main__ import main as eval_main

    out = tmp_path / "ev"
    out.mkdir()
    (out / ".setpo-run.json").write_text(json.dumps({"command": "setpo.eval", "request": {"model": "other"}}))
    (out / "pass1.md").write_text("the other model's table")
    data = tmp_path / "data" / "aime24"
    data.mkdir(parents=True)
    pd.DataFrame([{"prompt": "1 + 1?", "reward_model": {"ground_truth": "2"}}]).to_parquet(data / "test.parquet")
    with pytest.raises(SystemExit) as exc:
        eval_main(["--model", "none", "--out", str(out), "--data", str(tmp_path / "data"), "--benchmarks", "aime24"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "holds pass1.md of an evaluation with other settings (differs in: " in err
    assert "pass --overwrite to replace them" in err and (out / "pass1.md").read_text() == "the other model's table"


def test_setpo_eval_accepts_a_folder_it_wrote_before_it_kept_a_mark(tmp_path, capsys):
    """A folder of results/ and the tables is this command's: it passes the rule (and then stops at the missing
    data, which shows that the --out check let it through)."""
    from setpo.eval.__main__ import main as eval_main

    out = tmp_path / "ev"
    (out / "results").mkdir(parents=True)
    (out / "results" / "aime24.json").write_text("{}")
    stopped = tmp_path / "stopped"  # stopped while it prepared the benchmarks into OUT/data
    (stopped / "data").mkdir(parents=True)
    (stopped / "data" / "manifest.json").write_text("{}")
    for folder in (out, stopped):
        with pytest.raises(SystemExit) as exc:
            eval_main(["--model", "none", "--out", str(folder), "--data", str(tmp_path / "nodata")])
        assert exc.value.code == 2 and "no prepared test.parquet under" in capsys.readouterr().err


def test_prepare_follows_the_rule_and_says_what_no_hub_needs(tmp_path, capsys):
    from setpo.data.prepare import main as prepare_main

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "README.md").write_text("mine")
    for argv, message in (
        (["--out", ""], "--out is an empty string"),
        (["--out", str(tmp_path / "project")], "holds no setpo run of setpo.data.prepare"),
        (["--out", str(tmp_path / "project" / "README.md")], "is a file, not a folder"),
        (["--out", str(tmp_path / "new"), "--no-hub"], "--no-hub reads local copies only: pass --local-dir"),
    ):
        with pytest.raises(SystemExit) as exc:
            prepare_main([*argv, "--datasets", "gsm8k"] if "--no-hub" in argv else argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["README.md"]


def test_theory_report_and_bench_json_follow_the_rule(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_credits
        import bench_embedders
        import bench_smollm2
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from theory.__main__ import main as theory_main

    mine = tmp_path / "report.md"
    mine.write_text("my report")
    commands = ((theory_main, "--report"), (bench_embedders.main, "--json"), (bench_credits.main, "--json"))
    for main, flag in (*commands, (bench_smollm2.main, "--json")):  # each refused before it times anything
        for target, message in (
            (str(mine), "exists; pass --overwrite to replace it"),
            ("", "is an empty string"),
            (str(tmp_path), "is a folder; name a file"),
            (str(mine / "x"), "is a file, not a folder"),
        ):
            with pytest.raises(SystemExit) as exc:
                main([flag, target])
            err = capsys.readouterr().err
            assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, (flag, err)
    assert mine.read_text() == "my report"
    assert bench_credits.main(["--batch", "2", "--groups", "6", "--json", str(mine), "--overwrite"]) == 0
    assert json.loads(mine.read_text())["rows"][0]["G"] == 6  # replaced, as asked
    with pytest.raises(SystemExit) as exc:
        bench_embedders.main(["--repeats", "0"])
    assert exc.value.code == 2 and "must be >= 1" in capsys.readouterr().err


# -- item 3: a lock per run folder ---------------------------------------------------------------------------------


def test_two_runs_at_once_the_second_is_refused_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "R"
    config = {"profile": "smoke", **toy_bandit.asdict(toy_bandit.PROFILES["smoke"])}
    holder = _holder(out, config, "sleep")
    try:
        rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1
        assert f"{out} is in use by PID {holder.pid} (python -c)" in err and "wait for that run to end" in err
        with pytest.raises(RunExistsError, match=f"in use by PID {holder.pid}"):
            RunDir(out, {"another": "config"}, overwrite=True)
    finally:
        holder.kill()
        holder.wait()
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)  # the holder is gone: its lock is stale
    assert rc == 0 and f"taking over the lock of PID {holder.pid}" in err
    assert not (out / LOCK).exists()


def test_two_commands_started_at_once_into_one_folder_one_is_refused(tmp_path):
    """Two real `python -m reproduce toy_bandit` processes with different seeds, started together into one folder:
    one finishes, the other is refused in one line (in use, or a different config once the first is done), and
    config.json describes the results that are there."""
    out = tmp_path / "R"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {
        seeds: subprocess.Popen(
            [sys.executable, "-m", "reproduce", "toy_bandit", *SMOKE, "--seeds", seeds, "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seeds in ("2", "3")
    }
    ended = {seeds: (proc.wait(timeout=120), proc.stderr.read()) for seeds, proc in procs.items()}
    assert sorted(rc for rc, _ in ended.values()) == [0, 2], ended
    winner = next(seeds for seeds, (rc, _) in ended.items() if rc == 0)
    refusal = next(err for rc, err in ended.values() if rc == 2).strip().splitlines()[-1]
    assert refusal.startswith(f"python -m reproduce toy_bandit: error: {out} ")
    assert "is in use by PID" in refusal or "holds a run with a different config (differs in: seeds)" in refusal
    assert json.loads((out / "config.json").read_text())["config"]["seeds"] == int(winner)
    assert len(json.loads((out / "steps" / "grpo.json").read_text())["runs"]) == int(winner)
    assert not (out / LOCK).exists()


def test_a_step_is_not_saved_under_a_config_another_writer_replaced(tmp_path):
    out = tmp_path / "R"
    run = RunDir(out, {"profile": "smoke", "seeds": 2})
    run.save("first", {"x": 1})
    write_json(out / "config.json", {"config": {"profile": "quick", "seeds": 2}, "versions": {}})
    with pytest.raises(
        RunExistsError,
        match="config.json changed while this run wrote into .*\\(differs in: profile\\); step 'second' is not saved",
    ):
        run.save("second", {"x": 2})
    assert not (out / "steps" / "second.json").exists()
    run.close()


# -- item 4: no silent acceptance ----------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["[]", "{}", '{"config": [], "versions": {}}'])
def test_a_config_json_that_is_not_a_runs_is_refused(tmp_path, content):
    out = tmp_path / "R"
    RunDir(out, {"a": 1}).close()
    (out / "config.json").write_text(content)
    with pytest.raises(RunExistsError, match="config.json is damaged \\(not a run's config"):
        RunDir(out, {"a": 1})


def test_a_resume_under_other_versions_prints_and_records_them(tmp_path, monkeypatch, capsys):
    out = tmp_path / "R"
    RunDir(out, {"a": 1}).close()
    now = common.versions()
    monkeypatch.setattr(common, "versions", lambda: {**now, "torch": "99.0"})
    RunDir(out, {"a": 1}).close()
    err = capsys.readouterr().err
    assert f"resuming under other package versions: torch {now['torch']} -> 99.0" in err
    record = json.loads((out / "config.json").read_text())
    assert record["versions"] == now and record["resumed_under"][-1]["versions"]["torch"] == "99.0"
    RunDir(out, {"a": 1}).close()  # the same versions again: nothing new to say
    assert "resuming under" not in capsys.readouterr().err
    assert len(json.loads((out / "config.json").read_text())["resumed_under"]) == 1


def test_profile_with_config_sets_the_files_fields_on_the_profile(tmp_path, capsys):
    """The one rule in every experiment: --config FILE replaces the fields it names in --profile's config."""
    from reproduce import countdown, gapo_lists, math_pipeline

    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for module, profile in ((countdown, "smoke"), (gapo_lists, "quick"), (math_pipeline, "cpu-smoke")):
        p = module.build_parser()
        args = p.parse_args(["--profile", profile, "--config", str(empty)])
        chosen = common.chosen_config(p, args, module.PROFILES, "x")
        assert chosen == module.PROFILES[profile], module.__name__


def test_duplicate_yaml_keys_are_refused(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("seeds: 2\nseeds: 3\n")
    with pytest.raises(ValueError, match="key 'seeds' is given twice \\(line 2\\)"):
        read_yaml(f)
    rc, _, err = _run(["countdown", "--profile", "smoke", "--config", str(f), "--print-config"], capsys)
    assert rc == 2 and "key 'seeds' is given twice" in err and len(err.strip().splitlines()) == 1


# -- item 5: one line, with the way out ----------------------------------------------------------------------------


def test_damaged_data_files_are_one_line_naming_the_file(tmp_path):
    for name, data in (("t.parquet", b"PAR1 not really"), ("t.json", b'[{"a": 1'), ("t.jsonl", b'{"a": 1}\n{"a"\n')):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError) as exc:
            read_table(tmp_path / name)
        assert str(tmp_path / name) in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_or_damaged_samples_file_names_the_step_to_redo(tmp_path, capsys):
    out = tmp_path / "R"
    assert _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)[0] == 0
    (out / "samples_grpo.pt").write_bytes(b"truncated")
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
    err = err.strip().splitlines()[-1]  # after the progress bar: one line
    assert rc == 2 and err.startswith("python -m reproduce toy_bandit: error: ")
    assert f"{out / 'samples_grpo.pt'} is damaged" in err and f"delete {out / 'steps' / 'grpo.json'}" in err
    (out / "samples_grpo.pt").unlink()
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
    assert rc == 2 and f"{out / 'samples_grpo.pt'} is missing; delete" in err


def test_ctrl_c_in_eval_and_theory_prints_the_command_to_resume(monkeypatch, capsys):
    import setpo.eval.__main__ as eval_cli
    import theory.__main__ as theory_cli

    def interrupted(argv):
        raise KeyboardInterrupt

    for module, argv, prog in (
        (eval_cli, ["--model", "m", "--out", "o", "--overwrite"], "python -m setpo.eval --model m --out o"),
        (theory_cli, ["--quick"], "python -m theory --quick"),
    ):
        monkeypatch.setattr(module, "_main", interrupted)
        assert module.main(argv) == 130
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "interrupted (SIGINT)" in err and err.endswith(prog), err


def test_verl_entry_without_verl_is_one_line(monkeypatch, capsys):
    import runpy

    monkeypatch.setitem(sys.modules, "setpo.integrations.verl.runner", None)  # as if verl were not installed
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("setpo.integrations.verl", run_name="__main__")
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "install verl" in err


def test_a_lock_of_a_process_that_is_gone_is_taken_over_at_once(tmp_path, capsys):
    out = tmp_path / "R"
    RunDir(out, {"a": 1}).close()
    proc = _python("print('done')")
    proc.wait()
    (out / LOCK).write_text(json.dumps({"pid": proc.pid, "host": socket.gethostname(), "command": "old run"}))
    t0 = time.perf_counter()
    RunDir(out, {"a": 1}).close()
    assert time.perf_counter() - t0 < 5
    assert f"taking over the lock of PID {proc.pid} (old run), which is no longer running" in capsys.readouterr().err


def test_a_size_too_large_for_memory_and_a_damaged_model_file_are_one_line(tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    def huge(argv):
        torch.empty(2**50, dtype=torch.uint8)  # a petabyte: torch's error carries C++ frames

    assert common.cli(huge, [], prog="p") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("p: error: out of memory (") and "smaller profile" in err

    def overflow(argv):
        torch.zeros(1, 1).expand(10**20, 1)  # torch's TypeError carries 1,000 characters of C++ frames

    assert common.cli(overflow, [], prog="p") == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "p: error: expand(): argument 'size' failed to unpack the object at pos 1 with error \"Overflow when "
        'unpacking long long"; a size is too large for this machine: ask for a smaller profile or fewer seeds '
        "(TypeError; SETPO_TRACEBACK=1 shows where)"
    )

    damaged = tmp_path / "model.safetensors"
    damaged.write_bytes(b"\xff" * 64)
    assert common.cli(lambda argv: load_file(damaged), [], prog="p") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a model file in the run folder is damaged: delete that model's step" in err


def test_quick_reports_a_user_error_of_one_experiment_in_one_line(tmp_path, monkeypatch, capsys):
    import importlib

    for name in cli_entry.EXPERIMENTS:
        monkeypatch.setattr(importlib.import_module(f"reproduce.{name}"), "_execute", lambda *a: 0)

    def refused(*a):
        raise RunExistsError("R/summary.md is in the run folder but was not written by this run")

    monkeypatch.setattr(toy_bandit, "_execute", refused)
    rc, out, err = _run(["quick", "--out", str(tmp_path / "q")], capsys)
    assert rc == 1 and "Traceback" not in err and "toy_bandit failed: RunExistsError" in out
    assert "python -m reproduce toy_bandit: error: R/summary.md is in the run folder" in err


def test_reproduce_out_pointing_at_a_file_is_one_line(tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("mine")
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(target), "--overwrite"], capsys)
    assert rc == 2 and err.strip() == (
        f"python -m reproduce toy_bandit: error: {target} exists and is not a folder; choose another --out"
    )
    assert target.read_text() == "mine"


def _killed_toy_bandit(out: Path) -> subprocess.Popen:
    """A real `python -m reproduce toy_bandit --profile smoke` process into `out`, killed with SIGKILL after its
    first step was saved (while the second runs)."""
    proc = _python(
        f"""
        import sys, time
        from reproduce import toy_bandit
        from reproduce.__main__ import main
        real, calls = toy_bandit.train_bandit, []

        def slow_after_the_first(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                print("first step saved", flush=True)
                time.sleep(60)  # killed here
            return real(*args, **kwargs)

        toy_bandit.train_bandit = slow_after_the_first
        sys.exit(main(["toy_bandit", "--profile", "smoke", "--out", {str(out)!r}]))
        """
    )
    assert proc.stdout.readline().strip() == "first step saved"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (out / "samples_grpo.pt").exists() and (out / LOCK).exists()
    return proc


def _reproduce(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "reproduce", *argv], env=env, capture_output=True, text=True)


def test_a_toy_bandit_run_killed_mid_run_then_a_users_file_then_overwrite(tmp_path):
    out = tmp_path / "R"
    proc = _killed_toy_bandit(out)
    (out / "post_mortem.md").write_text("the run died after its first step")
    done = _reproduce("toy_bandit", "--profile", "smoke", "--seeds", "3", "--out", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert f"taking over the lock of PID {proc.pid}" in done.stderr
    assert f"kept 1 file(s) in {out} that the run did not write: post_mortem.md" in done.stderr
    assert (out / "post_mortem.md").read_text() == "the run died after its first step"
    assert json.loads((out / "config.json").read_text())["config"]["seeds"] == 3


def test_a_run_killed_mid_run_resumes_to_the_results_of_an_unbroken_run(tmp_path):
    """SIGKILL after the first step, then the same command: every table and step equals a run never killed."""
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    _killed_toy_bandit(killed)
    first = (killed / "steps" / "grpo.json").read_bytes()
    resumed = _reproduce("toy_bandit", "--profile", "smoke", "--out", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    assert (killed / "steps" / "grpo.json").read_bytes() == first  # loaded, not redone
    assert _reproduce("toy_bandit", "--profile", "smoke", "--out", str(whole)).returncode == 0

    def results(folder: Path) -> dict[str, bytes]:
        # every file but the wall times, the start time in config.json and the figures (their pixels)
        skip = {"timing.json", "config.json", MANIFEST}
        files = [p for p in folder.rglob("*") if p.is_file() and p.name not in skip and p.suffix != ".png"]
        return {str(p.relative_to(folder)): p.read_bytes() for p in files}

    got, want = results(killed), results(whole)
    assert sorted(got) == sorted(want) and "summary.csv" in got and "steps/setpo.json" in got
    assert got == want
    manifests = [json.loads((f / MANIFEST).read_text()) for f in (killed, whole)]
    assert manifests[0] == manifests[1]  # the same files recorded as the run's
    configs = [json.loads((f / "config.json").read_text())["config"] for f in (killed, whole)]
    assert configs[0] == configs[1]
    assert not (killed / LOCK).exists()


def test_a_config_file_that_is_not_yaml_and_an_out_that_cannot_be_made_say_what_to_do(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seeds: 2\nsweep: [1\n")
    rc, _, err = _run(["countdown", *SMOKE, "--config", str(bad), "--print-config"], capsys)
    assert rc == 2 and err.strip() == (
        f"python -m reproduce countdown: error: --config {bad} is not valid YAML (expected ',' or ']', but got "
        "'<stream end>' at line 3, column 1); fix that line, or start from the file --print-config writes (see --help)"
    )
    (tmp_path / "file.txt").write_text("mine")
    out = tmp_path / "file.txt" / "R"
    rc, _, err = _run(["toy_bandit", *SMOKE, "--out", str(out)], capsys)
    assert rc == 2 and err.strip() == (
        f"python -m reproduce toy_bandit: error: cannot create the run folder {out}: Not a directory; "
        "choose another --out"
    )


def test_setpo_eval_with_a_damaged_weights_file_is_one_line(tmp_path, capsys):
    from setpo.eval.__main__ import main as eval_main
    from setpo.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "model", hidden_size=16, num_layers=1, num_heads=2)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    data = tmp_path / "data" / "aime24"
    data.mkdir(parents=True)
    pd.DataFrame([{"prompt": "1 + 1?", "reward_model": {"ground_truth": "2"}}]).to_parquet(data / "test.parquet")
    argv = ["--model", str(model), "--out", str(tmp_path / "ev"), "--data", str(tmp_path / "data")]
    capsys.readouterr()  # the build's progress bar
    with pytest.raises(SystemExit) as exc:
        eval_main([*argv, "--benchmarks", "aime24", "--n", "1", "--backend", "hf"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"python -m setpo.eval: error: a weights file of the model {str(model)!r} is damaged (")
    assert err.endswith("copy or save the checkpoint again")


@pytest.mark.parametrize(
    "row, why",
    [
        ({"reward_model": {"ground_truth": "2"}}, "row 0 has no prompt"),
        ({"prompt": "1 + 1?", "answer": "2"}, "row 0 has no reference answer"),  # not the prepared format
    ],
)
def test_setpo_eval_names_a_prepared_row_it_cannot_score(tmp_path, capsys, row, why):
    from setpo.eval.__main__ import main as eval_main

    data = tmp_path / "data" / "aime24"
    data.mkdir(parents=True)
    pd.DataFrame([row]).to_parquet(data / "test.parquet")
    with pytest.raises(SystemExit) as exc:
        eval_main(
            [
                "--model",
                "none",
                "--out",
                str(tmp_path / "ev"),
                "--data",
                str(tmp_path / "data"),
                "--benchmarks",
                "aime24",
            ]
        )
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and err == (
        f"python -m setpo.eval: error: {data / 'test.parquet'} {why} "
        "(python -m setpo.data.prepare --overwrite writes it again)"
    )
    assert not (tmp_path / "ev").exists()  # refused before anything is written
