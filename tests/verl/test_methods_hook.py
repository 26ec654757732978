"""``+setpo.method=NAME`` in the ``setpo_sync`` trainer, run through verl's real V1 advantage step (as in
test_trainer_hook.py): the advantages written equal the method's brute-force reference (tests/method_references.py)
on the batch's scores and texts, normalised as verl's GRPO does (reward methods) or replacing it (pass@k)."""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import pytest
import torch
from verl_fakes import fill_store, make_batch

from setpo.embedders import HashedNgramEmbedder
from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.runner import compose_config
from setpo.integrations.verl.trainer import SetPOTrainerSync
from setpo.tasks.list_selection import extract_answer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/method_references.py
from method_references import (  # noqa: E402
    answer_labels_reference,
    darling_reference,
    diver_reference,
    dqo_reference,
    dra_grpo_reference,
    passk_reference,
)


@functools.cache
def _config(model_dir, extra):
    overrides = [
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=5",
        f"actor_rollout_ref.model.path={model_dir}",
        "trainer.v1.trainer_mode=setpo_sync",
        "+setpo.embedder=hashed",
        *extra,
    ]
    return compose_config(overrides)


def run_method(store, tokenizer, model_dir, method, kwargs=(), sizes=(5, 5, 5), seed=3):
    extra = (f"+setpo.method={method}", "+setpo.answer_extractor=first_line") + tuple(
        f"+setpo.method_kwargs.{k}={v}" for k, v in kwargs
    )
    cfg = copy.deepcopy(_config(model_dir, extra))
    batch = make_batch(list(sizes), seed=seed)

    meta = fill_store(store, batch, tokenizer)
    trainer = SetPOTrainerSync(cfg)
    trainer._init_tokenizer()
    metrics: dict = {}
    trainer._compute_advantage(meta, metrics)
    got = {k: a for k, a in zip(batch.keys, store.field(batch.keys, "advantages"))}
    scores = store.field(batch.keys, "rm_scores")
    assert [float(s.sum()) for s in scores] == batch.rewards, "rm_scores are written back unchanged"
    return batch, got, metrics, trainer


def grouped(batch):
    """Per uid (first appearance): the row indices, texts, (1, G) rewards and (1, G, d) hashed embeddings."""
    emb = HashedNgramEmbedder()(batch.texts)
    for uid in dict.fromkeys(batch.uids):
        rows = [i for i, u in enumerate(batch.uids) if u == uid]
        R = torch.tensor([[batch.rewards[i] for i in rows]], dtype=torch.float64)
        yield rows, [batch.texts[i] for i in rows], R, torch.as_tensor(emb[rows]).double().unsqueeze(0)


def grpo(values, std: bool = True) -> list[float]:
    """verl's GRPO outcome advantage of one group: (r - mean) / (std + 1e-6), std unbiased (or centring only)."""
    r = torch.tensor(values, dtype=torch.float64)
    a = r - r.mean()
    return (a / (r.std() + 1e-6) if std else a).tolist()


def check(batch, got, want: dict[int, float]) -> None:
    for i, key in enumerate(batch.keys):
        torch.testing.assert_close(got[key].double(), torch.full_like(got[key].double(), want[i]), rtol=0, atol=1e-5)


REWARD_METHODS = {
    "dra_grpo": ((("clamp", "true"),), lambda R, t, E: dra_grpo_reference(R, E, clamp=True)),
    "dqo": ((("alpha", 0.5),), lambda R, t, E: dqo_reference(R, E, alpha=0.5)),
    "diver": (
        (("lam", 0.5), ("correct_only", "false")),
        lambda R, t, E: diver_reference(R, t, None, len(t), lam=0.5, correct_only=False),
    ),
}


@pytest.mark.parametrize("method", sorted(REWARD_METHODS))
def test_reward_methods_enter_before_verls_grpo(store, tokenizer, tiny_model_dir, method):
    kwargs, reference = REWARD_METHODS[method]
    batch, got, metrics, _ = run_method(store, tokenizer, tiny_model_dir, method, kwargs)
    want, deltas = {}, []
    for rows, texts, R, E in grouped(batch):
        new = reference(R, texts, E)[0]
        deltas += [abs(a - b) for a, b in zip(new, R[0].tolist())]
        want.update(zip(rows, grpo(new)))
    check(batch, got, want)
    assert metrics[f"method/{method}/reward_delta"] == pytest.approx(sum(deltas) / len(deltas), abs=1e-6)
    assert max(deltas) > 1e-3, "the method must change the scores"


def test_darling_centres_without_the_std(store, tokenizer, tiny_model_dir):
    batch, got, _, trainer = run_method(store, tokenizer, tiny_model_dir, "darling", (("partition", "answer"),))
    want = {}
    for rows, texts, R, _ in grouped(batch):
        labels = answer_labels_reference([extract_answer(t) for t in texts], len(texts))
        new = darling_reference(R, labels)[0]
        want.update(zip(rows, grpo(new, std=False)))
    check(batch, got, want)
    assert trainer.config.algorithm.norm_adv_by_std_in_grpo is True, "verl's setting is restored"


def test_passk_replaces_verls_advantage_on_uneven_groups(store, tokenizer, tiny_model_dir):
    batch, got, metrics, _ = run_method(
        store, tokenizer, tiny_model_dir, "passk", (("k", 2),), sizes=(5, 4, 5, 3), seed=5
    )
    want = {}
    for rows, _, R, _ in grouped(batch):
        want.update(zip(rows, passk_reference(R > 0, k=2)[0]))
    assert any(abs(v) > 1e-3 for v in want.values())
    check(batch, got, want)
    assert "method/passk/advantage_delta" in metrics


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"method": "nope"}, "unknown setpo.method .nope."),
        ({"method": "gapo"}, "valid answers"),
        ({"method": "entropy_bonus"}, "actor_rollout_ref.actor.entropy_coeff"),
        ({"method": "passk", "method_kwargs": {"kk": 1}}, r"unknown method 'passk' parameter\(s\)"),
        ({"method": "dqo", "placebo": True}, "changes the scores before it"),
        ({"method": "passk", "lambda": 0.5}, "setpo.lambda=0.5 is a parameter of setpo.method=setpo"),
        ({"method": "setpo", "lambda": 0.1, "method_kwargs": {"lam": 1}}, "give the same parameter"),
        ({"method": "darling", "answer_extractor": "x"}, "unknown setpo.answer_extractor"),
    ],
)
def test_config_refuses_bad_method_settings(section, message):
    with pytest.raises(ValueError, match=message):
        SetPOVerlConfig.from_mapping(section)


def test_method_overrides_round_trip():
    cfg = SetPOVerlConfig.from_mapping({"method": "passk", "method_kwargs": {"k": 2}})
    assert "+setpo.method=passk" in cfg.as_overrides() and "+setpo.method_kwargs.k=2" in cfg.as_overrides()
    assert cfg.enabled and cfg.method_params == {"k": 2, "eps": 0.0}
    assert not any("method" in o for o in SetPOVerlConfig().as_overrides())
