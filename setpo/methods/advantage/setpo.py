"""SetPO (arXiv 2602.01062): the leave-one-out set-diversity credit, added after the base normalisation."""

from __future__ import annotations

import torch

from setpo.core import ShapingSpec, SmallGroupPolicy, group_credits, setpo_advantages
from setpo.core.credits import check_small_group_policy
from setpo.methods.batch import GroupBatch
from setpo.methods.registry import register_method


def setpo_credits(
    batch: GroupBatch,
    *,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
    on_small_group: SmallGroupPolicy = "raise",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, D): credits s_i = D(Omega) - D(Omega \\ {o_i}) (eq. 5) (B, G) and set diversities D(Omega) (eq. 4) (B,).

    Omega is a group's rows in ``batch.mask`` (all rows when None); rows outside it get credit 0 and do not shift
    their group's credits. A group with fewer than 3 such rows gets credit 0 and D = NaN, except that a batch with
    G < 3 and no mask follows ``on_small_group``. Computed in float64 (float32 credits carry errors of about 1e-6).
    """
    check_small_group_policy(on_small_group)
    if batch.embeddings is None:
        raise ValueError("the SetPO credit needs the batch's embeddings")
    e = batch.embeddings.to(torch.float64)
    B, G = batch.num_groups, batch.group_size
    if batch.mask is None or bool(batch.mask.all()):
        return group_credits(e, G, clamp=clamp, shaping=shaping, on_small_group=on_small_group, return_diversity=True)
    credits = torch.zeros(B, G, dtype=torch.float64, device=e.device)
    diversity = torch.full((B,), float("nan"), dtype=torch.float64, device=e.device)
    counts = batch.mask.sum(1)
    for c in sorted({int(c) for c in counts.tolist() if c >= 3}):  # groups with c rows in the mask, batched
        groups = (counts == c).nonzero().flatten()
        members = batch.mask[groups].nonzero()[:, 1].reshape(-1, c)  # each group's rows, in order
        s, d = group_credits(e[groups.unsqueeze(1), members], c, clamp=clamp, shaping=shaping, return_diversity=True)
        credits[groups.unsqueeze(1), members] = s
        diversity[groups] = d
    return credits, diversity


@register_method(
    "setpo",
    entry="advantage",
    needs=("embeddings",),
    citation="SetPO: Set-Level Policy Optimization for Diversity-Preserving LLM Reasoning, arXiv 2602.01062",
    scale="lam",
    min_group=3,
)
def setpo_method(
    batch: GroupBatch,
    advantages: torch.Tensor,
    lam: float = 0.05,
    shaping: ShapingSpec = "neglog1p",
    clamp: bool = True,
    on_small_group: SmallGroupPolicy = "raise",
) -> torch.Tensor:
    """A_hat_i = A_bar_i + lambda * s_i, s_i = D(Omega) - D(Omega \\ {o_i}) (SetPO eq. 5-6), via setpo.core.

    The credits are `setpo_credits` (the clamped-cosine kernel of each prompt's embeddings in ``batch.mask``, G >= 3;
    ``on_small_group="zero"`` gives credit 0 to smaller groups), added by `setpo.core.setpo_advantages`.
    """
    s, _ = setpo_credits(batch, clamp=clamp, shaping=shaping, on_small_group=on_small_group)
    return setpo_advantages(advantages, s.to(advantages.dtype), lam)
