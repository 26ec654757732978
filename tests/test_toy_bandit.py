"""Figure 1 toy bandit: configuration checks, advantages vs the literal Algorithm 1, exact policy-gradient step."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from reproduce.tasks.toy_bandit import (
    BanditConfig,
    bandit_advantages,
    correct_entropy,
    correct_mass,
    initial_logits,
    mode_embeddings,
    modes_kept,
    sample_embeddings,
    train_bandit,
)
from setpo import cosine_kernel, group_advantages, loo_credits_reference

SMALL = BanditConfig(steps=5, groups_per_step=3, group_size=4)


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(n_correct=12), "n_correct"),
        (dict(n_correct=0), "n_correct"),
        (dict(group_size=2), "group_size"),
        (dict(steps=0), "steps"),
        (dict(lam=-1.0), "lam"),
        (dict(lam=math.inf), "lam"),
        (dict(lr=0.0), "lr"),
        (dict(init_dominant=0.9, init_other_correct=0.1), "initial probabilities"),
    ],
)
def test_config_rejects_bad_values(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        BanditConfig(**kwargs)


def test_initial_policy_is_biased_towards_mode_0():
    cfg = BanditConfig()
    p = initial_logits(cfg).exp()
    assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
    assert p[0].item() == pytest.approx(cfg.init_dominant)
    assert torch.allclose(p[1 : cfg.n_correct], torch.full((cfg.n_correct - 1,), cfg.init_other_correct, dtype=p.dtype))
    rest = (1 - cfg.init_dominant - (cfg.n_correct - 1) * cfg.init_other_correct) / (cfg.n_modes - cfg.n_correct)
    assert torch.allclose(p[cfg.n_correct :], torch.full((cfg.n_modes - cfg.n_correct,), rest, dtype=p.dtype))


def test_mode_embeddings_unit_norm_and_deterministic():
    mu = mode_embeddings(BanditConfig(), seed=3)
    assert mu.shape == (12, 50) and mu.dtype == torch.float64
    assert torch.allclose(mu.norm(dim=-1), torch.ones(12, dtype=torch.float64))
    assert torch.equal(mu, mode_embeddings(BanditConfig(), seed=3))
    assert not torch.equal(mu, mode_embeddings(BanditConfig(), seed=4))


def test_sample_embeddings_scatter_around_their_mode():
    mu = mode_embeddings(BanditConfig())
    modes = torch.tensor([0, 0, 5])
    e = sample_embeddings(mu, modes, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(e, mu[modes])
    e = sample_embeddings(mu, modes, 0.3, torch.Generator().manual_seed(0))
    assert ((e - mu[modes]).norm(dim=-1) < 1.0).all()


def test_advantages_match_the_literal_algorithm_1():
    gen = torch.Generator().manual_seed(0)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    emb = torch.randn(8, 50, generator=gen, dtype=torch.float64)
    base, s0 = bandit_advantages(rewards, emb, group_size=4, lam=0.0)
    assert torch.equal(base, group_advantages(rewards, 4)) and torch.equal(s0, torch.zeros(8, dtype=torch.float64))
    lam = 3.0
    adv, s = bandit_advantages(rewards, emb, group_size=4, lam=lam)
    ref = torch.cat([loo_credits_reference(cosine_kernel(emb[i : i + 4])) for i in (0, 4)])
    assert torch.allclose(s, ref, atol=1e-12)
    assert torch.allclose(adv, base + lam * ref, atol=1e-12)


def test_one_training_step_is_the_exact_score_function_gradient():
    cfg = replace(SMALL, steps=1, lam=2.0, lr=0.7)
    run = train_bandit(cfg, seed=11, replicates=2)
    # Redraw the same samples: multinomial then embeddings from one generator, as train_bandit does.
    gen = torch.Generator().manual_seed(11)
    theta0 = initial_logits(cfg).expand(2, -1)
    pi = theta0.softmax(-1)
    n = cfg.group_size * cfg.groups_per_step
    modes = torch.multinomial(pi, n, replacement=True, generator=gen)
    emb = sample_embeddings(mode_embeddings(cfg), modes, cfg.sample_noise, gen)
    rewards = (modes < cfg.n_correct).double()
    for r in range(2):
        adv, _ = bandit_advantages(rewards[r], emb[r], cfg.group_size, cfg.lam)
        # d/dtheta log softmax(theta)[a] = onehot(a) - pi, so ascent moves theta by lr * mean_i A_i (e_{a_i} - pi)
        grad = (adv.unsqueeze(-1) * (torch.nn.functional.one_hot(modes[r], cfg.n_modes).double() - pi[r])).mean(0)
        expected = (theta0[r] + cfg.lr * grad).softmax(-1)
        assert torch.allclose(run.probs[1, r], expected, atol=1e-12)


def test_training_run_shapes_determinism_and_grpo_equivalence():
    run = train_bandit(SMALL, seed=0, replicates=3)
    assert run.probs.shape == (SMALL.steps + 1, 3, SMALL.n_modes)
    assert torch.allclose(run.probs.sum(-1), torch.ones(SMALL.steps + 1, 3, dtype=torch.float64))
    assert run.sampled_embeddings.shape == (SMALL.steps * SMALL.group_size, SMALL.dim)
    assert run.sampled_steps.tolist() == [t for t in range(SMALL.steps) for _ in range(SMALL.group_size)]
    assert run.mean_reward.shape == (SMALL.steps, 3)
    assert torch.equal(run.mean_abs_credit, torch.zeros(SMALL.steps, 3, dtype=torch.float64))
    again = train_bandit(SMALL, seed=0, replicates=3)
    assert torch.equal(run.probs, again.probs)
    setpo = train_bandit(replace(SMALL, lam=5.0), seed=0, replicates=3)
    assert not torch.equal(setpo.probs[-1], run.probs[-1])
    assert (setpo.mean_abs_credit > 0).any()


def test_train_bandit_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode embeddings"):
        train_bandit(SMALL, mu=torch.zeros(3, 50, dtype=torch.float64))
    with pytest.raises(ValueError, match="replicates"):
        train_bandit(SMALL, replicates=0)


def test_metrics_hand_worked():
    p = torch.tensor([[0.5, 0.3, 0.04, 0.06, 0.1], [0.97, 0.01, 0.01, 0.0, 0.01]], dtype=torch.float64)
    assert modes_kept(p, 4).tolist() == [3, 1]
    assert correct_mass(p, 4).tolist() == pytest.approx([0.9, 0.99])
    q = torch.tensor([0.5, 0.3, 0.04, 0.06]) / 0.9
    assert correct_entropy(p, 4)[0].item() == pytest.approx(-(q * q.log()).sum().item(), rel=1e-6)
    q = torch.tensor([0.97, 0.01, 0.01]) / 0.99
    assert correct_entropy(p, 4)[1].item() == pytest.approx(-(q * q.log()).sum().item(), rel=1e-6)  # 0 log 0 = 0
    uniform = torch.full((4,), 0.25, dtype=torch.float64)
    assert correct_entropy(uniform, 4).item() == pytest.approx(math.log(4))
    with pytest.raises(ValueError, match="sum to 1"):
        modes_kept(torch.tensor([0.5, 0.6]), 1)
    with pytest.raises(ValueError, match="n_correct"):
        correct_mass(uniform, 5)
    with pytest.raises(ValueError, match="zero mass"):
        correct_entropy(torch.tensor([0.0, 1.0], dtype=torch.float64), 1)
