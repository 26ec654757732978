"""DRA-GRPO (Chen et al., arXiv 2505.09655): rewards divided by a submodular-mutual-information redundancy."""

from __future__ import annotations

from typing import Literal

import torch

from setpo._validate import check_bool, check_choice
from setpo.core import cosine_kernel
from setpo.methods.batch import GroupBatch
from setpo.methods.registry import register_method

#: "group": the paper's form, similarities within the prompt's group, self excluded. "batch": the public code's form
#: (xiwenc1/DRA-GRPO, grpo_trainer.py), similarities over every rollout of the batch, self included, + 1e-6.
Scope = Literal["group", "batch"]
CODE_EPS = 1e-6


def _raw_cosine_row_sums(e: torch.Tensor) -> torch.Tensor:
    """sum_j cos(e_i, e_j) over each set (..., n, d) -> (..., n) as u_i . sum_j u_j, O(n d) instead of O(n^2 d).

    Zero-norm rows follow `setpo.cosine_kernel`: similarity 1 to each zero-norm row (itself included), 0 to others.
    """
    norms = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
    zero = norms == 0
    u = e / torch.where(zero, torch.ones_like(norms), norms)
    sums = (u * u.sum(-2, keepdim=True)).sum(-1)
    zero = zero.squeeze(-1)
    return torch.where(zero, zero.sum(-1, keepdim=True).to(sums.dtype), sums)


def dra_weights(embeddings: torch.Tensor, scope: Scope = "group", clamp: bool = False) -> torch.Tensor:
    """w_i = 1 / (1 + sum_{j != i} sim(o_i, o_j)) in the group (DRA-GRPO, graph-cut SMI); (B,G,d) -> (B,G).

    ``scope="group"`` is the paper's form. ``scope="batch"`` is the public code's: w_i = 1 / (sum_j sim(o_i, o_j) +
    1e-6) over all B * G rollouts, j = i included (sim(o_i, o_i) = 1, so the 1 of the paper reappears as the self
    term); "the batch" is whatever B * G rollouts are passed (the code uses one process's share). ``sim`` is the
    cosine similarity of the embeddings (`setpo.cosine_kernel`, raw unless ``clamp``), so a zero-norm embedding is
    similar only to other zero-norm ones (the code's normalisation would give it sum 0 and weight 1e6). A
    denominator <= 0 (possible with negative cosines) raises instead of flipping the reward's sign.
    """
    check_choice(scope, "scope", ("group", "batch"), " ('group': the paper's, 'batch': the public code's)")
    check_bool(clamp, "clamp")
    B, G, d = embeddings.shape
    e = embeddings.to(torch.float64)
    sets = e if scope == "group" else e.reshape(1, B * G, d)
    if clamp:
        sums = cosine_kernel(sets, clamp=True).sum(-1)
    else:
        sums = _raw_cosine_row_sums(sets)
    # sums = 1 (the diagonal) + sum_{j != i} sim(o_i, o_j)
    denom = sums if scope == "group" else (sums + CODE_EPS).reshape(B, G)
    if bool((denom <= 0).any()):
        raise ValueError(
            f"DRA-GRPO denominator 1 + sum_j sim(o_i, o_j) is <= 0 for {int((denom <= 0).sum())} rollout(s) "
            "(negative cosine similarities); use clamp=True"
        )
    return 1.0 / denom


@register_method(
    "dra_grpo",
    entry="reward",
    needs=("rewards", "embeddings"),
    citation="Chen et al., DRA-GRPO: Diversity-Aware Reward Adjustment for R1-Zero-Like Training, arXiv 2505.09655",
    group_scale="group",
)
def dra_grpo_method(batch: GroupBatch, scope: Scope = "group", clamp: bool = False) -> torch.Tensor:
    """R~_i = R_i / (1 + sum_{j != i} sim(o_i, o_j)) (DRA-GRPO reward adjustment), then the group z-score.

    See `dra_weights` for ``scope`` (the paper's group form by default, the public code's batch form as an option).
    """
    w = dra_weights(batch.embeddings, scope, clamp)
    return (batch.rewards.to(torch.float64) * w).to(batch.rewards.dtype)
