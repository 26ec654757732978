"""Fakes for the verl adapter tests: a character-level tokenizer, an in-memory stand-in for the TransferQueue
KV API (the Ray-backed store verl's V1 trainer reads and writes) and batches of fake rollouts laid out as
verl's agent loop stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta


class CharTokenizer:
    """One token per character (id = code point + 1); id 0 is padding. Enough for decode-and-embed tests."""

    pad_token_id = 0
    eos_token_id = 0

    def encode(self, text: str) -> list[int]:
        return [ord(c) + 1 for c in text]

    def batch_decode(self, ids, skip_special_tokens: bool = True) -> list[str]:
        return ["".join(chr(i - 1) for i in row if not (skip_special_tokens and i == 0)) for row in ids]


class InMemoryTQ:
    """The two TransferQueue calls of the V1 trainer's advantage step (kv_batch_get, kv_batch_put), on a dict.

    Per-token fields come back as jagged nested tensors and ``uid`` as a NonTensorStack, as verl's
    ``_compute_advantage`` expects.
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


def fill_store(store: InMemoryTQ, batch: FakeBatch, tokenizer: CharTokenizer, partition: str = "train") -> KVBatchMeta:
    """Write a batch the way the agent loop does: nested per-token fields, reward on the last response token."""
    for text, reward, uid, key, tag in zip(batch.texts, batch.rewards, batch.uids, batch.keys, batch.tags):
        ids = torch.tensor(tokenizer.encode(text) or [1], dtype=torch.int64)  # verl responses hold >= 1 token
        n = ids.numel()
        scores = torch.zeros(n, dtype=torch.float32)
        scores[-1] = reward
        mask = torch.zeros(n, dtype=torch.int64) if tag.get("is_padding") else torch.ones(n, dtype=torch.int64)
        row = {
            "uid": uid,
            "responses": ids,
            "response_mask": mask,
            "rm_scores": scores,
            "old_log_probs": -torch.rand(n),
        }
        store.add(partition, key, row, tag)
    return KVBatchMeta(keys=list(batch.keys), tags=list(batch.tags), partition_id=partition)


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
