"""The ``setpo_sync`` trainer's ``_compute_advantage`` run through verl's real V1 advantage step.

The trainers are built with their real constructors (``SetPOTrainerSync(cfg)``; no Ray is needed for that)
and load the real ``setpo.tiny`` character tokenizer through verl. verl's ``PPOTrainer._compute_advantage``
reads its fields from the TransferQueue; here an in-memory store with the same get/put calls stands in for
it, so verl's own code (DataProto conversion, rollout correction, GRPO, nested write-back, batch padding)
runs unchanged and the SetPO step runs on what it wrote.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl_fakes import FakeBatch, fill_store, make_batch

import setpo
from setpo.embedders import HashedNgramEmbedder
from setpo.integrations.verl.runner import compose_config
from setpo.integrations.verl.trainer import SetPOTrainerSync


def config(model_dir, lam=0.5, estimator="grpo", mode="setpo_sync", extra=()):
    return copy.deepcopy(_config(model_dir, lam, estimator, mode, tuple(extra)))


@functools.cache
def _config(model_dir, lam, estimator, mode, extra):
    overrides = [
        f"algorithm.adv_estimator={estimator}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=5",
        f"actor_rollout_ref.model.path={model_dir}",
        f"trainer.v1.trainer_mode={mode}",
        *extra,
    ]
    if lam is not None:
        overrides += [f"+setpo.lambda={lam}", "+setpo.embedder=hashed"]
    return compose_config(overrides)


def make_trainer(cls, cfg):
    """The real trainer: verl's constructor (no Ray needed) and verl's own tokenizer loading from the model path."""
    trainer = cls(cfg)
    trainer._init_tokenizer()
    return trainer


def run_step(cls, cfg, store, batch: FakeBatch, tokenizer, rollout_log_probs=False):
    meta = fill_store(store, batch, tokenizer, rollout_log_probs=rollout_log_probs)
    metrics: dict = {}
    make_trainer(cls, cfg)._compute_advantage(meta, metrics)
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


@pytest.fixture
def cfg(tiny_model_dir):
    """``cfg(lam=..., estimator=..., mode=..., extra=[...])``: a composed config pointing at the tiny model."""
    return functools.partial(config, tiny_model_dir)


def test_registered_trainer_mode():
    assert get_trainer_cls("setpo_sync") is SetPOTrainerSync
    assert issubclass(SetPOTrainerSync, PPOTrainerSync)


@pytest.mark.parametrize("sizes", [[5, 5, 5], [5, 3, 7, 2, 4]])
def test_adds_lambda_times_core_credit_to_verl_grpo(store, tokenizer, cfg, sizes):
    batch = make_batch(sizes, seed=len(sizes))
    base, base_ret, _ = run_step(PPOTrainerSync, cfg(lam=None), store, batch, tokenizer)
    lam = 0.5
    got, ret, metrics = run_step(SetPOTrainerSync, cfg(lam=lam), store, batch, tokenizer)
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


def test_lambda_zero_writes_exactly_what_verl_writes(store, tokenizer, cfg):
    batch = make_batch([6, 4, 6, 1], seed=7)
    base, base_ret, base_metrics = run_step(PPOTrainerSync, cfg(lam=None), store, batch, tokenizer)
    got, ret, metrics = run_step(SetPOTrainerSync, cfg(lam=0.0), store, batch, tokenizer)
    assert all(torch.equal(a, b) for a, b in zip(got, base))
    assert all(torch.equal(a, b) for a, b in zip(ret, base_ret))
    assert metrics == base_metrics


def test_row_order_does_not_matter(store, tokenizer, cfg):
    ordered = make_batch([4, 6, 3], seed=9, shuffle=False)
    got, _, _ = run_step(SetPOTrainerSync, cfg(), store, ordered, tokenizer)
    by_key = dict(zip(ordered.keys, got))
    perm = [5, 0, 12, 3, 8, 1, 10, 7, 2, 11, 4, 9, 6]
    shuffled = FakeBatch(
        texts=[ordered.texts[i] for i in perm],
        rewards=[ordered.rewards[i] for i in perm],
        uids=[ordered.uids[i] for i in perm],
        keys=[ordered.keys[i] for i in perm],
    )
    got2, _, _ = run_step(SetPOTrainerSync, cfg(), store, shuffled, tokenizer)
    for key, a in zip(shuffled.keys, got2):
        torch.testing.assert_close(a, by_key[key], rtol=0, atol=1e-6)


def test_padding_rows_from_verl_upsampling_get_no_credit(store, tokenizer, cfg):
    """verl's own ``upsample_batch_to_divisible_size`` pads 13 rows to 16 (one fresh uid, eos responses, mask 0)."""
    batch = make_batch([5, 4, 4], seed=11)
    meta = upsample_batch_to_divisible_size(fill_store(store, batch, tokenizer, "base"), 8, tokenizer.eos_token_id)
    pad_keys = meta.keys[len(batch.keys) :]
    assert len(pad_keys) == 3 and all(t.get("is_padding") for t in meta.tags[len(batch.keys) :])
    make_trainer(PPOTrainerSync, cfg(lam=None))._compute_advantage(meta, {})
    base = dict(zip(meta.keys, store.field(meta.keys, "advantages", "base")))
    meta = upsample_batch_to_divisible_size(fill_store(store, batch, tokenizer, "setpo"), 8, tokenizer.eos_token_id)
    metrics: dict = {}
    make_trainer(SetPOTrainerSync, cfg(lam=1.0))._compute_advantage(meta, metrics)
    got = dict(zip(meta.keys, store.field(meta.keys, "advantages", "setpo")))
    credits = expected_credits(batch)
    for key in batch.keys:
        torch.testing.assert_close(got[key], base[key] + torch.tensor(credits[key]), rtol=0, atol=1e-6)
    for key in meta.keys[len(batch.keys) :]:
        assert torch.equal(got[key], torch.zeros(1)), "a padding row keeps verl's zero advantage"
    assert metrics["setpo/num_groups"] == 3, "the three padding rows share a uid but form no group"


