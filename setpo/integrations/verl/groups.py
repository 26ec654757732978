"""Pure functions behind the verl adapter: group rows by uid, final outputs of sessions, a method per uid group.

Nothing here imports verl. A verl batch is a flat list of rows; the rollouts of one prompt share a ``uid``
and may sit anywhere in the batch (verl reorders rows to balance sequence lengths), and groups may differ
in size (failed rollouts, padding rows, filtered groups).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch

from setpo.integrations.verl.config import ANSWER_EXTRACTORS, SetPOVerlConfig
from setpo.methods import GroupBatch


def _as_uid_list(uids: Sequence[Hashable]) -> list:
    out = uids.tolist() if hasattr(uids, "tolist") else list(uids)
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


def credit_metrics(
    credits: torch.Tensor, groups: list[np.ndarray], min_group: int = 3, prefix: str = "setpo"
) -> dict[str, float]:
    """Summary numbers for logging: mean/std/min/max of the method's term over rows of groups of at least
    ``min_group`` rows (the groups it acts on; SetPO: 3), group counts."""
    scored = [rows for rows in groups if len(rows) >= min_group]
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


def method_by_uid(
    cfg: SetPOVerlConfig,
    uids: list,
    scores: torch.Tensor,
    texts: list[str] | None,
    embed,
    base: torch.Tensor | None = None,
    params: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, acting): the method's per-row values (new scores, or advantages given ``base``) of rows grouped by uid,
    (N,) float64, and the rows it acted on (N,) bool.

    Groups of equal size are stacked into one `GroupBatch` (B groups x G rows) holding only the inputs the method
    reads: texts, answers (``cfg.answer_extractor``), embeddings (``embed(texts)``), correct (score >
    ``cfg.correct_threshold``). A group smaller than the method's ``min_group`` keeps its score / A_bar
    (``cfg.small_group="zero"``) or stops the step (``"raise"``). ``params``: the method's parameters (default
    ``cfg.method_params``).
    """
    method = cfg.diversity_method
    params = cfg.method_params if params is None else params
    needs = method.required_inputs(**params)
    by_size = _groups_by_size(cfg, uids)
    if params.get("scope") == "batch" and len(by_size) > 1:
        raise ValueError(f"{cfg.method} with scope='batch' needs uid groups of one size, got sizes {sorted(by_size)}")
    out = (scores if base is None else base).double().clone()
    acting = torch.zeros(len(uids), dtype=torch.bool)
    if not by_size:
        return out, acting
    emb = embed(texts) if "embeddings" in needs else None
    for size, gs in by_size.items():
        idx = np.concatenate(gs)
        fields = _batch_fields(cfg, needs, idx, scores, texts, emb)
        batch = GroupBatch.from_rows(scores[torch.as_tensor(idx)].double(), size, **fields)
        adv = None if base is None else base[torch.as_tensor(idx)].double().view(-1, size)
        out[torch.as_tensor(idx)] = method(batch, adv, **params).reshape(-1).double()
        acting[torch.as_tensor(idx)] = True
    return out, acting


def _groups_by_size(cfg: SetPOVerlConfig, uids: list) -> dict[int, list[np.ndarray]]:
    """The uid groups' rows by group size, groups under the method's ``min_group`` left out (or refused)."""
    min_group = cfg.diversity_method.min_group
    by_size: dict[int, list[np.ndarray]] = {}
    for rows in group_rows_by_uid(uids):
        if len(rows) < min_group:
            if cfg.small_group == "raise":
                raise ValueError(
                    f"uid group {uids[rows[0]]!r} has {len(rows)} rollout(s); setpo.method={cfg.method} needs at "
                    f"least {min_group} (set setpo.small_group=zero to keep A_bar for such groups)"
                )
            continue
        by_size.setdefault(len(rows), []).append(rows)
    return by_size


def _batch_fields(
    cfg: SetPOVerlConfig, needs: frozenset, idx: np.ndarray, scores: torch.Tensor, texts: list[str] | None, emb
) -> dict[str, Any]:
    """The `GroupBatch` inputs the method reads, for rows `idx`."""
    fields: dict[str, Any] = {}
    if "texts" in needs:
        fields["texts"] = [texts[i] for i in idx]
    if "answers" in needs:
        fields["answers"] = [ANSWER_EXTRACTORS[cfg.answer_extractor](texts[i]) for i in idx]
    if emb is not None:
        fields["embeddings"] = emb[torch.as_tensor(idx)]
    if "correct" in needs:
        fields["correct"] = scores[torch.as_tensor(idx)] > cfg.correct_threshold
    return fields
