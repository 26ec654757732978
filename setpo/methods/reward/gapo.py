"""GAPO (Anschel et al., arXiv 2511.12596): the frequency-aware group reward, replacing the task reward."""

from __future__ import annotations

from typing import Literal

import torch

from setpo.methods.batch import GroupBatch
from setpo.methods.registry import register_method
from setpo.rewards import gapo_rewards


@register_method(
    "gapo",
    entry="reward",
    needs=("answers", "valid_sets"),
    citation="Anschel et al., Group-Aware Reinforcement Learning for Output Diversity in LLMs, arXiv 2511.12596",
    group_scale="group",
)
def gapo_method(
    batch: GroupBatch,
    form: Literal["published", "absolute"] = "published",
    count: Literal["inclusive", "leave_one_out"] = "inclusive",
    invalid_reward: float = -1.0,
) -> torch.Tensor:
    """R~_i = 1 - (f_{o_i} - 1/L) if o_i in V else -1 (GAPO eq. 3), via `setpo.rewards.gapo_rewards`.

    GAPO's reward is computed from the group's answers and valid sets alone: it replaces ``batch.rewards``
    (whose dtype it keeps) rather than transforming it. Options as in `gapo_rewards`.
    """
    out = gapo_rewards(
        batch.answers,
        batch.valid_sets,
        batch.group_size,
        form=form,
        count=count,
        invalid_reward=invalid_reward,
        dtype=torch.float64,
    )
    return out.reshape(batch.num_groups, batch.group_size).to(batch.rewards.dtype)
