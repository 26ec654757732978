"""Token-level entropy bonus: the classic exploration baseline, a term the engine adds to the policy loss."""

from __future__ import annotations

from typing import Literal

import torch

from setpo._validate import check_choice
from setpo.methods.batch import GroupBatch, check_real
from setpo.methods.registry import register_method

#: "token-mean": mean over all response tokens of the batch (verl's default loss_agg_mode); "seq-mean-token-mean":
#: mean over rollouts of each rollout's token mean (rollouts without response tokens are left out).
Aggregation = Literal["token-mean", "seq-mean-token-mean"]


def entropy_bonus_term(
    entropies: torch.Tensor, mask: torch.Tensor | None, coef: float, aggregation: Aggregation = "token-mean"
) -> torch.Tensor:
    """loss_term = -coef * agg_t H_t, H_t the policy's token entropy (entropy regularisation, Williams & Peng 1991).

    ``entropies`` (..., T), ``mask`` (..., T) bool (None: every token counts); returns a scalar, the term to *add*
    to the loss that is minimised (so a positive ``coef`` raises the entropy), as verl's ``entropy_coeff`` does.
    """
    coef = check_real(coef, "coef", minimum=0.0)
    check_choice(aggregation, "aggregation", ("token-mean", "seq-mean-token-mean"))
    m = torch.ones_like(entropies, dtype=torch.bool) if mask is None else mask
    h = torch.where(m, entropies, torch.zeros_like(entropies))
    tokens = m.sum(-1)
    if int(tokens.sum()) == 0:
        raise ValueError("the response mask selects no token: the entropy bonus is undefined")
    if aggregation == "token-mean":
        agg = h.sum() / tokens.sum()
    else:
        keep = tokens > 0
        agg = (h.sum(-1)[keep] / tokens[keep]).mean()
    return -coef * agg


@register_method(
    "entropy_bonus",
    entry="loss",
    needs=("token_entropies",),
    citation="Williams & Peng 1991, Function optimization using connectionist RL algorithms (entropy regularisation)",
)
def entropy_bonus_method(
    batch: GroupBatch, coef: float = 1e-3, aggregation: Aggregation = "token-mean"
) -> torch.Tensor:
    """loss_term = -coef * agg_t H_t over the response tokens (entropy bonus); the engine adds it to the policy loss.

    The rewards and advantages are untouched. Tokens outside ``batch.response_mask`` (when given) do not count.
    """
    return entropy_bonus_term(batch.token_entropies, batch.response_mask, coef, aggregation)
