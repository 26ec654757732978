"""The rendered launch scripts as a cluster user runs them: from any folder, multi-node runs under an absolute
OUT_DIR only, one actor checkpoint kept, and a disk line per setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reproduce.scale.__main__ import script_text
from reproduce.scale.settings import (
    CHECKPOINT_BYTES_PER_PARAM,
    MERGED_BYTES_PER_PARAM,
    PARAMS_B,
    SETTINGS,
    checkpoint_gb,
    disk_gb_per_seed,
)

ROOT = Path(__file__).resolve().parents[1]


def _fake_python(tmp_path: Path) -> Path:
    fake = tmp_path / "fake_python"
    fake.write_text('#!/usr/bin/env bash\necho "$@" > "$CALLS"\n')
    fake.chmod(0o755)
    return fake


def _bash(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "OUT_DIR"}
    full |= {"PYTHON": str(_fake_python(tmp_path)), "DATA_DIR": "/data", "SEEDS": "1", "CALLS": str(tmp_path / "calls")}
    full |= env
    return subprocess.run(["bash", "-c", script, "launch"], cwd=tmp_path, env=full, capture_output=True, text=True)


def test_multi_node_scripts_refuse_a_relative_or_missing_out_dir(tmp_path):
    script = script_text(SETTINGS["table7_setpo_grpo_qwen32b"])
    out = _bash(script, tmp_path, OUT_DIR="runs/scale")
    assert out.returncode == 2 and "is relative: a 4-node run needs an absolute folder" in out.stderr
    out = _bash(script, tmp_path)
    assert out.returncode != 0 and "set OUT_DIR to an absolute folder that all 4 nodes mount" in out.stderr
    assert not (tmp_path / "calls").exists()  # nothing was launched
    out = _bash(script, tmp_path, OUT_DIR=str(tmp_path / "shared"))
    assert out.returncode == 0, out.stderr
    assert (
        f"trainer.default_local_dir={tmp_path}/shared/table7_setpo_grpo_qwen32b/seed1/checkpoints"
        in (tmp_path / "calls").read_text()
    )


def test_single_node_scripts_keep_their_default_out_dir(tmp_path):
    out = _bash(script_text(SETTINGS["table4_setpo_grpo_math1.5b"]), tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "runs" / "scale" / "table4_setpo_grpo_math1.5b" / "seed1" / "train.log").is_file()


def test_every_script_keeps_one_actor_checkpoint_and_states_its_disk():
    for s in SETTINGS.values():
        text = script_text(s)
        assert '"trainer.max_actor_ckpt_to_keep=1"' in text, s.name
        assert f"# Disk: about {disk_gb_per_seed(s):,.0f} GB per seed at peak" in text, s.name
        assert "python -m setpo.eval.checkpoint" in text
    s = SETTINGS["table7_setpo_grpo_qwen32b"]
    assert checkpoint_gb(s) == pytest.approx(CHECKPOINT_BYTES_PER_PARAM * PARAMS_B[s.model])
    assert disk_gb_per_seed(s) == pytest.approx((2 * CHECKPOINT_BYTES_PER_PARAM + MERGED_BYTES_PER_PARAM) * 32.8)


def test_the_launcher_runs_from_any_folder(tmp_path):
    """``python <checkout>/reproduce/scale NAME --print`` works outside the checkout (``-m`` needs the root)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(ROOT / "reproduce" / "scale"), "table4_grpo_1.5b", "--print"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == script_text(SETTINGS["table4_setpo_grpo_math1.5b"])


def test_the_embedder_memory_step_measures_table7s_batch():
    from reproduce.scale import bench_embed_placement as bench

    assert bench.table7_batch() == (8, 4096)  # the smaller batch the docs advise for 4,096-token responses
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as stop:
            bench.main(["--memory"])
        assert stop.value.code == 2
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            bench.embed_memory(8, 16, torch.bfloat16)
    with pytest.raises(SystemExit):
        bench.main(["--json", "x.json"])  # --json only with --memory
