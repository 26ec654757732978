"""Controls for SetPO experiments: the cross-group placebo, lambda set as a shaping ratio, and lambda warm-up.

Pure torch on flat per-row tensors of one gathered batch; the trainers decide which rows take part.
"""

from __future__ import annotations

import numbers

import torch

from setpo._validate import as_float_tensor, check_finite, check_int, check_real
from setpo.core._checks import compute_dtype


def _check_group_ids(group_ids) -> torch.Tensor:
    if not isinstance(group_ids, torch.Tensor):
        raise TypeError(f"group_ids must be a 1-D integer torch.Tensor, got {type(group_ids).__name__}")
    if group_ids.dim() != 1 or torch.is_floating_point(group_ids) or group_ids.is_complex():
        shape = tuple(group_ids.shape)
        raise ValueError(f"group_ids must be a 1-D integer tensor, got shape {shape} and dtype {group_ids.dtype}")
    return group_ids.detach().to("cpu", torch.long)


def placebo_permutation(
    group_ids: torch.Tensor, generator: torch.Generator | None = None, mixing_sweeps: int = 8
) -> torch.Tensor:
    """Random permutation p with group_ids[p[i]] != group_ids[i] for all i: the placebo credit s'_i = s_{p[i]}.

    Built as a shift of the rows laid out group by group (random group order, random order inside each group)
    by the largest group's size, which moves every row out of its own group, then mixed by ``mixing_sweeps * N``
    random swaps and 3-cycles of sources that keep the constraint (a symmetric Metropolis walk over the allowed
    permutations).
    The result depends only on ``group_ids`` and the generator's state, so equal seeds give equal permutations
    on every process. Raises ValueError when fewer than two groups are present or one group holds more than half
    of the rows (no such permutation exists then). Returns a (N,) int64 tensor on the CPU.
    """
    gid = _check_group_ids(group_ids)
    check_int(mixing_sweeps, "mixing_sweeps", minimum=0)
    n = gid.numel()
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    groups, inverse, counts = torch.unique(gid, return_inverse=True, return_counts=True)
    if groups.numel() < 2:
        raise ValueError(
            f"the placebo needs rows from at least 2 groups to move credits across groups; all {n} rows are in "
            f"group {int(groups[0])}"
        )
    largest = int(counts.max())
    if 2 * largest > n:
        raise ValueError(
            f"no cross-group permutation exists: one group holds {largest} of the {n} rows (more than half)"
        )
    order_of_groups = torch.randperm(groups.numel(), generator=generator)
    row_order = torch.randperm(n, generator=generator)  # random order inside each group after the stable sort
    rank_of_group = torch.empty_like(order_of_groups)
    rank_of_group[order_of_groups] = torch.arange(groups.numel())
    key = rank_of_group[inverse[row_order]]
    layout = row_order[torch.sort(key, stable=True).indices]  # rows contiguous by group
    perm = torch.empty(n, dtype=torch.long)
    perm[layout] = layout.roll(-largest)  # row at layout position k takes the row at position k + largest
    # A block of c <= largest <= n / 2 positions shifted by `largest` never overlaps itself.
    g = inverse.tolist()
    p = perm.tolist()
    # Swaps alone cannot change how many rows of group A draw from group B; 3-cycles can.
    moves = torch.randint(n, (mixing_sweeps * n, 3), generator=generator).tolist()
    for step, (i, j, k) in enumerate(moves):
        if step % 2 == 0:
            pi, pj = p[i], p[j]
            if g[pj] != g[i] and g[pi] != g[j]:
                p[i], p[j] = pj, pi
        elif i != j != k != i:
            pi, pj, pk = p[i], p[j], p[k]
            if g[pj] != g[i] and g[pk] != g[j] and g[pi] != g[k]:
                p[i], p[j], p[k] = pj, pk, pi
    return torch.tensor(p, dtype=torch.long)


