"""The registered ``setpo`` advantage estimator on verl's own data structures and call sites."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl_fakes import CharTokenizer

import setpo
from setpo.embedders import HashedNgramEmbedder
from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.estimator import compute_setpo_outcome_advantage
from setpo.integrations.verl.runner import compose_config


def rollouts(group_sizes, seed=0, T=7, d=6):
    """Shuffled rows of unequal groups: token rewards (score on the last valid token), masks, uids, embeddings."""
    gen = torch.Generator().manual_seed(seed)
    uids = np.array([f"prompt_{g}" for g, n in enumerate(group_sizes) for _ in range(n)], dtype=object)
    perm = torch.randperm(len(uids), generator=gen)
    uids = uids[perm.numpy()]
    N = len(uids)
    lengths = torch.randint(1, T + 1, (N,), generator=gen)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.int64)
    scores = torch.randint(0, 2, (N,), generator=gen).float() + 0.1 * torch.rand(N, generator=gen)
    rewards = torch.zeros(N, T)
    rewards[torch.arange(N), lengths - 1] = scores
    emb = torch.randn(N, d, generator=gen, dtype=torch.float64)
    emb[1] = emb[0]  # an exact duplicate pair
    return rewards, mask, uids, emb


def core_reference(base, mask, uids, emb, lam, g="neglog1p"):
    """Per uid group: setpo.cosine_kernel + setpo.loo_credits_reference (Algorithm 1), then (A + lam s) * mask."""
    out = base.clone()
    for u in dict.fromkeys(uids.tolist()):
        rows = [i for i, v in enumerate(uids.tolist()) if v == u]
        if len(rows) < 3:
            continue
        s = setpo.loo_credits_reference(setpo.cosine_kernel(emb[rows]), g)
        for r, v in zip(rows, s.tolist()):
            out[r] = base[r] + (lam * torch.tensor(v, dtype=base.dtype)) * mask[r].to(base.dtype)
    return out


def test_registered_under_setpo():
    assert get_adv_estimator_fn("setpo") is compute_setpo_outcome_advantage


@pytest.mark.parametrize("norm", [True, False])
def test_lambda_zero_is_verl_grpo_exactly(norm):
    rewards, mask, uids, emb = rollouts([6, 3, 5, 6, 4], seed=1)
    want, want_ret = compute_grpo_outcome_advantage(rewards, mask, uids, norm_adv_by_std_in_grpo=norm)
    got, ret = compute_setpo_outcome_advantage(
        rewards, mask, uids, norm_adv_by_std_in_grpo=norm, setpo=SetPOVerlConfig(lam=0.0), embeddings=emb
    )
    assert torch.equal(got, want) and torch.equal(ret, want_ret)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("sizes", [[6, 6, 6], [3, 7, 4, 5], [6, 2, 1, 5]])
def test_matches_core_computation_per_uid_group(sizes):
    rewards, mask, uids, emb = rollouts(sizes, seed=len(sizes))
    base, _ = compute_grpo_outcome_advantage(rewards, mask, uids)
    lam = 0.3
    got, ret = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=SetPOVerlConfig(lam=lam), embeddings=emb)
    want = core_reference(base, mask, uids, emb, lam)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert torch.equal(got, ret)
    assert bool((got[mask == 0] == 0).all()), "advantages must stay zero outside the response mask"
    assert not torch.equal(got, base), "a nonzero lambda with distinct embeddings must change the advantages"


def test_every_input_route_gives_the_same_result():
    tok = CharTokenizer()
    texts = ["aab", "aab", "xyz", "abc", "qq", "zzzzzz", "abcabc", "q", "xyzxyz"]
    uids = np.array(["u1", "u2", "u1", "u2", "u1", "u2", "u3", "u3", "u3"], dtype=object)
    N, T = len(texts), max(len(t) for t in texts)
    responses = torch.zeros(N, T, dtype=torch.int64)
    mask = torch.zeros(N, T, dtype=torch.int64)
    for i, t in enumerate(texts):
        responses[i, : len(t)] = torch.tensor(tok.encode(t))
        mask[i, : len(t)] = 1
    rewards = torch.zeros(N, T)
    rewards[:, 0] = torch.tensor([1, 0, 0, 1, 1, 0, 1, 1, 0], dtype=torch.float32)
    cfg = SetPOVerlConfig(lam=0.2, embedder="hashed")
    embedder = HashedNgramEmbedder()
    emb = embedder(texts)
    by_emb, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=cfg, embeddings=emb)
    batch = TensorDict({"setpo_embeddings": emb, "responses": responses}, batch_size=[N])
    by_batch, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=cfg, batch=batch)
    by_text, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=cfg, texts=texts, embedder=embedder)
    by_ids, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=cfg, responses=responses, tokenizer=tok)
    ids_in_batch = TensorDict({"responses": responses}, batch_size=[N])
    by_batch_ids, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=cfg, batch=ids_in_batch, tokenizer=tok)
    for other in (by_batch, by_text, by_ids, by_batch_ids):
        assert torch.equal(by_emb, other)
    base, _ = compute_grpo_outcome_advantage(rewards, mask, uids)
    assert not torch.equal(by_emb, base)


def _data_proto(rewards, mask, uids):
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": uids}
    )


def test_called_the_way_verl_calls_it_warns_and_falls_back_to_grpo():
    rewards, mask, uids, _ = rollouts([5, 4, 6], seed=3)
    algo = compose_config(["algorithm.adv_estimator=setpo"]).algorithm
    with pytest.warns(RuntimeWarning, match="setpo_sync"):
        got = compute_advantage(_data_proto(rewards, mask, uids), adv_estimator="setpo", config=algo)
    want = compute_advantage(_data_proto(rewards, mask, uids), adv_estimator="grpo", config=algo)
    assert torch.equal(got.batch["advantages"], want.batch["advantages"])
    assert torch.equal(got.batch["returns"], want.batch["returns"])


def test_norm_flag_and_setpo_section_come_from_the_algorithm_config():
    rewards, mask, uids, emb = rollouts([4, 5], seed=4)
    algo = compose_config(
        ["algorithm.adv_estimator=setpo", "algorithm.norm_adv_by_std_in_grpo=false", "+algorithm.setpo.lambda=0.4"]
    ).algorithm
    got, _ = compute_setpo_outcome_advantage(rewards, mask, uids, config=algo, embeddings=emb)
    base, _ = compute_grpo_outcome_advantage(rewards, mask, uids, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(got, core_reference(base, mask, uids, emb, 0.4), rtol=0, atol=1e-6)


def test_small_groups_follow_the_policy():
    rewards, mask, uids, emb = rollouts([5, 2], seed=5)
    with pytest.raises(ValueError, match="at least 3"):
        compute_setpo_outcome_advantage(
            rewards, mask, uids, setpo=SetPOVerlConfig(lam=0.1, small_group="raise"), embeddings=emb
        )
    got, _ = compute_setpo_outcome_advantage(rewards, mask, uids, setpo=SetPOVerlConfig(lam=0.1), embeddings=emb)
    base, _ = compute_grpo_outcome_advantage(rewards, mask, uids)
    pair = np.flatnonzero(uids == "prompt_1")
    assert torch.equal(got[pair], base[pair])
    assert not torch.equal(got[np.flatnonzero(uids == "prompt_0")], base[np.flatnonzero(uids == "prompt_0")])


def test_bad_inputs_raise_clear_errors():
    rewards, mask, uids, emb = rollouts([4, 4], seed=6)
    with pytest.raises(ValueError, match="no setpo settings"):
        compute_setpo_outcome_advantage(rewards, mask, uids, embeddings=emb)
    with pytest.raises(ValueError, match="embeddings must have shape"):
        compute_setpo_outcome_advantage(rewards, mask, uids, setpo={"lambda": 0.1}, embeddings=emb[:-1])
    with pytest.raises(ValueError, match="NaN"):
        bad = emb.clone()
        bad[0, 0] = float("nan")
        compute_setpo_outcome_advantage(rewards, mask, uids, setpo={"lambda": 0.1}, embeddings=bad)
    with pytest.raises(ValueError, match="texts for"):
        compute_setpo_outcome_advantage(
            rewards, mask, uids, setpo={"lambda": 0.1}, texts=["a"], embedder=HashedNgramEmbedder()
        )
