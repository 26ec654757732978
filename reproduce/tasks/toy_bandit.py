"""The paper's Figure 1 toy: a multi-modal bandit with semantic modes, trained by GRPO or SetPO+GRPO.

A trajectory is a mode index a in {0..M-1} plus an embedding e = mu_a + noise; the first `n_correct`
modes earn reward 1, the rest 0. The policy is softmax(theta) over modes and is trained with the exact
score-function gradient of the group-relative objective on sampled groups:
    loss = -mean_i A_i log pi(a_i),   A = group z-score of r (+ lambda * s from the cosine kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from setpo.core import cosine_kernel, group_advantages, loo_credits, setpo_advantages


@dataclass(frozen=True)
class BanditConfig:
    """Toy settings. The paper gives 12 modes, 4 rewarded, 50-d embeddings and a cosine kernel (Fig. 1)."""

    n_modes: int = 12
    n_correct: int = 4
    dim: int = 50
    sample_noise: float = 0.3  # per-sample embedding noise norm relative to a unit mode embedding
    group_size: int = 8
    groups_per_step: int = 8
    steps: int = 150
    lr: float = 0.5  # plain SGD on the logits
    lam: float = 0.0  # SetPO weight; 0 is GRPO
    shaping: str = "neglog1p"
    # Initial policy, as after SFT: one correct mode dominant, the other correct modes rare.
    init_dominant: float = 0.40  # pi_0(mode 0)
    init_other_correct: float = 0.03  # pi_0 of each of modes 1..n_correct-1; incorrect modes share the rest
    record_every: int = 1  # keep the first group's embeddings every this many steps (for the figure)

    def __post_init__(self):
        if not (1 <= self.n_correct < self.n_modes):
            raise ValueError(f"need 1 <= n_correct < n_modes, got n_correct={self.n_correct}, n_modes={self.n_modes}")
        if self.group_size < 3:
            raise ValueError(f"group_size must be >= 3 for the leave-one-out credits, got {self.group_size}")
        for name in ("dim", "groups_per_step", "steps", "record_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise ValueError(f"lam must be finite and >= 0, got {self.lam}")
        if self.sample_noise < 0 or self.lr <= 0:
            raise ValueError("sample_noise must be >= 0 and lr > 0")
        rest = 1.0 - self.init_dominant - (self.n_correct - 1) * self.init_other_correct
        if not (0 < self.init_dominant < 1 and self.init_other_correct > 0 and rest > 0):
            raise ValueError(
                f"initial probabilities must be positive and sum below 1 (dominant {self.init_dominant}, "
                f"other correct {self.init_other_correct}, left for incorrect modes {rest:.3f})"
            )


@dataclass
class BanditRun:
    """R independent replicate runs trained side by side; trajectories recorded for replicate 0."""

    config: BanditConfig
    seed: int
    probs: torch.Tensor  # (steps + 1, R, n_modes), [t] = policies after t updates
    sampled_modes: torch.Tensor  # (n_recorded,) mode index of recorded trajectories (replicate 0)
    sampled_embeddings: torch.Tensor  # (n_recorded, dim)
    sampled_steps: torch.Tensor  # (n_recorded,) training step at which each was sampled
    mean_reward: torch.Tensor  # (steps, R) batch mean task reward per step
    mean_abs_credit: torch.Tensor  # (steps, R) mean |s_i| per step (0 for GRPO)


def mode_embeddings(cfg: BanditConfig, seed: int = 0) -> torch.Tensor:
    """Unit-norm random mode embeddings mu_a in R^dim (float64), fixed by `seed`."""
    gen = torch.Generator().manual_seed(seed)
    mu = torch.randn(cfg.n_modes, cfg.dim, generator=gen, dtype=torch.float64)
    return mu / mu.norm(dim=-1, keepdim=True)


def initial_logits(cfg: BanditConfig) -> torch.Tensor:
    """log pi_0: mode 0 dominant, modes 1..n_correct-1 rare, incorrect modes sharing the rest evenly."""
    p = torch.empty(cfg.n_modes, dtype=torch.float64)
    p[0] = cfg.init_dominant
    p[1 : cfg.n_correct] = cfg.init_other_correct
    rest = 1.0 - cfg.init_dominant - (cfg.n_correct - 1) * cfg.init_other_correct
    p[cfg.n_correct :] = rest / (cfg.n_modes - cfg.n_correct)
    return p.log()


def sample_embeddings(mu: torch.Tensor, modes: torch.Tensor, noise: float, gen: torch.Generator) -> torch.Tensor:
    """e = mu_a + noise * z / sqrt(d), z ~ N(0, I): a trajectory's embedding scattered around its mode's."""
    z = torch.randn(*modes.shape, mu.shape[-1], generator=gen, dtype=mu.dtype)
    return mu[modes] + noise * z / math.sqrt(mu.shape[-1])


def bandit_advantages(
    rewards: torch.Tensor, embeddings: torch.Tensor, group_size: int, lam: float, shaping: str = "neglog1p"
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_hat = A_bar + lambda * s (paper eq. 6) for (..., N) rewards and (..., N, d) embeddings; returns (A_hat, s)."""
    base = group_advantages(rewards, group_size)
    if lam == 0:
        return base, torch.zeros_like(base)
    K = cosine_kernel(embeddings.reshape(*embeddings.shape[:-2], -1, group_size, embeddings.shape[-1]))
    s = loo_credits(K, shaping).reshape(rewards.shape)
    return setpo_advantages(base, s, lam), s


