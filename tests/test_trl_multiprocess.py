"""A real 2-process CPU run (torch.distributed, gloo) of SetPOTrainer: each rank's advantages equal the single-process
A_bar + lambda * s sliced to its rows, including the group that straddles the two ranks, and the group reward (GAPO)
is computed on whole groups."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)

from setpo.core import cosine_kernel, group_advantages, loo_credits  # noqa: E402
from setpo.embedders import build_embedder  # noqa: E402
from setpo.rewards import gapo_rewards  # noqa: E402
from setpo.tiny import build_tiny_model  # noqa: E402

WORKER = Path(__file__).with_name("trl_multiprocess_worker.py")
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_match_the_single_process_computation(tmp_path):
    model_dir = build_tiny_model(tmp_path / "model", hidden_size=32, num_layers=1)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--nnodes=1",
        f"--master_port={free_port()}",
        str(WORKER),
        str(model_dir),
        str(out),
    ]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    r0, r1 = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["world_size"], r1["world_size"], r0["rank"], r1["rank"]) == (2, 2, 0, 1)
    G, lam, B = r0["G"], r0["lambda"], len(r0["completions"])
    assert B == 6 and G == 4  # 12 rows = 3 groups; rows 4, 5 (rank 0) and 6, 7 (rank 1) form the middle group

    # The gathered batch is rank 0's rows then rank 1's rows.
    gathered = r0["completions"] + r1["completions"]
    assert r0["gathered_completions"] == r1["gathered_completions"] == gathered

    # Rewards recomputed in one process: per-row reward + GAPO on whole groups.
    valid = [list("abcdefghijklmnopqrstuvwxyz")] * len(gathered)
    gapo = gapo_rewards([c[:1] or None for c in gathered], valid, G)
    torch.testing.assert_close(torch.tensor(r0["gapo_rewards"]), gapo)
    torch.testing.assert_close(torch.tensor(r1["gapo_rewards"]), gapo)
    length = torch.tensor([float(len(set(c))) for c in gathered])
    torch.testing.assert_close(torch.tensor(r0["length_rewards"]), length)
    A = group_advantages(length.double() + gapo.double(), G, scale="group", eps=1e-4)

    # Credits recomputed in one process from the gathered completions with the same embedder and kernel.
    emb = build_embedder("hashed")(gathered).double()
    s = loo_credits(cosine_kernel(emb.reshape(-1, G, emb.shape[-1]), clamp=False)).reshape(-1)
    assert float(s[4:8].abs().max()) > 1e-3  # the straddling group has non-trivial credits
    for r, rec in enumerate((r0, r1)):
        rows = slice(r * B, (r + 1) * B)
        torch.testing.assert_close(torch.tensor(rec["credits_all"], dtype=torch.float64), s, rtol=0, atol=1e-9)
        torch.testing.assert_close(torch.tensor(rec["credits_local"], dtype=torch.float64), s[rows], rtol=0, atol=1e-9)
        want = A[rows] + lam * s[rows]
        torch.testing.assert_close(torch.tensor(rec["advantages"], dtype=torch.float64), want, rtol=0, atol=2e-5)
