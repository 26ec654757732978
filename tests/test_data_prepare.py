"""Data preparation: verl rows, field mappings, local/Hub loading errors, resume, and the shipped benchmark copies."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from bench_paths import BENCH, needs_bench

from setpo.data import (
    SPECS,
    DatasetUnavailableError,
    get_spec,
    prepare_datasets,
    prepare_split,
    read_prepared,
    source_table,
)
from setpo.data.prepare import main as prepare_main
from setpo.data.records import EXTRA_INFO_FIELDS
from setpo.tasks.countdown import countdown_prompt
from setpo.tasks.math.extract import extract_boxed
from setpo.tasks.math.prompts import MATH_INSTRUCTION, MATH_SYSTEM


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def local(tmp_path: Path) -> Path:
    """A miniature local folder with each dataset's real field layout."""
    d = tmp_path / "bench"
    _jsonl(d / "gsm8k/test.jsonl", [{"question": "Q1?", "answer": "work\n#### 1,234", "idx": 0}])
    _jsonl(d / "amc23/test.jsonl", [{"id": 0, "problem": "A?", "answer": 27.0, "url": "u"}])
    _jsonl(d / "aime24/test.jsonl", [{"id": 60, "problem": "B?", "answer": "204", "url": "u"}])
    _jsonl(
        d / "minerva_math/test.jsonl",
        [
            {"problem": "First  problem", "solution": "so \\boxed{1}", "type": "t", "idx": 0},
            {"problem": "Second problem", "solution": "so \\boxed{2.5}", "type": "t", "idx": 1},
        ],
    )
    # answers keyed by problem text (whitespace-insensitive), in a different order from test.jsonl
    _jsonl(d / "minerva_math/answers.jsonl", [{"problem": "Second problem", "answer": ["2.5\n", "5/2"]}])
    _jsonl(
        d / "olympiadbench/test.jsonl",
        [{"id": 1, "question": "C?", "final_answer": ["$\\frac{1}{2}$"], "unit": None, "subfield": "Algebra"}],
    )
    _jsonl(d / "countdown/train.jsonl", [{"target": 24, "nums": [3, 8, 1]}, {"target": 10, "nums": [2, 5, 1, 1]}])
    return d


def _rows(out: Path, dataset: str, split: str = "test") -> list[dict]:
    return read_prepared(out / dataset / f"{split}.parquet")