def test_rollout_correction_branch_uses_the_rewritten_mask(store, tokenizer, cfg):
    """Rows with ``rollout_log_probs``: verl's rejection sampling rewrites ``response_mask`` in the advantage step.

    The credit must be broadcast over the rewritten mask (rejected tokens get no advantage), every rollout
    keeps its place in its group's kernel (as in verl's GRPO statistics), and the IS weights and the mask
    verl wrote are left as they are.
    """
    rc = "algorithm.rollout_correction"
    extra = [f"{rc}.rollout_is=token", f"{rc}.rollout_rs=token_k1", f"{rc}.rollout_rs_threshold=0.5_2.0"]
    batch = make_batch([5, 4, 6], seed=17)
    lam = 0.8
    meta = fill_store(store, batch, tokenizer, "base", rollout_log_probs=True)
    make_trainer(PPOTrainerSync, cfg(lam=None, extra=extra))._compute_advantage(meta, {})
    meta = fill_store(store, batch, tokenizer, "setpo", rollout_log_probs=True)
    metrics: dict = {}
    make_trainer(SetPOTrainerSync, cfg(lam=lam, extra=extra))._compute_advantage(meta, metrics)
    credits = expected_credits(batch)
    mask = store.field(batch.keys, "response_mask", "setpo")
    assert [m.tolist() for m in mask] == [m.tolist() for m in store.field(batch.keys, "response_mask", "base")]
    rejected = [i for i, m in enumerate(mask) if m[0] == 0]
    assert rejected == list(range(0, len(batch.keys), 3)), "the first token of every third row is rejected"
    got = store.field(batch.keys, "advantages", "setpo")
    base = store.field(batch.keys, "advantages", "base")
    for key, a, b, m in zip(batch.keys, got, base, mask):
        torch.testing.assert_close(a, b + lam * credits[key] * m.to(b.dtype), rtol=0, atol=1e-6)
        assert bool((a[m == 0] == 0).all())
    for w, bw in zip(
        store.field(batch.keys, "rollout_is_weights", "setpo"), store.field(batch.keys, "rollout_is_weights", "base")
    ):
        assert torch.equal(w, bw)
    assert any(k.startswith("rollout_corr/") for k in metrics)


def test_multi_output_sessions_use_the_final_output(store, tokenizer, cfg):
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
    base, _, _ = run_step(PPOTrainerSync, cfg(lam=None), store, batch, tokenizer)
    got, _, _ = run_step(SetPOTrainerSync, cfg(lam=0.7), store, batch, tokenizer)
    credits = expected_credits(finals)
    for key, a, b in zip(batch.keys, got, base):
        final_key = key.rsplit("_", 1)[0] + "_0"
        want = b + torch.tensor(0.7 * credits[final_key], dtype=b.dtype)
        torch.testing.assert_close(a, want, rtol=0, atol=1e-6)