def ratio_lambda(credits, base_advantages, target: float) -> float | None:
    """lambda = target * mean|A_bar| / mean|s|, so that mean|lambda s| / mean|A_bar| = target (eq. 6's shaping ratio).

    Means run over the rows given (the rows whose credit is defined). Returns None when the ratio cannot be set from
    this batch: mean|A_bar| is 0, or mean|s| is at rounding level (<= `credit_noise_floor` of the credits' dtype),
    as when every group's rollouts are alike and every credit is 0 up to rounding; dividing by that noise would give
    a lambda of order 1e14. Computed in float64.
    """
    s_given = as_float_tensor(credits, "credits")
    s = s_given.detach().double()
    a = as_float_tensor(base_advantages, "base_advantages").detach().double()
    if s.shape != a.shape:
        raise ValueError(f"credits shape {tuple(s.shape)} and base_advantages shape {tuple(a.shape)} differ")
    check_finite(s, "credits")
    check_finite(a, "base_advantages")
    check_real(target, "target ratio", minimum=0, strict=True, kind=numbers.Real)
    if s.numel() == 0:
        return None
    mean_s = float(s.abs().mean().cpu())
    mean_a = float(a.abs().mean().cpu())
    if mean_s <= credit_noise_floor(s_given.dtype) or mean_a == 0.0:
        return None
    return float(target) * mean_a / mean_s


def credit_noise_floor(dtype: torch.dtype) -> float:
    """64 ulps of 1 in the credits' compute dtype: credits (differences of D values of order 1) under it are noise."""
    return 64 * torch.finfo(compute_dtype(dtype)).eps


def warmup_factor(step: int, warmup_steps: int) -> float:
    """w(t) = min(1, t / T) for T > 0 warm-up steps (1 when T = 0): the linear warm-up lambda_t = w(t) * lambda."""
    check_int(step, "step", minimum=0, kind=numbers.Integral)
    check_int(warmup_steps, "warmup_steps", minimum=0, kind=numbers.Integral)
    if warmup_steps == 0:
        return 1.0
    return min(1.0, int(step) / int(warmup_steps))


def controlled_advantages(
    base_advantages: torch.Tensor,
    term: torch.Tensor,
    acting: torch.Tensor,
    lam: float,
    *,
    target_ratio: float | None = None,
    warmup: float = 1.0,
    placebo: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float]:
    """A_hat_i = A_bar_i + lambda_t * u_i (eq. 6, u the unit term; SetPO: u = s), and the lambda before warm-up.

    ``term`` u (N,) is the method's ``A - A_bar`` at unit weight; ``acting`` (N,) bool the rows it acts on (u is 0
    elsewhere, whatever was given). In order: ``placebo`` (a permutation from `placebo_permutation`) gives row i
    the term of row placebo[i], rows outside ``acting`` keeping 0; ``target_ratio`` replaces ``lam`` by
    `ratio_lambda` over the acting rows (``lam`` is kept when the batch gives no ratio: pass the last value);
    ``warmup`` multiplies it
    (`warmup_factor`). The sum is formed in ``base_advantages``' dtype.
    """
    a = as_float_tensor(base_advantages, "base_advantages")
    u = as_float_tensor(term, "term")
    if u.shape != a.shape or tuple(acting.shape) != tuple(a.shape) or a.dim() != 1:
        raise ValueError(
            f"base_advantages, term and acting must share one (N,) shape: {a.shape}, {u.shape}, {acting.shape}"
        )
    acting = acting.to(device=u.device, dtype=torch.bool)
    u = u.masked_fill(~acting, 0.0)
    if placebo is not None:
        u = u[placebo.to(u.device)].masked_fill(~acting, 0.0)
    if target_ratio is not None:
        found = ratio_lambda(u[acting], a[acting.to(a.device)], target_ratio)
        lam = lam if found is None else found
    lam_t = float(lam) * float(warmup)
    return a + lam_t * u.to(device=a.device, dtype=a.dtype), float(lam)
