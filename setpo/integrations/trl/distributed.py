"""Credits for one process's rows when the G completions of a prompt may sit on several processes.

TRL lays the generation batch out as the concatenation of the processes' local rows in process order
(``accelerator.gather``); a prompt's group is G consecutive rows of that gathered batch, so a group may
straddle two processes. Each process gathers every row's embedding, computes all credits, and keeps the
rows of its own slice ``[process_index * B_local, (process_index + 1) * B_local)`` exactly as TRL slices
the advantages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from setpo.core import cosine_kernel, get_shaping, loo_credits, loo_credits_reference, set_diversity
from setpo.core.diversity import ShapingSpec


@dataclass(frozen=True)
class BatchCredits:
    """Credits of the gathered batch and of this process's rows."""

    local: torch.Tensor  # (B_local,) credits s_i of this process's rows, in its row order
    all: torch.Tensor  # (N,) credits of the gathered batch
    diversity: torch.Tensor  # (N / G,) D(Omega) of every group


def _check_layout(per_process: Sequence[torch.Tensor], process_index: int, group_size: int) -> tuple[int, int]:
    if len(per_process) == 0:
        raise ValueError("need the embeddings of at least one process")
    if not (isinstance(process_index, int) and 0 <= process_index < len(per_process)):
        raise ValueError(f"process_index {process_index!r} is outside 0..{len(per_process) - 1}")
    if not isinstance(group_size, int) or group_size < 3:
        raise ValueError(f"group_size must be an integer >= 3 for leave-one-out credits, got {group_size!r}")
    shapes = [tuple(e.shape) for e in per_process]
    if any(len(s) != 2 for s in shapes):
        raise ValueError(f"every process's embeddings must have shape (B_local, d), got {shapes}")
    if len({s for s in shapes}) != 1:
        raise ValueError(f"processes hold different numbers of rows or dimensions {shapes}; TRL's slicing needs equal")
    B_local = shapes[0][0]
    N = B_local * len(per_process)
    if N % group_size != 0:
        raise ValueError(f"gathered batch of {N} rows is not divisible by the group size {group_size}")
    return B_local, N


def credits_for_local_rows(
    per_process_embeddings: Sequence[torch.Tensor],
    process_index: int,
    group_size: int,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
    dtype: torch.dtype = torch.float64,
) -> BatchCredits:
    """s_i = D(Omega) - D(Omega \\ {o_i}) (eq. 5, Lemma D.1 closed form) for the rows of process ``process_index``.

    ``per_process_embeddings[p]`` is the (B_local, d) embedding tensor of process p (what ``gather`` concatenates).
    """
    B_local, N = _check_layout(per_process_embeddings, process_index, group_size)
    gathered = torch.cat([e.to(dtype) for e in per_process_embeddings], dim=0)
    grouped = gathered.reshape(N // group_size, group_size, -1)
    K = cosine_kernel(grouped, clamp=clamp)
    credits = loo_credits(K, shaping).reshape(N)
    local = credits[process_index * B_local : (process_index + 1) * B_local]
    return BatchCredits(local=local, all=credits, diversity=set_diversity(K, shaping))


def credits_for_local_rows_reference(
    per_process_embeddings: Sequence[torch.Tensor],
    process_index: int,
    group_size: int,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
) -> torch.Tensor:
    """Brute force of ``credits_for_local_rows(...).local``: row by row, find the group by global index, build its
    kernel entry by entry from explicit dot products, and run the literal Algorithm 1 (float64)."""
    B_local, _ = _check_layout(per_process_embeddings, process_index, group_size)
    g = get_shaping(shaping)
    rows = [(p, r) for p in range(len(per_process_embeddings)) for r in range(B_local)]  # global order
    out = []
    for r in range(B_local):
        n = process_index * B_local + r
        start = (n // group_size) * group_size
        members = [per_process_embeddings[p][q].to(torch.float64) for p, q in rows[start : start + group_size]]
        K = torch.empty(group_size, group_size, dtype=torch.float64)
        for a in range(group_size):
            for b in range(group_size):
                na, nb = members[a].norm(), members[b].norm()
                if a == b:
                    k = 1.0
                elif na == 0 or nb == 0:
                    k = 1.0 if na == nb else 0.0
                else:
                    k = float(members[a] @ members[b] / (na * nb))
                K[a, b] = min(max(k, 0.0), 1.0) if clamp else min(max(k, -1.0), 1.0)
        out.append(loo_credits_reference(K, g)[n - start])
    return torch.stack(out)
