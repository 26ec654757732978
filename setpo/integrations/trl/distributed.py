"""Credits for one process's rows when the G completions of a prompt may sit on several processes.

TRL lays the generation batch out as the concatenation of the processes' local rows in process order
(``accelerator.gather``); a prompt's group is G consecutive rows of that gathered batch, so a group may
straddle two processes. Each process gathers every row's embedding, computes all credits, and keeps the
rows of its own slice ``[process_index * B_local, (process_index + 1) * B_local)`` exactly as TRL slices
the advantages.

Rows may be kept out of the kernel (``kernel_rows``): unscorable completions (every reward function returned None)
and completions TRL masks out of the loss (``mask_truncated_completions``). A group's credits are then those of
the set of its remaining members (the same closed form on the smaller kernel); excluded rows get credit 0, and
a group with fewer than 3 remaining members gets credit 0 on every row (D(Omega \\ {o_i}) is undefined there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from setpo.core import ShapingSpec, group_credits


@dataclass(frozen=True)
class BatchCredits:
    """Credits of the gathered batch and of this process's rows."""

    local: torch.Tensor  # (B_local,) credits s_i of this process's rows, in its row order
    all: torch.Tensor  # (N,) credits of the gathered batch
    diversity: torch.Tensor  # (N / G,) D(Omega) of every group's kernel rows (NaN where fewer than 3)
    defined: torch.Tensor | None = None  # (N,) bool: the row entered a kernel of >= 3 rows and has a credit

    @property
    def defined_rows(self) -> torch.Tensor:
        """(N,) bool mask of the rows whose credit is defined (every row when no mask was given)."""
        if self.defined is None:
            return torch.ones_like(self.all, dtype=torch.bool)
        return self.defined


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


def _check_kernel_rows(kernel_rows: torch.Tensor | None, N: int) -> torch.Tensor:
    if kernel_rows is None:
        return torch.ones(N, dtype=torch.bool)
    if not isinstance(kernel_rows, torch.Tensor) or kernel_rows.dtype != torch.bool or kernel_rows.shape != (N,):
        got = (tuple(kernel_rows.shape), kernel_rows.dtype) if isinstance(kernel_rows, torch.Tensor) else kernel_rows
        raise ValueError(f"kernel_rows must be a bool tensor of shape ({N},) (one flag per gathered row), got {got}")
    return kernel_rows.detach().cpu()


def credits_for_local_rows(
    per_process_embeddings: Sequence[torch.Tensor],
    process_index: int,
    group_size: int,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
    dtype: torch.dtype = torch.float64,
    kernel_rows: torch.Tensor | None = None,
) -> BatchCredits:
    """s_i = D(Omega) - D(Omega \\ {o_i}) (eq. 5, Lemma D.1 closed form) for the rows of process ``process_index``.

    ``per_process_embeddings[p]`` is the (B_local, d) embedding tensor of process p (what ``gather`` concatenates).
    ``kernel_rows`` (N,) bool: rows allowed into their group's kernel (None: all); Omega is then a group's allowed rows.
    """
    B_local, N = _check_layout(per_process_embeddings, process_index, group_size)
    allowed = _check_kernel_rows(kernel_rows, N)
    gathered = torch.cat([e.to(dtype) for e in per_process_embeddings], dim=0)
    n_groups = N // group_size
    if bool(allowed.all()):  # the common case: one batched call
        credits, diversity = group_credits(gathered, group_size, clamp=clamp, shaping=shaping, return_diversity=True)
        local = credits[process_index * B_local : (process_index + 1) * B_local]
        return BatchCredits(local=local, all=credits, diversity=diversity, defined=allowed)
    credits = torch.zeros(N, dtype=dtype, device=gathered.device)
    diversity = torch.full((n_groups,), float("nan"), dtype=dtype, device=gathered.device)
    per_group = allowed.reshape(n_groups, group_size)
    counts = per_group.sum(1)
    defined = torch.zeros(N, dtype=torch.bool)
    for c in sorted({int(c) for c in counts.tolist() if c >= 3}):  # groups with c allowed rows, batched together
        groups = (counts == c).nonzero().flatten()
        members = per_group[groups].nonzero()[:, 1].reshape(-1, c)  # row-major: each group's rows in order
        rows = groups.unsqueeze(1) * group_size + members  # (n, c) gathered-row indices
        s, d = group_credits(gathered[rows.to(gathered.device)], c, clamp=clamp, shaping=shaping, return_diversity=True)
        credits[rows.flatten().to(gathered.device)] = s.flatten()
        diversity[groups.to(gathered.device)] = d
        defined[rows.flatten()] = True
    local = credits[process_index * B_local : (process_index + 1) * B_local]
    return BatchCredits(local=local, all=credits, diversity=diversity, defined=defined)