def test_config_errors_are_clear(cfg):
    with pytest.raises(ValueError, match="cannot use algorithm.adv_estimator=gae"):
        SetPOTrainerSync(cfg(estimator="gae"))
    with pytest.raises(ValueError, match="no such estimator"):
        SetPOTrainerSync(cfg(estimator="setpo"))
    with pytest.raises(ValueError, match="unknown key"):
        SetPOTrainerSync(cfg(extra=["+setpo.lamda=0.1"]))
    with pytest.raises(ValueError, match="lambda must be"):
        SetPOTrainerSync(cfg(lam=-0.1))


def test_embedder_is_built_by_the_constructor(cfg, monkeypatch):
    """Built once, at construction (before verl loads any model), and reused; not built when lambda is 0."""
    import setpo.integrations.verl.trainer as trainer_module

    built = []
    real = trainer_module.embedder_from_config
    monkeypatch.setattr(trainer_module, "embedder_from_config", lambda c: built.append(c) or real(c))
    trainer = SetPOTrainerSync(cfg())
    assert len(built) == 1 and isinstance(trainer.setpo_embedder, HashedNgramEmbedder)
    assert trainer.setpo_embedder is trainer.setpo_embedder and len(built) == 1
    SetPOTrainerSync(cfg(lam=0.0))
    assert len(built) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a process that sees no GPU")
def test_cuda_embedder_without_a_visible_gpu_fails_at_construction(cfg):
    with pytest.raises(ValueError, match="RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"):
        SetPOTrainerSync(cfg(extra=["+setpo.embed_device=cuda"]))


def test_takes_verl_sync_branches(cfg):
    """verl branches on trainer_mode == "sync" (replay buffer, refills, checkpoints); setpo_sync must take them."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

    trainer = SetPOTrainerSync(cfg())
    assert trainer.config.trainer.v1.trainer_mode == "setpo_sync"
    assert trainer.trainer_mode == "sync"
    assert isinstance(trainer.replay_buffer, ReplayBuffer) and not isinstance(trainer.replay_buffer, ReplayBufferAsync)


def test_placebo_moves_every_credit_to_another_group(store, tokenizer, cfg):
    batch = make_batch([5, 5, 5, 5], seed=11)
    base, _, _ = run_step(PPOTrainerSync, cfg(lam=None), store, batch, tokenizer)
    lam = 0.5
    got, _, metrics = run_step(SetPOTrainerSync, cfg(lam=lam, extra=["+setpo.placebo=true"]), store, batch, tokenizer)
    credits = expected_credits(batch)
    applied = {k: float((a - b)[0]) / lam for k, a, b in zip(batch.keys, got, base)}
    true = sorted(credits.values())
    assert sorted(applied.values()) == pytest.approx(true, abs=1e-6)  # same magnitudes, permuted
    assert metrics["setpo/placebo"] == 1.0
    for key, uid in zip(batch.keys, batch.uids):
        others = [credits[k] for k, u in zip(batch.keys, batch.uids) if u != uid]
        assert min(abs(applied[key] - v) for v in others) < 1e-6  # it came from another group


def test_target_ratio_sets_lambda_from_the_batch(store, tokenizer, cfg):
    batch = make_batch([5, 4, 6], seed=3)
    base, _, _ = run_step(PPOTrainerSync, cfg(lam=None), store, batch, tokenizer)
    got, _, metrics = run_step(
        SetPOTrainerSync, cfg(lam=0.0, extra=["+setpo.target_ratio=0.2"]), store, batch, tokenizer
    )
    credits = expected_credits(batch)
    lam = metrics["setpo/lambda"]
    s = torch.tensor([credits[k] for k in batch.keys], dtype=torch.float64)
    a_bar = torch.stack([b[0] for b in base]).double()
    assert lam > 0
    assert (lam * s.abs().mean() / a_bar.abs().mean()).item() == pytest.approx(0.2, rel=1e-5)
    for key, a, b in zip(batch.keys, got, base):
        torch.testing.assert_close(a, b + torch.tensor(lam * credits[key], dtype=b.dtype), rtol=0, atol=1e-6)
