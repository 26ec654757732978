"""DQO (Chen et al., arXiv 2509.04784): the log-det (DPP) diversity of the group's embedding kernel.

The authors published no reference code, so this implementation follows the paper's text and the project's spec
only (the leave-one-out log-det gain with K = L + I); it has not been compared with an implementation of theirs.
"""

from __future__ import annotations

import torch

from setpo._validate import check_bool
from setpo.methods.batch import GroupBatch, check_real
from setpo.methods.registry import register_method


def dqo_kernel(embeddings: torch.Tensor, ridge: float = 1.0, normalize: bool = True) -> torch.Tensor:
    """K = L + ridge * I, L_ij = <e_i, e_j> the Gram matrix of the (unit-normalised) embeddings; (B,G,d) -> (B,G,G).

    With ``normalize`` a zero-norm embedding stays the zero vector (its row of L is 0). float64.
    """
    ridge = check_real(ridge, "ridge", minimum=0.0)
    check_bool(normalize, "normalize")
    e = embeddings.to(torch.float64)
    if normalize:
        norms = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
        e = e / torch.where(norms > 0, norms, torch.ones_like(norms))
    L = e @ e.mT
    L = 0.5 * (L + L.mT)
    return L + ridge * torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)


def dqo_credits(embeddings: torch.Tensor, ridge: float = 1.0, normalize: bool = True) -> torch.Tensor:
    """c_i = log det K - log det K_{-i} = -log (K^{-1})_{ii}, K = L + ridge I (DQO, leave-one-out log-det gain).

    The paper scores a group by log det of its embedding kernel (a DPP volume); the project's spec
    records the per-rollout signal as this leave-one-out marginal with K = L + I, which is the default (``ridge=1``).
    ``ridge=0`` gives the bare log det L, defined only for linearly independent embeddings (refused otherwise).
    Computed by one Cholesky factorisation per group (Schur complement: det K / det K_{-i} = 1 / (K^{-1})_{ii}).
    """
    K = dqo_kernel(embeddings, ridge, normalize)
    chol, info = torch.linalg.cholesky_ex(K)
    if bool((info != 0).any()):
        raise ValueError(
            f"the DQO kernel L + {ridge} I of {int((info != 0).sum())} group(s) is singular (duplicate or linearly "
            "dependent embeddings, or G > d): use ridge > 0"
        )
    return -torch.log(torch.cholesky_inverse(chol).diagonal(dim1=-2, dim2=-1))


@register_method(
    "dqo",
    entry="reward",
    needs=("rewards", "embeddings"),
    citation="Chen et al., Post-training LLMs for Diverse High-Quality Responses (DQO), arXiv 2509.04784",
    group_scale="group",
)
def dqo_method(batch: GroupBatch, alpha: float = 0.1, ridge: float = 1.0, normalize: bool = True) -> torch.Tensor:
    """R~_i = R_i + alpha * (log det K - log det K_{-i}), K = L + ridge I (DQO, diversity added to the reward)."""
    alpha = check_real(alpha, "alpha", minimum=0.0)
    c = dqo_credits(batch.embeddings, ridge, normalize)
    return (batch.rewards.to(torch.float64) + alpha * c).to(batch.rewards.dtype)