def train_bandit(
    cfg: BanditConfig, seed: int = 0, replicates: int = 1, mu: torch.Tensor | None = None, progress=None
) -> BanditRun:
    """Train `replicates` softmax policies from `initial_logits` with group-relative policy gradients.

    All replicates draw from one generator seeded with `seed`, so the same (seed, replicates) gives the
    same draws for every lambda until the policies differ.
    """
    mu = mode_embeddings(cfg) if mu is None else mu
    if mu.shape != (cfg.n_modes, cfg.dim):
        raise ValueError(f"mode embeddings must have shape {(cfg.n_modes, cfg.dim)}, got {tuple(mu.shape)}")
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1, got {replicates}")
    gen = torch.Generator().manual_seed(seed)
    theta = initial_logits(cfg).expand(replicates, -1).clone().requires_grad_(True)
    opt = torch.optim.SGD([theta], lr=cfg.lr)
    n = cfg.group_size * cfg.groups_per_step
    probs = [theta.detach().softmax(-1)]
    rec_modes, rec_emb, rec_steps, mean_r, mean_s = [], [], [], [], []
    for step in range(cfg.steps):
        logp = theta.log_softmax(-1)  # (R, M)
        modes = torch.multinomial(logp.detach().exp(), n, replacement=True, generator=gen)  # (R, n)
        emb = sample_embeddings(mu, modes, cfg.sample_noise, gen)  # (R, n, d)
        rewards = (modes < cfg.n_correct).to(torch.float64)
        adv, s = bandit_advantages(rewards, emb, cfg.group_size, cfg.lam, cfg.shaping)
        # Each replicate's loss is its own batch mean; summing over replicates keeps their gradients separate.
        loss = -(adv.detach() * logp.gather(-1, modes)).mean(-1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        probs.append(theta.detach().softmax(-1))
        mean_r.append(rewards.mean(-1))
        mean_s.append(s.abs().mean(-1))
        if step % cfg.record_every == 0:
            rec_modes.append(modes[0, : cfg.group_size])
            rec_emb.append(emb[0, : cfg.group_size])
            rec_steps.append(torch.full((cfg.group_size,), step))
        if progress is not None:
            progress.update(replicates)
    return BanditRun(
        config=cfg,
        seed=seed,
        probs=torch.stack(probs),
        sampled_modes=torch.cat(rec_modes),
        sampled_embeddings=torch.cat(rec_emb),
        sampled_steps=torch.cat(rec_steps),
        mean_reward=torch.stack(mean_r),
        mean_abs_credit=torch.stack(mean_s),
    )


def modes_kept(probs: torch.Tensor, n_correct: int, threshold: float = 0.05) -> torch.Tensor:
    """Number of correct modes (the first `n_correct`) with probability above `threshold`; (..., M) -> (...)."""
    _check_probs(probs, n_correct)
    return (probs[..., :n_correct] > threshold).sum(-1)


def correct_entropy(probs: torch.Tensor, n_correct: int) -> torch.Tensor:
    """Entropy (nats) of the policy restricted to the correct modes and renormalised; max log(n_correct)."""
    _check_probs(probs, n_correct)
    q = probs[..., :n_correct]
    total = q.sum(-1, keepdim=True)
    if bool((total <= 0).any()):
        raise ValueError("the policy puts zero mass on the correct modes; their entropy is undefined")
    q = q / total
    return -(torch.where(q > 0, q * q.log(), torch.zeros_like(q))).sum(-1)


def correct_mass(probs: torch.Tensor, n_correct: int) -> torch.Tensor:
    """Expected task reward: total probability of the correct modes."""
    _check_probs(probs, n_correct)
    return probs[..., :n_correct].sum(-1)


def _check_probs(probs: torch.Tensor, n_correct: int) -> None:
    if probs.dim() < 1 or not (1 <= n_correct <= probs.shape[-1]):
        raise ValueError(f"n_correct={n_correct} does not fit probabilities of shape {tuple(probs.shape)}")
    if bool((probs < 0).any()) or not torch.allclose(probs.sum(-1), torch.ones((), dtype=probs.dtype), atol=1e-6):
        raise ValueError("probs must be non-negative and sum to 1 over the last dimension")


def with_lambda(cfg: BanditConfig, lam: float) -> BanditConfig:
    """The same configuration with another SetPO weight."""
    return replace(cfg, lam=lam)
