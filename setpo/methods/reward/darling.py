"""DARLING (Li et al., arXiv 2509.02534): quality times a partition-based diversity, no std normalisation.

Compared with the public code (facebookresearch/darling, a verl fork): the multiplicative reward, the diversity
(n - |class|) / (n - 1) and its 0.1 floor are the code's; the code's ``add_bias`` option is not implemented here
(no parameter selects it), and the code's learned pairwise equivalence classifier is replaced by the partitions
below ("answer", "embedding") or a caller's function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Union

import torch

from setpo._validate import check_choice, check_shape
from setpo.core import cosine_kernel
from setpo.methods.batch import GroupBatch, check_real
from setpo.methods.registry import register_method
from setpo.rewards import checked_normalize, normalize_answer

#: A partition: a registered name ("answer", "embedding") or a function batch -> (B, G) integer class labels.
PartitionSpec = Union[str, Callable[[GroupBatch], torch.Tensor]]
#: The public code's floor on the diversity (facebookresearch/darling, partition_reward_vllm_serve.py).
CODE_FLOOR = 0.1


def answer_partition(answers: Any, group_size: int, normalize: Callable[[str | None], str] = normalize_answer):
    """Class labels (B, G): rollouts of a group are equivalent iff their normalised answers are equal.

    A missing or empty answer is a class of its own. Label = index of the class's first member in the group.
    ``normalize`` must return a string (ValueError otherwise).
    """
    normalize = checked_normalize(normalize)
    N = len(answers)
    if N % group_size:
        raise ValueError(f"{N} answers are not a multiple of the group size {group_size}")
    labels = torch.empty(N // group_size, group_size, dtype=torch.long)
    for b in range(N // group_size):
        first: dict[str, int] = {}
        for g in range(group_size):
            a = answers[b * group_size + g]
            key = normalize(a) if a is not None else ""
            labels[b, g] = first.setdefault(key, g) if key else g
    return labels


ROUNDING = 64 * torch.finfo(torch.float64).eps  # 1.4e-14: cosines within this of the threshold count as reaching it


def embedding_partition(embeddings: torch.Tensor, threshold: float = 0.9) -> torch.Tensor:
    """Class labels (B, G): the connected components of the graph cos(e_i, e_j) >= threshold within each group.

    Equivalence is closed transitively, as DARLING's union-find over its pairwise classifier does. Zero-norm
    embeddings are equivalent to each other only (`setpo.cosine_kernel`). Label = the component's first index.
    """
    threshold = check_real(threshold, "threshold (a cosine similarity)", minimum=-1.0, maximum=1.0)
    K = cosine_kernel(embeddings.to(torch.float64), clamp=False)
    # Rounding: the cosine of two copies of one vector can come out a few ulps below 1 (threshold 1 = "identical").
    reach = (K >= threshold - ROUNDING).to(torch.float64)
    G = K.shape[-1]
    for _ in range(max(1, math.ceil(math.log2(max(G, 2))))):  # paths of length <= 2^steps >= G - 1
        reach = ((reach @ reach) > 0).to(torch.float64)
    return reach.argmax(-1)  # the first index reachable from i, the same for the whole component


PARTITIONS: Mapping[str, str] = {"answer": "answers", "embedding": "embeddings"}


def darling_diversity(labels: torch.Tensor, floor: float = CODE_FLOOR) -> torch.Tensor:
    """div_i = max((n - |class(i)|) / (n - 1), floor) (DARLING, partition diversity); labels (B, n) -> (B, n)."""
    if labels.dim() != 2 or labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"partition labels must be a (B, G) integer tensor, got {labels.dtype} {tuple(labels.shape)}")
    floor = check_real(floor, "floor", minimum=0.0)
    n = labels.shape[-1]
    if n < 2:
        raise ValueError(f"group size G={n} is too small: DARLING's diversity (n - |class|)/(n - 1) needs G >= 2")
    size = (labels.unsqueeze(-1) == labels.unsqueeze(-2)).sum(-1).to(torch.float64)
    return ((n - size) / (n - 1)).clamp_min(floor)


def _partition_labels(batch: GroupBatch, partition: PartitionSpec, threshold: float, normalize) -> torch.Tensor:
    if callable(partition):
        labels = torch.as_tensor(partition(batch))
        return check_shape(labels, "the partition function's labels", (batch.num_groups, batch.group_size), "(B, G)")
    if _check_partition(partition) == "answer":
        return answer_partition(batch.answers, batch.group_size, normalize)
    return embedding_partition(batch.embeddings, threshold)


def _check_partition(p: str) -> str:
    return check_choice(p, "partition", sorted(PARTITIONS), " or a function batch -> (B, G) labels")


def _darling_inputs(params: Mapping[str, Any]) -> tuple[str, ...]:
    p = params["partition"]
    return () if callable(p) else (PARTITIONS[_check_partition(p)],)


@register_method(
    "darling",
    entry="reward",
    needs=("rewards",),
    citation="Li et al., Jointly Reinforcing Diversity and Quality in Language Model Generations, arXiv 2509.02534",
    group_scale="none",
    needs_for=_darling_inputs,
)
def darling_method(
    batch: GroupBatch,
    partition: PartitionSpec = "answer",
    threshold: float = 0.9,
    floor: float = CODE_FLOOR,
    normalize: Callable[[str | None], str] = normalize_answer,
) -> torch.Tensor:
    """R~_i = R_i * max((n - |class(i)|) / (n - 1), floor) (DARLING, multiplicative quality x diversity).

    The engine then centres R~ within the group *without* dividing by the std (``group_scale="none"``). The
    classes come from ``partition``: "answer" (normalised-answer equality), "embedding" (cosine >= ``threshold``,
    transitively closed), or a function batch -> (B, G) labels (DARLING itself uses a learned pairwise classifier).
    ``floor`` = 0.1 is the public code's; 0 gives the bare formula.
    """
    labels = _partition_labels(batch, partition, threshold, normalize)
    div = darling_diversity(labels, floor).to(batch.rewards.device)
    return (batch.rewards.to(torch.float64) * div).to(batch.rewards.dtype)
