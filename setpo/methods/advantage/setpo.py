"""SetPO (arXiv 2602.01062): the leave-one-out set-diversity credit, added after the base normalisation."""

from __future__ import annotations

import torch

from setpo.core import ShapingSpec, SmallGroupPolicy, group_credits, setpo_advantages
from setpo.methods.batch import GroupBatch
from setpo.methods.registry import register_method


@register_method(
    "setpo",
    entry="advantage",
    needs=("embeddings",),
    citation="SetPO: Set-Level Policy Optimization for Diversity-Preserving LLM Reasoning, arXiv 2602.01062",
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

    The credits are `setpo.core.group_credits` on the clamped-cosine kernel of each prompt's G embeddings
    (G >= 3; ``on_small_group="zero"`` gives credit 0 to smaller groups), added by `setpo.core.setpo_advantages`.
    """
    s = group_credits(batch.embeddings, batch.group_size, clamp=clamp, shaping=shaping, on_small_group=on_small_group)
    return setpo_advantages(advantages, s.to(advantages.dtype), lam)
