"""The ``setpo_sync`` trainer's ``_compute_advantage`` run through verl's real V1 advantage step.

verl's ``PPOTrainer._compute_advantage`` reads its fields from the TransferQueue; here an in-memory store with
the same get/put calls stands in for it, so verl's own code (DataProto conversion, GRPO, nested write-back)
runs unchanged and the SetPO step runs on what it wrote.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl_fakes import FakeBatch, fill_store, make_batch

import setpo
from setpo.embedders import HashedNgramEmbedder
from setpo.integrations.verl.runner import compose_config
from setpo.integrations.verl.trainer import SetPOTrainerSync


def config(lam=0.5, estimator="grpo", mode="setpo_sync", extra=()):
    return copy.deepcopy(_config(lam, estimator, mode, tuple(extra)))


@functools.cache
def _config(lam, estimator, mode, extra):
    overrides = [
        f"algorithm.adv_estimator={estimator}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=5",
        f"trainer.v1.trainer_mode={mode}",
        *extra,
    ]
    if lam is not None:
        overrides += [f"+setpo.lambda={lam}", "+setpo.embedder=hashed"]
    return compose_config(overrides)


def make_trainer(cls, cfg, tokenizer):
    """A trainer with only what the advantage step uses (no Ray workers): config and tokenizer."""
    trainer = cls.__new__(cls)
    trainer.config = cfg
    trainer.tokenizer = tokenizer
    if cls is SetPOTrainerSync:
        trainer._init_setpo()
    return trainer


def run_step(cls, cfg, store, batch: FakeBatch, tokenizer):
    meta = fill_store(store, batch, tokenizer)
    metrics: dict = {}
    make_trainer(cls, cfg, tokenizer)._compute_advantage(meta, metrics)
    return store.field(batch.keys, "advantages"), store.field(batch.keys, "returns"), metrics


def expected_credits(batch: FakeBatch, rows_per_session=None):
    """Per key: s from setpo.cosine_kernel + setpo.loo_credits_reference on the group's hashed embeddings."""
    emb = HashedNgramEmbedder()(batch.texts)
    active = [not t.get("is_padding", False) for t in batch.tags]
    out = {k: 0.0 for k in batch.keys}
    for uid in dict.fromkeys(batch.uids):
        rows = [i for i, u in enumerate(batch.uids) if u == uid and active[i]]
        if len(rows) < 3:
            continue
        s = setpo.loo_credits_reference(setpo.cosine_kernel(emb[rows].double()))
        for r, v in zip(rows, s.tolist()):
            out[batch.keys[r]] = v
    return out


def test_registered_trainer_mode():
    assert get_trainer_cls("setpo_sync") is SetPOTrainerSync
    assert issubclass(SetPOTrainerSync, PPOTrainerSync)


@pytest.mark.parametrize("sizes", [[5, 5, 5], [5, 3, 7, 2, 4]])
def test_adds_lambda_times_core_credit_to_verl_grpo(store, tokenizer, sizes):
    batch = make_batch(sizes, seed=len(sizes))
    base, base_ret, _ = run_step(PPOTrainerSync, config(lam=None), store, batch, tokenizer)
    lam = 0.5
    got, ret, metrics = run_step(SetPOTrainerSync, config(lam=lam), store, batch, tokenizer)
    credits = expected_credits(batch)
    assert any(abs(v) > 1e-3 for v in credits.values())
    for key, a, b in zip(batch.keys, got, base):
        want = b + torch.tensor(lam * credits[key], dtype=b.dtype)
        torch.testing.assert_close(a, want, rtol=0, atol=1e-6)
    for r, br in zip(ret, base_ret):
        assert torch.equal(r, br), "returns are left as verl wrote them"
    assert metrics["setpo/num_groups"] == len(sizes)
    assert metrics["setpo/num_small_groups"] == sum(n < 3 for n in sizes)
    assert metrics["setpo/lambda"] == lam and metrics["timing_s/setpo"] >= 0
    scored = [credits[k] for k, u in zip(batch.keys, batch.uids) if batch.uids.count(u) >= 3]
    assert metrics["setpo/credit_max"] == pytest.approx(max(scored), abs=1e-9)
    assert metrics["setpo/credit_min"] == pytest.approx(min(scored), abs=1e-9)


def test_lambda_zero_writes_exactly_what_verl_writes(store, tokenizer):
    batch = make_batch([6, 4, 6, 1], seed=7)
    base, base_ret, base_metrics = run_step(PPOTrainerSync, config(lam=None), store, batch, tokenizer)
    got, ret, metrics = run_step(SetPOTrainerSync, config(lam=0.0), store, batch, tokenizer)
    assert all(torch.equal(a, b) for a, b in zip(got, base))
    assert all(torch.equal(a, b) for a, b in zip(ret, base_ret))
    assert metrics == base_metrics


