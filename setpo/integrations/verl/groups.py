"""Pure functions behind the verl adapter: group rows by uid, SetPO credits per group, broadcast onto tokens.

Nothing here imports verl. A verl batch is a flat list of rows; the rollouts of one prompt share a ``uid``
and may sit anywhere in the batch (verl reorders rows to balance sequence lengths), and groups may differ
in size (failed rollouts, padding rows, filtered groups).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
import torch

from setpo.core import ShapingSpec, SmallGroupPolicy, group_credits, setpo_advantages
from setpo.core._checks import as_float_tensor, check_finite
from setpo.core.credits import check_small_group_policy
from setpo.core.kernels import ZeroNormPolicy


def _as_uid_list(uids: Sequence[Hashable], n: int | None = None) -> list:
    out = uids.tolist() if hasattr(uids, "tolist") else list(uids)
    if n is not None and len(out) != n:
        raise ValueError(f"got {len(out)} uids for {n} rows")
    for i, u in enumerate(out):
        if u is None or (isinstance(u, float) and math.isnan(u)):
            raise ValueError(f"row {i} has no uid ({u!r}); every rollout needs the uid of its prompt")
        try:
            hash(u)
        except TypeError:
            raise ValueError(f"row {i} has an unhashable uid of type {type(u).__name__}") from None
    return out


def _as_active(active: Sequence[bool] | None, n: int) -> np.ndarray:
    if active is None:
        return np.ones(n, dtype=bool)
    a = np.asarray(active)
    if a.shape != (n,) or a.dtype != bool:
        raise ValueError(f"active must be a boolean array of shape ({n},), got dtype {a.dtype} shape {a.shape}")
    return a


def group_rows_by_uid(uids: Sequence[Hashable], active: Sequence[bool] | None = None) -> list[np.ndarray]:
    """Row indices of each uid group (groups by first appearance, rows in batch order); inactive rows are left out."""
    uid_list = _as_uid_list(uids)
    keep = _as_active(active, len(uid_list))
    groups: dict[Hashable, list[int]] = {}
    for i, u in enumerate(uid_list):
        if keep[i]:
            groups.setdefault(u, []).append(i)
    return [np.asarray(rows, dtype=np.int64) for rows in groups.values()]


def session_final_rows(batch_keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """For verl V1 keys ``{uid}_{session_id}_{index}``: the row of each session's last output, and per row its session.

    Returns ``(final_rows, row_to_session)``: ``final_rows[k]`` is the row holding the highest ``index`` of
    session k (sessions by first appearance) and ``row_to_session[r]`` is the session of row r. A single-turn
    rollout is one session with one row. This mirrors verl's ``compute_advantage_for_multi_trajectories``,
    which scores a multi-output session by its final output and broadcasts the result to its other rows.
    """
    final: dict[str, tuple[int, int]] = {}
    row_session: list[str] = []
    for row, key in enumerate(batch_keys):
        if not isinstance(key, str):
            raise ValueError(f"batch key {row} is {type(key).__name__}, expected a '{{uid}}_{{session}}_{{index}}' str")
        parts = key.rsplit("_", 2)
        if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
            raise ValueError(f"batch key {key!r} is not of the form '{{uid}}_{{session}}_{{index}}'")
        session, index = f"{parts[0]}_{parts[1]}", int(parts[2])
        row_session.append(session)
        if session not in final or final[session][0] < index:
            final[session] = (index, row)
    position = {s: k for k, s in enumerate(final)}
    final_rows = np.asarray([row for _, row in final.values()], dtype=np.int64)
    return final_rows, np.asarray([position[s] for s in row_session], dtype=np.int64)


def _small_group_error(uid: Hashable, size: int) -> ValueError:
    return ValueError(
        f"uid group {uid!r} has {size} rollout(s); the SetPO leave-one-out credit needs at least 3 "
        "(set setpo.small_group=zero to give such groups a zero credit)"
    )


def _check_embeddings(embeddings, n: int) -> torch.Tensor:
    e = as_float_tensor(embeddings, "embeddings")
    if e.dim() != 2 or e.shape[0] != n:
        raise ValueError(f"embeddings must have shape ({n}, d), got {tuple(e.shape)}")
    check_finite(e, "embeddings")
    return e.to(torch.float64)


def credits_by_uid(
    embeddings,
    uids: Sequence[Hashable],
    g: ShapingSpec = "neglog1p",
    small_group: SmallGroupPolicy = "zero",
    active: Sequence[bool] | None = None,
    on_zero_norm: ZeroNormPolicy = "isolate",
) -> torch.Tensor:
    """Per-row SetPO credit s_i = D(Omega) - D(Omega \\ {o_i}) (paper eq. 5) within each uid group; (N, d) -> (N,).

    Groups of equal size are stacked and go through ``setpo.group_credits`` (cosine kernel, Lemma D.1) as one
    batch. Inactive rows (padding) and, with ``small_group="zero"``, groups of fewer
    than 3 rows get credit 0. Float64 throughout.
    """
    uid_list = _as_uid_list(uids)
    e = _check_embeddings(embeddings, len(uid_list))
    check_small_group_policy(small_group, "small_group")
    credits = torch.zeros(len(uid_list), dtype=torch.float64, device=e.device)
    by_size: dict[int, list[np.ndarray]] = {}
    for rows in group_rows_by_uid(uid_list, active):
        if len(rows) < 3:
            if small_group == "raise":
                raise _small_group_error(uid_list[rows[0]], len(rows))
            continue
        by_size.setdefault(len(rows), []).append(rows)
    for groups in by_size.values():
        idx = torch.as_tensor(np.stack(groups), device=e.device)  # (n_groups, G)
        credits[idx.reshape(-1)] = group_credits(e[idx], idx.shape[1], shaping=g, on_zero_norm=on_zero_norm).reshape(-1)
    return credits


def add_credits_to_token_advantages(token_advantages, response_mask, credits, lam: float) -> torch.Tensor:
    """A_hat = A_bar + lambda * s (paper eq. 6) on verl's token layout: row credit s_i broadcast over the response mask.

    verl's outcome estimators write A_bar_i * mask[i, t]; the result is (A_bar_i + lambda s_i) * mask[i, t],
    in the dtype of `token_advantages`. With lambda = 0 it equals `token_advantages` exactly.
    """
    adv = as_float_tensor(token_advantages, "token_advantages")
    mask = torch.as_tensor(response_mask)
    if adv.dim() != 2 or mask.shape != adv.shape:
        raise ValueError(
            f"token_advantages and response_mask must both be (N, T), got {tuple(adv.shape)} and {tuple(mask.shape)}"
        )
    s = as_float_tensor(credits, "credits")
    if s.shape != (adv.shape[0],):
        raise ValueError(f"credits must have shape ({adv.shape[0]},), got {tuple(s.shape)}")
    check_finite(s, "credits")
    token_credit = s.to(device=adv.device, dtype=adv.dtype).unsqueeze(-1) * mask.to(device=adv.device, dtype=adv.dtype)
    return setpo_advantages(adv, token_credit, lam)


def credit_metrics(credits: torch.Tensor, groups: list[np.ndarray], prefix: str = "setpo") -> dict[str, float]:
    """Summary numbers for logging: mean/std/min/max credit over rows of scored groups, group counts."""
    scored = [rows for rows in groups if len(rows) >= 3]
    out = {f"{prefix}/num_groups": float(len(groups)), f"{prefix}/num_small_groups": float(len(groups) - len(scored))}
    if scored:
        s = credits[torch.as_tensor(np.concatenate(scored))].double()
        out.update(
            {
                f"{prefix}/credit_mean": float(s.mean()),
                f"{prefix}/credit_std": float(s.std()) if s.numel() > 1 else 0.0,
                f"{prefix}/credit_min": float(s.min()),
                f"{prefix}/credit_max": float(s.max()),
            }
        )
    return out