def test_math_rows_follow_the_verl_format(local, tmp_path):
    out = tmp_path / "out"
    prepare_datasets(
        out, ["gsm8k", "amc23", "aime24", "olympiadbench"], splits=["test"], local_dir=local, use_hub=False
    )
    df = pd.read_parquet(out / "gsm8k" / "test.parquet")
    assert list(df.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    (row,) = _rows(out, "gsm8k")
    assert row["data_source"] == "gsm8k" and row["ability"] == "math"
    assert row["prompt"] == [
        {"role": "system", "content": MATH_SYSTEM},
        {"role": "user", "content": "Q1?\n" + MATH_INSTRUCTION},
    ]
    assert row["reward_model"] == {"style": "rule", "ground_truth": "1234"}  # after ####, commas removed
    assert row["extra_info"]["split"] == "test" and row["extra_info"]["index"] == 0
    assert row["extra_info"]["problem"] == "Q1?" and row["extra_info"]["answers"] == ["1234"]
    assert list(row["extra_info"]) == list(EXTRA_INFO_FIELDS) and row["extra_info"]["idx"] == "0"
    assert row["extra_info"]["subject"] is None  # another dataset's field: present, empty
    assert _rows(out, "amc23")[0]["reward_model"]["ground_truth"] == "27"  # 27.0 stored as a float
    assert _rows(out, "aime24")[0]["reward_model"]["ground_truth"] == "204"
    oly = _rows(out, "olympiadbench")[0]
    assert oly["reward_model"]["ground_truth"] == "$\\frac{1}{2}$"
    assert oly["extra_info"]["subfield"] == "Algebra" and oly["extra_info"]["unit"] is None


def test_minerva_gold_is_the_boxed_solution_with_side_file_spellings_of_the_same_value(local, tmp_path):
    _jsonl(
        local / "minerva_math/test.jsonl",
        [
            {"problem": "First  problem", "solution": "so \\boxed{1}", "type": "t", "idx": 0},
            {"problem": "Second problem", "solution": "so \\boxed{2.5}", "type": "t", "idx": 1},
            {"problem": "Subproblem 0: ... 188. Subproblem 1: max?", "solution": "\\boxed{566}", "type": "t", "idx": 2},
        ],
    )
    _jsonl(
        local / "minerva_math/answers.jsonl",
        [
            {"problem": "Second problem", "answer": ["2.5\n", "5/2", "3"]},
            {"problem": "Subproblem 0: ... 188. Subproblem 1: max?", "answer": ["188"]},
        ],
    )
    prepare_split("minerva", "test", tmp_path / "out", local_dir=local, use_hub=False)
    first, second, third = _rows(tmp_path / "out", "minerva")
    assert first["extra_info"]["answers"] == ["1"]  # no entry in answers.jsonl
    assert second["extra_info"]["answers"] == ["2.5", "5/2"]  # same value kept as a spelling; 3 dropped
    assert second["reward_model"]["ground_truth"] == "2.5"
    assert third["extra_info"]["answers"] == ["566"]  # the earlier subproblem's 188 is not accepted


def test_countdown_rows_use_the_tinyzero_base_template(local, tmp_path):
    prepare_split("countdown", "train", tmp_path / "out", local_dir=local, use_hub=False)
    a, b = _rows(tmp_path / "out", "countdown", "train")
    assert a["reward_model"]["ground_truth"] == {"target": 24, "numbers": [3, 8, 1]}
    text = b["prompt"][0]["content"]
    assert "Using the numbers [2, 5, 1, 1], create an equation that equals 10." in text
    assert "<answer> (1 + 2) / 3 </answer>" in text and text.endswith("Let me solve this step by step.\n<think>")
    assert text == countdown_prompt([2, 5, 1, 1], 10)


def test_missing_hub_only_split_says_so(local, tmp_path):
    with pytest.raises(DatasetUnavailableError, match="gsm8k/train.*Hub loading disabled.*Hub-only"):
        prepare_split("gsm8k", "train", tmp_path / "out", local_dir=local, use_hub=False)
    with pytest.raises(DatasetUnavailableError) as err:
        prepare_split("math500", "test", tmp_path / "out", local_dir=local, use_hub=False)
    assert "Hub-only" not in str(err.value) and "math500/test" in str(err.value)


def test_unreachable_hub_is_reported_with_the_dataset_name(local, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError, match="Hub dataset 'qq8933/College_Math_Test' unreachable"):
        prepare_split("college_math", "test", tmp_path / "out", local_dir=local)


def test_cli_exit_codes(local, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--out", str(out), "--local-dir", str(local), "--no-hub"]
    assert prepare_main([*args, "--datasets", "aime24", "amc23"]) == 0
    assert "wrote aime24/test.parquet: 1 rows" in capsys.readouterr().out
    assert prepare_main([*args, "--datasets", "gsm8k"]) == 2  # gsm8k train is not in the local folder
    assert "Hub-only" in capsys.readouterr().err
    assert prepare_main([*args, "--datasets", "gsm8k", "--skip-missing"]) == 1
    printed = capsys.readouterr().out
    assert "MISSING gsm8k/train" in printed and "wrote gsm8k/test.parquet" in printed


def test_rerun_keeps_identical_files_and_refuses_different_ones(local, tmp_path):
    out = tmp_path / "out"
    first = prepare_split("countdown", "train", out, local_dir=local, use_hub=False)
    assert prepare_split("countdown", "train", out, local_dir=local, use_hub=False)["skipped"] is True
    with pytest.raises(FileExistsError, match="--overwrite"):
        prepare_split("countdown", "train", out, local_dir=local, limit=1, use_hub=False)
    again = prepare_split("countdown", "train", out, local_dir=local, limit=1, use_hub=False, overwrite=True)
    assert (first["rows"], again["rows"]) == (2, 1)
    assert json.loads((out / "manifest.json").read_text())["countdown/train"]["rows"] == 1


def test_bad_requests_raise_clear_errors(local, tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'gsm9k'"):
        get_spec("gsm9k")
    with pytest.raises(ValueError, match="unknown split of dataset .* 'validation'"):
        prepare_split("gsm8k", "validation", tmp_path, local_dir=local, use_hub=False)
    with pytest.raises(ValueError, match="limit must be None or an integer >= 1"):
        prepare_split("aime24", "test", tmp_path, local_dir=local, limit=0, use_hub=False)
    _jsonl(local / "aime25/test.jsonl", [{"question_text": "?", "answer": "1"}])
    with pytest.raises(ValueError, match="no problem field .*problem, question"):
        prepare_split("aime25", "test", tmp_path, local_dir=local, use_hub=False)
    _jsonl(local / "gsm8k/test.jsonl", [{"question": "Q", "answer": "no marker"}])
    with pytest.raises(ValueError, match="no '####' marker"):
        prepare_split("gsm8k", "test", tmp_path / "o2", local_dir=local, use_hub=False)


def test_source_table_names_every_hub_dataset_and_the_hub_only_splits():
    table = source_table()
    for spec in SPECS.values():
        for src in spec.hub.values():
            assert src.name in table
    hub_only = {(s.key, split) for s in SPECS.values() for split in s.splits if s.hub_only(split)}
    assert hub_only == {("gsm8k", "train"), ("college_math", "test"), ("simplerl_hard", "train")}


@needs_bench
def test_shipped_benchmark_copies_prepare_completely(tmp_path):
    counts = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "minerva": 272, "olympiadbench": 675}
    counts |= {"gsm8k": 1319}
    out = tmp_path / "out"
    done = prepare_datasets(out, list(counts), splits=["test"], local_dir=BENCH, use_hub=False)
    assert {k: v["rows"] for k, v in done.items()} == {f"{k}/test": n for k, n in counts.items()}
    for name in counts:
        rows = _rows(out, name)
        assert all(r["reward_model"]["ground_truth"].strip() for r in rows)
        assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
    # every Minerva gold is the solution's last \\boxed{}; answers.jsonl adds spellings of the same value only
    source = [json.loads(x) for x in (BENCH / "minerva_math" / "test.jsonl").read_text().splitlines()]
    minerva = _rows(out, "minerva")
    boxes = [extract_boxed(r["solution"]) for r in source]
    assert all(b in r["extra_info"]["answers"] for b, r in zip(boxes, minerva))
    cd = prepare_split("countdown", "test", out, local_dir=BENCH, use_hub=False)
    assert cd["rows"] == 2001


# -- stale or corrupt output (issue 15, item 20) ----------------------------------------------------------------


def test_a_shrunken_source_rebuilds_the_file_instead_of_keeping_it(local, tmp_path):
    out = tmp_path / "out"
    _jsonl(local / "aime24/test.jsonl", [{"id": i, "problem": f"P{i}?", "answer": str(i)} for i in range(5)])
    assert prepare_split("aime24", "test", out, local_dir=local, use_hub=False)["rows"] == 5
    assert prepare_split("aime24", "test", out, local_dir=local, use_hub=False)["skipped"] is True
    _jsonl(local / "aime24/test.jsonl", [{"id": i, "problem": f"P{i}?", "answer": str(i)} for i in range(2)])
    again = prepare_split("aime24", "test", out, local_dir=local, use_hub=False)
    assert "skipped" not in again and again["rows"] == 2 and "source" in again["rebuilt"]
    assert len(_rows(out, "aime24")) == 2


@pytest.mark.parametrize("damage", ["truncate", "replace"])
def test_a_damaged_file_is_rebuilt(local, tmp_path, damage):
    out = tmp_path / "out"
    prepare_split("countdown", "train", out, local_dir=local, use_hub=False)
    f = out / "countdown" / "train.parquet"
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:200])
    else:  # a readable parquet file with the right row count but other rows
        pd.DataFrame({"x": [1, 2]}).to_parquet(f)
    again = prepare_split("countdown", "train", out, local_dir=local, use_hub=False)
    assert "skipped" not in again and again["rebuilt"]
    assert [r["reward_model"]["ground_truth"]["target"] for r in _rows(out, "countdown", "train")] == [24, 10]


