"""Every script in examples/ runs as a user runs it: a fresh process, from a folder outside the checkout, offline;
each asserts on its own output and prints "ok" last."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: examples that train (TRL steps on a tiny model or SmolLM2): tens of seconds on a CPU
TRAINING = {"trl_gapo.py", "trl_smollm2_own_reward.py"}


def test_the_examples_folder_holds_the_documented_scripts():
    names = {p.name for p in EXAMPLES}
    assert {"credits_from_embeddings.py", "verl_paper_launch.py"} | TRAINING <= names
    listed = (ROOT / "docs" / "getting-started.md").read_text()
    assert all(f"examples/{n}" in listed for n in names), "every example is listed in docs/getting-started.md"


@pytest.mark.parametrize(
    "script", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.name in TRAINING else []) for p in EXAMPLES]
)
def test_example_runs_from_outside_the_checkout(script: Path, tmp_path: Path):
    env = {
        **os.environ,
        # this checkout's package (CI installs it editable, so the same code), but never the cwd's files
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "ok", proc.stdout[-2000:]
    assert not any(tmp_path.iterdir()), f"{script.name} left files in the folder it ran from"
