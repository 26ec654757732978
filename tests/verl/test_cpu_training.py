"""A real verl 0.9.1 training run on CPU: ``python -m setpo.integrations.verl`` with ``tests/verl/verl_cpu``.

Each run trains a ``setpo.tiny`` Llama model for 2 GRPO steps (2 prompts x 4 samples) with verl's own
trainer, FSDP2 engine, agent loop, TransferQueue and reward loop; generation runs in the ``hf`` rollout with the
trainer's weights synced into it after every update. The run dumps every trained batch (the rows as the actor
read them from the TransferQueue) and the rollout's weight fingerprints; the tests recompute GRPO's advantages
and the SetPO credit from the dumped responses independently of the adapter. Besides plain GRPO the runs cover
the paper's other base methods under ``setpo_sync``: DAPO's group filter (``algorithm.filter_groups``, with a
reward that is constant on half of the prompts), GSPO's loss (``policy_loss.loss_mode=gspo``), and a batch
layout that makes verl add padding rows (3 prompts x 4 samples in PPO mini-batches of 2 x 4 rows).
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
import verl_cpu as cpu_support
from verl_cpu import (
    CONSTANT_REWARD,
    CPU_ENV,
    DUMP_ENV,
    constant_on_even_targets_reward,
    cpu_overrides,
    digit_share_reward,
)

import setpo
from setpo.embedders import HashedNgramEmbedder

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent  # holds verl_cpu, which every process of a run imports
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


#: Extra overrides of the runs beside plain GRPO (they replace the same keys of the base run).
DAPO = (
    "algorithm.filter_groups.enable=true",
    "algorithm.filter_groups.metric=reward",
    "reward.custom_reward_function.name=constant_on_even_targets_reward",
)
GSPO = (
    "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
    "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
)
#: 12 rows; verl pads the batch to a multiple of ppo_mini_batch_size x n = 8 rows (verl/trainer/ppo/v1/trainer_base.py
#: _get_required_batch_multiple), i.e. 4 padding rows.
PADDING = ("data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=2")


def run_verl(
    out: Path, model_dir: str, train_file: str, n_workers: int, lam: float, dynamic_bsz: bool, extra: tuple = ()
) -> Path:
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
        "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p),
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
        "reward.custom_reward_function.path=pkg://verl_cpu",
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
    replaced = {e.split("=", 1)[0] for e in extra}
    overrides = [o for o in overrides if o.split("=", 1)[0] not in replaced] + list(extra)
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
    """``run(n_workers, lam, dynamic_bsz, extra)``: each configuration runs once per module."""
    done: dict[tuple, Path] = {}

    def get(n_workers: int, lam: float, dynamic_bsz: bool = False, extra: tuple = ()) -> Path:
        key = (n_workers, lam, dynamic_bsz, extra)
        if key not in done:
            out = tmp_path_factory.mktemp(f"verl_dp{n_workers}_lam{lam}_dyn{int(dynamic_bsz)}_x{len(done)}")
            done[key] = run_verl(out, tiny_model_dir, train_file, n_workers, lam, dynamic_bsz, extra)
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


def is_padding(row: dict) -> bool:
    """A row verl added to make the batch divisible (verl/trainer/ppo/padding_utils.py: uid "pad<hex>", keys
    "<uid>_<i>_0"); real uids are uuid4 strings, which cannot start with "p"."""
    return row["uid"].startswith("pad") and row["key"].startswith(row["uid"] + "_")


def check_advantages(out: Path, tokenizer, lam: float, prompts: int = 2, padding: int = 0) -> None:
    """Every trained batch: per-token advantages == (GRPO + lam * s) on the response mask, recomputed here
    (`prompts` groups of N_SAMPLES real rows); verl's `padding` rows have zero advantages."""
    for all_rows in load_batches(out):
        pads = [r for r in all_rows if is_padding(r)]
        assert len(pads) == padding
        for row in pads:
            assert row["reward"] == 0 and not any(row["advantages"]), "a padding row has a reward or an advantage"
        rows = [r for r in all_rows if not is_padding(r)]
        assert len(rows) == prompts * N_SAMPLES
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
def test_dapo_group_filter_under_setpo_sync(run, tokenizer):
    """DAPO drops the groups of the even-target prompts (constant reward) and refills the batch; the trained
    rows are all from groups with reward signal and carry GRPO + lambda s of those groups."""
    out = run(1, LAMBDA, extra=DAPO)
    check_advantages(out, tokenizer, LAMBDA)  # rewards == the digit share: no constant-reward row was trained
    for rows in load_batches(out):
        groups = {}
        for r in rows:
            groups.setdefault(r["uid"], []).append(r["reward"])
        assert all(np.ptp(g) > 0 for g in groups.values())
    metrics = load_metrics(out)
    evicted = sum(v for step in metrics for k, v in step.items() if k.endswith("filter_groups/evicted_samples"))
    assert evicted >= 1, "the filter dropped no group: the test did not exercise it"  # counts groups (uids)
    assert all(step["setpo/num_groups"] == 2 for step in metrics)
    assert constant_on_even_targets_reward("countdown", "1a", {"target": 6}) == CONSTANT_REWARD
    assert constant_on_even_targets_reward("countdown", "1ab", {"target": 7}) == pytest.approx(1 / 3)  # digit share
    check_weights_changed(out, 1)