def test_an_unreadable_manifest_is_named(local, tmp_path):
    out = tmp_path / "out"
    prepare_split("aime24", "test", out, local_dir=local, use_hub=False)
    (out / "manifest.json").write_text('{"aime24/test": {"pa')
    with pytest.raises(ValueError, match="manifest.json is unreadable.*--overwrite"):
        prepare_split("aime24", "test", out, local_dir=local, use_hub=False)
    assert prepare_split("aime24", "test", out, local_dir=local, use_hub=False, overwrite=True)["rows"] == 1


def test_an_empty_gsm8k_gold_is_refused(local, tmp_path):
    _jsonl(local / "gsm8k/test.jsonl", [{"question": "Q", "answer": "work\n#### "}])
    with pytest.raises(ValueError, match="empty after its '####' marker"):
        prepare_split("gsm8k", "test", tmp_path / "out", local_dir=local, use_hub=False)


def test_cli_reports_a_rebuild_and_reads_setpo_benchmark_dir(local, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("SETPO_BENCHMARK_DIR", str(local))
    assert prepare_main(["--out", str(out), "--datasets", "aime24", "--no-hub"]) == 0  # no --local-dir given
    assert "wrote aime24/test.parquet: 1 rows" in capsys.readouterr().out
    (out / "aime24" / "test.parquet").write_bytes(b"PAR1 broken")
    assert prepare_main(["--out", str(out), "--datasets", "aime24", "--no-hub"]) == 0
    assert "rebuilt (the existing file is unreadable" in capsys.readouterr().out
    monkeypatch.setenv("SETPO_BENCHMARK_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit):
        prepare_main(["--out", str(out), "--datasets", "aime24", "--no-hub"])
    assert "SETPO_BENCHMARK_DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        prepare_main(["--out", str(out), "--datasets", "aime24", "--limit", "-1", "--local-dir", str(local)])
    assert "--limit must be a positive integer" in capsys.readouterr().err
