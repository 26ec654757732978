"""A real 2-process CPU run (torch.distributed, gloo) of SetPOTrainer: each rank's advantages equal the single-process
A_bar + lambda * s sliced to its rows, including the group that straddles the two ranks; group rewards (GAPO, and a
non-deterministic one) are computed once on whole groups and agree on both ranks; the placebo permutation is the same
on both ranks and moves every credit to another group."""

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
    # The non-deterministic group reward: scored once (by rank 0, on all 12 rows), both ranks use its numbers.
    assert r0["noisy_calls"] == [len(gathered)] and r1["noisy_calls"] == []
    assert r0["noisy_rewards"] == r1["noisy_rewards"]
    noisy = torch.tensor(r0["noisy_rewards"])
    assert len(set(r0["noisy_rewards"])) > 1
    A = group_advantages(length.double() + gapo.double() + noisy.double(), G, scale="group", eps=1e-4)
    # A_bar sums to 0 over the straddling group (rows 4, 5 on rank 0 and 6, 7 on rank 1)
    straddling_A_bar = [a - lam * c for a, c in zip(r0["advantages"][4:], r0["credits_local"][4:])]
    straddling_A_bar += [a - lam * c for a, c in zip(r1["advantages"][:2], r1["credits_local"][:2])]
    assert abs(sum(straddling_A_bar)) < 1e-4

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

    # Placebo arm: the same permuted credits on both ranks, a permutation of the batch's own credits in which no
    # row keeps a credit of its own group.
    p0, p1 = r0["placebo"], r1["placebo"]
    assert p0["gathered_completions"] == p1["gathered_completions"]
    own = torch.tensor(p0["own_credits_all"], dtype=torch.float64)
    placebo = torch.tensor(p0["credits_all"], dtype=torch.float64)
    assert p0["credits_all"] == p1["credits_all"] and p0["own_credits_all"] == p1["own_credits_all"]
    assert float(own.abs().max()) > 1e-3 and not torch.equal(own, placebo)
    torch.testing.assert_close(placebo.sort().values, own.sort().values, rtol=0, atol=0)
    group = torch.arange(len(own)) // G
    for i in range(len(own)):
        sources = [j for j in range(len(own)) if own[j] == placebo[i]]
        assert sources and all(group[j] != group[i] for j in sources), i
    for r, rec in enumerate((p0, p1)):
        assert rec["credits_local"] == rec["credits_all"][r * B : (r + 1) * B]
