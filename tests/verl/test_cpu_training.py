"""A real verl 0.9.1 training run on CPU: ``python -m setpo.integrations.verl`` with ``setpo.integrations.verl.cpu``.

Each run trains a ``setpo.tiny`` Llama model for 2 GRPO steps (2 prompts x 4 samples) with verl's own
trainer, FSDP2 engine, agent loop, TransferQueue and reward loop; generation runs in the ``hf`` rollout with the
trainer's weights synced into it after every update. The run dumps every trained batch (the rows as the actor
read them from the TransferQueue) and the rollout's weight fingerprints; the tests recompute GRPO's advantages
and the SetPO credit from the dumped responses independently of the adapter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import setpo
import setpo.integrations.verl.cpu as cpu_support
from setpo.embedders import HashedNgramEmbedder
from setpo.integrations.verl.cpu import CPU_ENV, DUMP_ENV, cpu_overrides, digit_share_reward

ROOT = Path(__file__).resolve().parents[2]
LAMBDA = 0.1
STEPS = 2
N_SAMPLES = 4
GRPO_EPS = 1e-6  # verl's compute_grpo_outcome_advantage epsilon
PROMPTS = [([1, 2, 3], 6), ([2, 5, 1], 7), ([4, 3, 2], 9), ([6, 1, 1], 8)]


@pytest.fixture(scope="module")
def train_file(tmp_path_factory) -> str:
    """Countdown rows in verl's parquet layout (the fields ``python -m setpo.data.prepare`` writes)."""
    rows = [
        {
            "data_source": "countdown",
            "prompt": [{"role": "user", "content": f"{nums} -> {target}"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": {"target": target, "numbers": nums}},
            "extra_info": {"index": i, "split": "train"},
        }
        for i, (nums, target) in enumerate(PROMPTS)
    ]
    path = tmp_path_factory.mktemp("data") / "train.parquet"
    pd.DataFrame(rows).to_parquet(path, index=False)
    return str(path)


def run_verl(out: Path, model_dir: str, train_file: str, n_workers: int, lam: float, dynamic_bsz: bool) -> Path:
    """One CPU training run (niced, its own Ray cluster, stopped when it exits); returns the dump folder."""
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **CPU_ENV,
        DUMP_ENV: str(out / "dump"),
        "VERL_FILE_LOGGER_PATH": str(out / "metrics.jsonl"),
        "RAY_AUTH_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    overrides = [
        *cpu_overrides(n_workers, dynamic_bsz=dynamic_bsz),
        f"data.train_files={train_file}",
        f"data.val_files={train_file}",
        "data.train_batch_size=2",
        "data.max_prompt_length=32",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model_dir}",
        f"actor_rollout_ref.rollout.n={N_SAMPLES}",
        "actor_rollout_ref.rollout.prompt_length=32",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=256",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.actor.optim.lr=1e-2",
        "algorithm.use_kl_in_reward=false",
        "algorithm.adv_estimator=grpo",
        "reward.custom_reward_function.path=pkg://setpo.integrations.verl.cpu",
        "reward.custom_reward_function.name=digit_share_reward",
        f"trainer.total_training_steps={STEPS}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=[console,file]",
        "trainer.project_name=setpo_cpu",
        "trainer.experiment_name=test",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        f"hydra.run.dir={out / 'hydra'}",  # hydra's own output folder: in the test's folder, not the repository
        "trainer.v1.trainer_mode=setpo_sync",
        f"+setpo.lambda={lam}",
        "+setpo.embedder=hashed",
        "+setpo.embed_device=cpu",
    ]
    cmd = ["nice", "-n", "10", sys.executable, "-m", "setpo.integrations.verl", *overrides]
    start = time.perf_counter()
    with open(out / "run.log", "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=900)
    (out / "wall_s.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    if proc.returncode != 0:
        tail = (out / "run.log").read_text()[-6000:]
        raise AssertionError(f"verl CPU run failed (exit {proc.returncode}):\n{tail}")
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir, train_file):
    """``run(n_workers, lam, dynamic_bsz)``: each configuration runs once per module."""
    done: dict[tuple, Path] = {}

    def get(n_workers: int, lam: float, dynamic_bsz: bool = False) -> Path:
        key = (n_workers, lam, dynamic_bsz)
        if key not in done:
            out = tmp_path_factory.mktemp(f"verl_dp{n_workers}_lam{lam}_dyn{int(dynamic_bsz)}")
            done[key] = run_verl(out, tiny_model_dir, train_file, n_workers, lam, dynamic_bsz)
        return done[key]

    return get


def load_batches(out: Path) -> list[list[dict]]:
    files = sorted((out / "dump").glob("batch_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(files) == STEPS, f"expected {STEPS} dumped batches, found {[p.name for p in files]}"
    return [json.loads(p.read_text()) for p in files]


def load_metrics(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if line.strip()]
    assert [s["step"] for s in steps] == list(range(1, STEPS + 1))
    return [s["data"] for s in steps]


def grpo_advantages(rewards: list[float], uids: list[str]) -> np.ndarray:
    """GRPO's outcome advantage (r - mean_g) / (std_g + eps), std unbiased, per uid group (verl's default)."""
    rewards_arr = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(rewards_arr)
    for uid in set(uids):
        rows = [i for i, u in enumerate(uids) if u == uid]
        group = rewards_arr[rows]
        out[rows] = (group - group.mean()) / (group.std(ddof=1) + GRPO_EPS)
    return out


def setpo_credits(texts: list[str], uids: list[str]) -> np.ndarray:
    """s_i: leave-one-out credits of the cosine kernel on hashed n-gram embeddings, per uid group (paper eq. 3)."""
    emb = HashedNgramEmbedder()(texts)
    out = np.zeros(len(texts))
    for uid in set(uids):
        rows = [i for i, u in enumerate(uids) if u == uid]
        if len(rows) >= 3:
            out[rows] = setpo.loo_credits_reference(setpo.cosine_kernel(emb[rows].double())).numpy()
    return out


def check_advantages(out: Path, tokenizer, lam: float) -> None:
    """Every trained batch: per-token advantages == (GRPO + lam * s) on the response mask, recomputed here."""
    for rows in load_batches(out):
        assert len(rows) == 2 * N_SAMPLES
        texts = [tokenizer.decode(r["responses"], skip_special_tokens=True) for r in rows]
        uids = [r["uid"] for r in rows]
        rewards = [r["reward"] for r in rows]
        # the rewards verl stored are the custom reward of the decoded responses
        np.testing.assert_allclose(rewards, [digit_share_reward("countdown", t, None) for t in texts], atol=1e-6)
        expected = grpo_advantages(rewards, uids) + lam * setpo_credits(texts, uids)
        for row, value in zip(rows, expected):
            mask = torch.tensor(row["response_mask"], dtype=torch.float64)
            got = torch.tensor(row["advantages"], dtype=torch.float64)
            torch.testing.assert_close(got, value * mask, rtol=0, atol=2e-5)
        assert np.ptp(grpo_advantages(rewards, uids)) > 0, "rewards must vary for the GRPO part to be tested"


def check_weights_changed(out: Path, n_replicas: int) -> None:
    """Every rollout replica received the trainer's weights after each step, and they differ from the initial ones."""
    for replica in range(n_replicas):
        events = [
            json.loads(line) for line in (out / "dump" / f"rollout_weights_{replica}.jsonl").read_text().splitlines()
        ]
        initial = events[0]["fingerprint"]
        trained = [e for e in events if e["event"] == "update" and e["global_steps"]]
        assert [e["global_steps"] for e in trained] == list(range(1, STEPS + 1))
        assert all(abs(e["fingerprint"] - initial) > 1e-3 for e in trained)


@pytest.mark.slow
def test_setpo_step_on_cpu(run, tokenizer):
    out = run(1, LAMBDA)
    check_advantages(out, tokenizer, LAMBDA)
    with pytest.raises(AssertionError):  # the credit is really in the trained advantages
        check_advantages(out, tokenizer, 0.0)
    for step in load_metrics(out):
        assert step["setpo/lambda"] == pytest.approx(LAMBDA)
        assert step["setpo/num_groups"] == 2 and step["setpo/num_small_groups"] == 0
        assert "setpo/credit_std" in step and "timing_s/setpo" in step
        # the rollout's log-probs are the actor's: the weights it sampled with are the trained ones
        assert step["training/rollout_probs_diff_max"] < 1e-2
    check_weights_changed(out, 1)


@pytest.mark.slow
def test_lambda_zero_is_verl_grpo(run, tokenizer):
    out = run(1, 0.0)
    check_advantages(out, tokenizer, 0.0)
    with pytest.raises(AssertionError):
        check_advantages(out, tokenizer, LAMBDA)
    for step in load_metrics(out):
        assert not any(k.startswith("setpo/") for k in step)
    check_weights_changed(out, 1)


@pytest.mark.slow
def test_two_ranks_with_dynamic_batch_size(run, tokenizer):
    out = run(2, LAMBDA, dynamic_bsz=True)
    check_advantages(out, tokenizer, LAMBDA)
    with pytest.raises(AssertionError):
        check_advantages(out, tokenizer, 0.0)
    for step in load_metrics(out):
        assert step["setpo/lambda"] == pytest.approx(LAMBDA)
        assert step["training/rollout_probs_diff_max"] < 1e-2
    check_weights_changed(out, 2)


def test_other_verl_versions_are_refused():
    cpu_support.check_verl_version("0.9.1")
    with pytest.raises(RuntimeError, match="supports verl 0.9.1 only, found verl 0.10.0"):
        cpu_support.check_verl_version("0.10.0")


def test_bad_worker_or_cpu_counts_are_refused():
    with pytest.raises(ValueError, match="n_workers must be >= 1"):
        cpu_overrides(0)
    with pytest.raises(ValueError, match="num_cpus=4 is too few for 2 workers"):
        cpu_overrides(2, num_cpus=4)
    assert "transfer_queue.backend.SimpleStorage.num_data_storage_units=1" in cpu_overrides(1)


def test_process_group_backend_is_plain_gloo():
    seen = []
    init = cpu_support._plain_gloo(lambda timeout_second, backend: seen.append(backend))
    init(timeout_second=None)
    init(backend="cpu:gloo")
    assert seen == ["gloo", "cpu:gloo"]


def test_transfer_queue_start_up_times_out_with_a_clear_error(monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.setattr(cpu_support, "TQ_INIT_TIMEOUT_S", 0.2)
    init = cpu_support._tq_init_with_timeout(lambda conf: time.sleep(2))
    conf = OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 8}}})
    with pytest.raises(TimeoutError, match="each of its 8 storage units reserve 1 Ray CPU"):
        init(conf)
    assert cpu_support._tq_init_with_timeout(lambda conf: "ready")(conf) == "ready"