@pytest.mark.slow
def test_gspo_loss_under_setpo_sync(run, tokenizer):
    out = run(1, LAMBDA, extra=GSPO)
    check_advantages(out, tokenizer, LAMBDA)
    with pytest.raises(AssertionError):
        check_advantages(out, tokenizer, 0.0)
    assert "loss_mode: gspo" in (out / "run.log").read_text() or "'loss_mode': 'gspo'" in (out / "run.log").read_text()
    for step in load_metrics(out):
        assert step["setpo/lambda"] == pytest.approx(LAMBDA)
    check_weights_changed(out, 1)


@pytest.mark.slow
def test_padding_rows_join_no_group(run, tokenizer):
    out = run(1, LAMBDA, extra=PADDING)
    check_advantages(out, tokenizer, LAMBDA, prompts=3, padding=4)
    with pytest.raises(AssertionError):
        check_advantages(out, tokenizer, 0.0, prompts=3, padding=4)
    for step in load_metrics(out):
        assert step["setpo/num_groups"] == 3  # the padding rows' shared uid is not a group
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


@pytest.mark.slow
def test_one_checkpoint_kept_resumed_and_merged_for_setpo_eval(tmp_path_factory, tiny_model_dir, train_file, tokenizer):
    """The launch scripts' checkpoint settings on a real run: a save every step with ``max_actor_ckpt_to_keep=1``
    leaves only the last actor checkpoint; a longer rerun resumes from it (``resume_mode=auto``) and trains only
    the missing step; the merge step turns the last checkpoint into a model that ``setpo.eval`` loads and samples."""
    from transformers import AutoModelForCausalLM

    from setpo.eval.checkpoint import LATEST, main, merged_dir, resolve_model
    from setpo.eval.generate import SamplingConfig, make_generator

    keep = ("trainer.save_freq=1", "trainer.max_actor_ckpt_to_keep=1", "trainer.resume_mode=auto")
    first = run_verl(tmp_path_factory.mktemp("ckpt_first"), tiny_model_dir, train_file, 1, LAMBDA, False, keep)
    ckpt = first / "checkpoints"
    assert (ckpt / LATEST).read_text().strip() == str(STEPS)
    assert (ckpt / f"global_step_{STEPS}" / "actor").is_dir()
    assert not (ckpt / f"global_step_{STEPS - 1}" / "actor").exists(), "an older actor checkpoint was kept"

    more = (*keep, f"trainer.total_training_steps={STEPS + 1}", f"trainer.default_local_dir={ckpt}")
    second = run_verl(tmp_path_factory.mktemp("ckpt_resume"), tiny_model_dir, train_file, 1, LAMBDA, False, more)
    steps = [json.loads(line)["step"] for line in (second / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert steps == [STEPS + 1], f"the resumed run trained steps {steps}, not only step {STEPS + 1}"
    assert (ckpt / LATEST).read_text().strip() == str(STEPS + 1)
    # verl removes only checkpoints it saved in the same process: the one resumed from stays (docs/scale.md)
    assert (ckpt / f"global_step_{STEPS}" / "actor").is_dir()

    assert main([str(first), "--merge"]) == 0
    actor = ckpt / f"global_step_{STEPS + 1}" / "actor"
    assert resolve_model(str(first)) == str(merged_dir(actor))
    trained = AutoModelForCausalLM.from_pretrained(merged_dir(actor))
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    changed = [k for k, v in trained.state_dict().items() if not torch.equal(v, initial.state_dict()[k].to(v.dtype))]
    assert changed, "the merged model has the initial weights"
    generate = make_generator(str(first), SamplingConfig(n=2, max_new_tokens=4, seed=0), backend="hf", device="cpu")
    samples = generate(["[1, 2, 3] -> 6"])
    assert len(samples) == 1 and len(samples[0]) == 2 and all(isinstance(t, str) for t in samples[0])
