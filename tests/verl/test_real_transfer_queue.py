"""The trainer hook against the real TransferQueue service (a local Ray with 2 CPUs, no GPU): the same check as
the in-memory tests, so it also shows that the in-memory stand-in returns what the real store returns."""

from __future__ import annotations

import os

import pytest
import torch
from test_trainer_hook import config, expected_credits, make_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl_fakes import make_batch

from setpo.integrations.verl.trainer import SetPOTrainerSync

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_tq():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    storage = {"total_storage_size": 1000, "num_data_storage_units": 1}
    tq.init(OmegaConf.create({"backend": {"storage_backend": "SimpleStorage", "SimpleStorage": storage}}))
    try:
        yield tq
    finally:
        tq.close()
        ray.shutdown()


def put_batch(tq, batch, tokenizer, partition):
    rows = []
    for text, reward, uid in zip(batch.texts, batch.rewards, batch.uids):
        ids = torch.tensor(tokenizer.encode(text, add_special_tokens=False), dtype=torch.int64)
        scores = torch.zeros(ids.numel())
        scores[-1] = reward
        rows.append({"uid": uid, "responses": ids, "response_mask": torch.ones_like(ids), "rm_scores": scores})
    tags = [{"status": "success"} for _ in batch.keys]
    return tq.kv_batch_put(keys=batch.keys, partition_id=partition, fields=list_of_dict_to_tensordict(rows), tags=tags)


def advantages(tq, keys, partition):
    return tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=["advantages"])["advantages"].unbind()


def test_hook_on_the_real_transfer_queue(real_tq, tokenizer, tiny_model_dir):
    batch = make_batch([5, 3, 6, 2], seed=21)
    lam = 0.4
    meta = put_batch(real_tq, batch, tokenizer, "base")
    make_trainer(PPOTrainerSync, config(tiny_model_dir, lam=None))._compute_advantage(meta, {})
    base = advantages(real_tq, batch.keys, "base")
    meta = put_batch(real_tq, batch, tokenizer, "setpo")
    metrics: dict = {}
    make_trainer(SetPOTrainerSync, config(tiny_model_dir, lam=lam))._compute_advantage(meta, metrics)
    got = advantages(real_tq, batch.keys, "setpo")
    credits = expected_credits(batch)
    for key, a, b in zip(batch.keys, got, base):
        torch.testing.assert_close(a, b + torch.tensor(lam * credits[key], dtype=b.dtype), rtol=0, atol=1e-6)
    assert metrics["setpo/num_groups"] == 4 and metrics["setpo/num_small_groups"] == 1