def test_row_order_does_not_matter(store, tokenizer):
    ordered = make_batch([4, 6, 3], seed=9, shuffle=False)
    got, _, _ = run_step(SetPOTrainerSync, config(), store, ordered, tokenizer)
    by_key = dict(zip(ordered.keys, got))
    perm = [5, 0, 12, 3, 8, 1, 10, 7, 2, 11, 4, 9, 6]
    shuffled = FakeBatch(
        texts=[ordered.texts[i] for i in perm],
        rewards=[ordered.rewards[i] for i in perm],
        uids=[ordered.uids[i] for i in perm],
        keys=[ordered.keys[i] for i in perm],
    )
    got2, _, _ = run_step(SetPOTrainerSync, config(), store, shuffled, tokenizer)
    for key, a in zip(shuffled.keys, got2):
        torch.testing.assert_close(a, by_key[key], rtol=0, atol=1e-6)


def test_padding_rows_get_no_credit_and_join_no_group(store, tokenizer):
    batch = make_batch([5, 4], seed=11)
    pad_uid = "pad0123"
    for s in range(3):
        batch.texts.append(batch.texts[0])
        batch.rewards.append(0.0)
        batch.uids.append(pad_uid)
        batch.keys.append(f"{pad_uid}_{s}_0")
        batch.tags.append({"status": "success", "is_padding": True})
    base, _, _ = run_step(PPOTrainerSync, config(lam=None), store, batch, tokenizer)
    got, _, metrics = run_step(SetPOTrainerSync, config(lam=1.0), store, batch, tokenizer)
    for key, a, b in zip(batch.keys, got, base):
        if key.startswith(pad_uid):
            assert torch.equal(a, b)
    assert metrics["setpo/num_groups"] == 2


def test_multi_output_sessions_use_the_final_output(store, tokenizer):
    """A session with several outputs (keys ..._s_0, ..._s_1) is scored by its last output, as verl does."""
    finals = make_batch([4, 3], seed=13, shuffle=False)
    batch = FakeBatch(texts=[], rewards=[], uids=[], keys=[])
    for text, reward, uid, key in zip(finals.texts, finals.rewards, finals.uids, finals.keys):
        stem = key.rsplit("_", 1)[0]
        batch.texts += ["an earlier turn " + text, text]
        batch.rewards += [reward, reward]
        batch.uids += [uid, uid]
        batch.keys += [f"{stem}_0", f"{stem}_1"]
    batch.tags = [{"status": "success"} for _ in batch.keys]
    base, _, _ = run_step(PPOTrainerSync, config(lam=None), store, batch, tokenizer)
    got, _, _ = run_step(SetPOTrainerSync, config(lam=0.7), store, batch, tokenizer)
    credits = expected_credits(finals)
    for key, a, b in zip(batch.keys, got, base):
        final_key = key.rsplit("_", 1)[0] + "_0"
        want = b + torch.tensor(0.7 * credits[final_key], dtype=b.dtype)
        torch.testing.assert_close(a, want, rtol=0, atol=1e-6)


def test_config_errors_are_clear(tokenizer):
    with pytest.raises(ValueError, match="cannot use algorithm.adv_estimator=gae"):
        make_trainer(SetPOTrainerSync, config(estimator="gae"), tokenizer)
    with pytest.raises(ValueError, match="add the credit twice"):
        make_trainer(SetPOTrainerSync, config(estimator="setpo"), tokenizer)
    with pytest.raises(ValueError, match="unknown key"):
        make_trainer(SetPOTrainerSync, config(extra=["+setpo.lamda=0.1"]), tokenizer)
    with pytest.raises(ValueError, match="lambda must be"):
        make_trainer(SetPOTrainerSync, config(lam=-0.1), tokenizer)


def test_embedder_is_built_from_the_config_section(tokenizer):
    trainer = make_trainer(SetPOTrainerSync, config(), tokenizer)
    emb = trainer.setpo_embedder
    assert isinstance(emb, HashedNgramEmbedder)
    assert trainer.setpo_embedder is emb, "built once, then reused"


def test_takes_verl_sync_branches():
    """verl branches on trainer_mode == "sync" (replay buffer, refills, checkpoints); setpo_sync must take them."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

    trainer = SetPOTrainerSync.__new__(SetPOTrainerSync)
    trainer.config = config()
    trainer.trainer_mode = trainer.config.trainer.v1.trainer_mode
    assert trainer.trainer_mode == "setpo_sync"
    buffer = trainer._build_replay_buffer()
    assert trainer.trainer_mode == "sync"
    assert isinstance(buffer, ReplayBuffer) and not isinstance(buffer, ReplayBufferAsync)
