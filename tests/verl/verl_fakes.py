"""Fakes for the verl adapter tests: an in-memory stand-in for the TransferQueue KV API (the Ray-backed store
verl's V1 trainer reads and writes) and batches of fake rollouts laid out as verl's agent loop stores them.
The tokenizer is the real one (``setpo.tiny``'s character tokenizer, loaded by verl, see conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta


class InMemoryTQ:
    """The two TransferQueue calls of the V1 trainer's advantage and padding steps (kv_batch_get, kv_batch_put).

    Per-token fields come back as jagged nested tensors and ``uid`` as a NonTensorStack, as verl's
    ``_compute_advantage`` expects; a put with new keys adds rows (verl's batch padding does that).
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict] = {}
        self.tags: dict[tuple[str, str], dict] = {}

    def add(self, partition: str, key: str, row: dict, tag: dict | None = None) -> None:
        self.rows[(partition, key)] = dict(row)
        self.tags[(partition, key)] = dict(tag or {"status": "success"})

    def kv_batch_get(self, keys, partition_id, select_fields=None) -> TensorDict:
        rows = [self.rows[(partition_id, k)] for k in keys]
        names = [f for f in (select_fields or rows[0].keys()) if f in rows[0]]
        out = {}
        for name in names:
            values = [r[name] for r in rows]
            if isinstance(values[0], torch.Tensor):
                out[name] = torch.nested.as_nested_tensor([v.clone() for v in values], layout=torch.jagged)
            else:
                out[name] = NonTensorStack(*values)
        return TensorDict(out, batch_size=[len(keys)])

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None) -> KVBatchMeta:
        for i, k in enumerate(keys):
            self.rows.setdefault((partition_id, k), {})
            if tags is not None:
                self.tags[(partition_id, k)] = dict(tags[i])
        if fields is not None:
            for name in fields.keys():
                value = fields[name]
                parts = value.unbind() if isinstance(value, torch.Tensor) else list(value)
                if len(parts) != len(keys):
                    raise AssertionError(f"field {name} has {len(parts)} rows for {len(keys)} keys")
                for k, v in zip(keys, parts):
                    self.rows[(partition_id, k)][name] = v.clone() if isinstance(v, torch.Tensor) else v
        return KVBatchMeta(
            keys=list(keys), tags=[self.tags[(partition_id, k)] for k in keys], partition_id=partition_id
        )

    def field(self, keys, name: str, partition_id: str = "train") -> list:
        return [self.rows[(partition_id, k)][name] for k in keys]


@dataclass
class FakeBatch:
    """Rollouts of several prompts: texts, rewards, uids, verl keys, tags."""

    texts: list[str]
    rewards: list[float]
    uids: list[str]
    keys: list[str]
    tags: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.tags:
            self.tags = [{"status": "success"} for _ in self.keys]


def fill_store(
    store: InMemoryTQ, batch: FakeBatch, tokenizer, partition: str = "train", rollout_log_probs: bool = False
) -> KVBatchMeta:
    """Write a batch the way the agent loop does: nested per-token fields, reward on the last response token.

    With `rollout_log_probs`, rows also carry the rollout engine's log-probs: equal to ``old_log_probs`` except
    in every third row, where the first token's differs by 1.5 nats (a ratio of e^1.5 ~ 4.5).
    """
    gen = torch.Generator().manual_seed(len(batch.keys))
    for i, (text, reward, uid, key, tag) in enumerate(
        zip(batch.texts, batch.rewards, batch.uids, batch.keys, batch.tags)
    ):
        ids = torch.tensor(tokenizer.encode(text, add_special_tokens=False), dtype=torch.int64)
        n = ids.numel()
        assert n > 0, "verl responses hold at least one token"
        scores = torch.zeros(n, dtype=torch.float32)
        scores[-1] = reward
        mask = torch.zeros(n, dtype=torch.int64) if tag.get("is_padding") else torch.ones(n, dtype=torch.int64)
        old = -torch.rand(n, generator=gen)
        row = {"uid": uid, "responses": ids, "response_mask": mask, "rm_scores": scores, "old_log_probs": old}
        if rollout_log_probs:
            rollout = old.clone()
            if i % 3 == 0:
                rollout[0] -= 1.5
            row["rollout_log_probs"] = rollout
        store.add(partition, key, row, {"seq_len": n, **tag})
    return KVBatchMeta(keys=list(batch.keys), tags=[dict(t) for t in batch.tags], partition_id=partition)


def make_batch(
    group_sizes: list[int], seed: int = 0, shuffle: bool = True, vocab: str = "abcde", prefix: str = "p"
) -> FakeBatch:
    """Groups of the given sizes with random short texts (some duplicated) and 0/1 rewards, rows shuffled."""
    rng = np.random.default_rng(seed)
    texts, rewards, uids, keys = [], [], [], []
    for g, size in enumerate(group_sizes):
        uid = f"{prefix}_{g}-uid"  # underscores inside a uid must survive the key parsing
        pool = ["".join(rng.choice(list(vocab), size=int(rng.integers(3, 12)))) for _ in range(max(2, size - 1))]
        for s in range(size):
            texts.append(pool[int(rng.integers(len(pool)))])
            rewards.append(float(rng.integers(0, 2)))
            uids.append(uid)
            keys.append(f"{uid}_{s}_0")
    order = rng.permutation(len(texts)) if shuffle else np.arange(len(texts))
    return FakeBatch(
        texts=[texts[i] for i in order],
        rewards=[rewards[i] for i in order],
        uids=[uids[i] for i in order],
        keys=[keys[i] for i in order],
    )
