"""V1 trainer mode ``setpo_sync``: verl's sync PPO trainer whose ``_compute_advantage`` adds lambda * s per uid group.

verl computes the base advantage (GRPO for GRPO / GSPO / DAPO runs) and writes it to the TransferQueue; this
trainer then reads ``uid``, ``responses``, ``response_mask`` and ``advantages`` back, decodes the responses
with the tokenizer, embeds them, computes the leave-one-out credits of each uid group with the core and writes
A_bar + lambda * s back (broadcast over the response mask, the layout verl's outcome estimators use).
``returns`` are left as verl wrote them: the actor loss reads only ``advantages``.

``+setpo.method=NAME`` selects another diversity method instead of the credit (``setpo.methods``). A "reward" method
(DRA-GRPO, DARLING, DIVER, DQO) maps each final output's sequence score R to R~ within its uid group; R~ - R is
added to the last response token of ``rm_scores`` for verl's own advantage step (KL in reward, rollout correction,
GRPO by uid, multi-output sessions), after which the original ``rm_scores`` are written back. A method with
``group_scale="none"`` (DARLING) runs that step with ``norm_adv_by_std_in_grpo=False``. An "advantage" method
(pass@k) maps verl's per-row advantages after the step and writes them back broadcast over the response mask.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from omegaconf import open_dict
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from setpo.core.controls import placebo_permutation, ratio_lambda
from setpo.embedders import Embedder
from setpo.integrations.verl.config import ANSWER_EXTRACTORS, SetPOVerlConfig
from setpo.integrations.verl.embedding import decode_responses, embed_texts, embedder_from_config
from setpo.integrations.verl.groups import (
    add_credits_to_token_advantages,
    credit_metrics,
    credits_by_uid,
    group_rows_by_uid,
    session_final_rows,
)
from setpo.methods import GroupBatch

SETPO_FIELDS = ["uid", "responses", "response_mask", "advantages"]
METHOD_FIELDS = ["uid", "responses", "response_mask", "rm_scores"]
#: Base estimators the SetPO mode refuses; any group-relative outcome estimator (GRPO, RLOO, ...) works.
INCOMPATIBLE_ESTIMATORS = {
    "gae": "it needs a critic and returns value targets",
    "setpo": "there is no such estimator (verl 0.9.1 never passes the responses to one)",
}


def _as_list(values: Any) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def check_base_estimator(adv_estimator: Any) -> str:
    """The base estimator name, or a ValueError when the SetPO trainer mode cannot sit on top of it."""
    name = getattr(adv_estimator, "value", adv_estimator)
    if name in INCOMPATIBLE_ESTIMATORS:
        raise ValueError(
            f"trainer.v1.trainer_mode=setpo_sync cannot use algorithm.adv_estimator={name}: "
            f"{INCOMPATIBLE_ESTIMATORS[name]}; use grpo (GRPO / GSPO / DAPO runs)"
        )
    return str(name)


def shape_advantages(
    data: TensorDict,
    batch_keys: list[str],
    tags: list[dict],
    tokenizer: Any,
    embedder: Embedder,
    cfg: SetPOVerlConfig,
    step: int = 0,
    last_lambda: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """A_bar + lambda * s on one batch as read from the TransferQueue (nested jagged fields).

    Returns the new advantages as a jagged nested tensor (the layout to write back) and logging metrics
    (``setpo/lambda`` is the lambda used). Rows tagged ``is_padding`` (verl's batch-size padding) get no credit and
    do not join any group. ``cfg.placebo`` permutes the credits across uid groups (seeded by ``cfg.seed`` and
    ``step``); ``cfg.target_ratio`` sets lambda from this batch (``last_lambda`` when the batch gives no ratio).
    """
    response_mask = data["response_mask"]
    n = len(batch_keys)
    if response_mask.size(0) != n or len(tags) != n:
        raise ValueError(f"batch has {n} keys, {len(tags)} tags and {response_mask.size(0)} rows")
    mask = response_mask.to_padded_tensor(0)
    advantages = data["advantages"].to_padded_tensor(0.0)
    responses_nt = data["responses"]
    lengths = responses_nt.offsets().diff()
    pad_id = getattr(tokenizer, "pad_token_id", None)
    responses = responses_nt.to_padded_tensor(0 if pad_id is None else pad_id)
    uids = _as_list(data["uid"])

    final_rows, row_to_session = session_final_rows(batch_keys)
    # the final output of every real (non-padding) session is what gets embedded and scored
    rows = np.asarray([r for r in final_rows if not tags[r].get("is_padding", False)], dtype=np.int64)
    row_uids = [uids[r] for r in rows]
    texts = decode_responses(tokenizer, responses[rows], lengths[rows], cfg.skip_special_tokens)

    t0 = time.perf_counter()
    emb = embed_texts(embedder, texts)
    t1 = time.perf_counter()
    credits = credits_by_uid(emb, row_uids, g=cfg.shaping, small_group=cfg.small_group)
    if cfg.placebo:
        group_ids = torch.as_tensor([list(dict.fromkeys(row_uids)).index(u) for u in row_uids])
        generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        credits = credits[placebo_permutation(group_ids, generator)]
    lam = cfg.lam
    if cfg.target_ratio is not None:
        # outcome estimators broadcast one A_bar per row over its response tokens
        row_mask = mask[torch.as_tensor(rows)].double()
        base = (advantages[torch.as_tensor(rows)].double() * row_mask).sum(-1) / row_mask.sum(-1).clamp_min(1)
        found = ratio_lambda(credits, base, cfg.target_ratio)
        lam = last_lambda if found is None else found
    t2 = time.perf_counter()
    by_row = torch.zeros(n, dtype=torch.float64)
    by_row[torch.as_tensor(rows)] = credits
    row_credits = by_row[torch.as_tensor(final_rows)][torch.as_tensor(row_to_session)]
    shaped = add_credits_to_token_advantages(advantages, mask, row_credits, lam)

    metrics = credit_metrics(credits, group_rows_by_uid(row_uids))
    metrics["setpo/lambda"] = float(lam)
    metrics["setpo/placebo"] = float(cfg.placebo)
    metrics["timing_s/setpo_embed"] = t1 - t0
    metrics["timing_s/setpo_credit"] = t2 - t1
    return response_to_nested(shaped, response_mask), metrics


def method_by_uid(
    cfg: SetPOVerlConfig,
    uids: list,
    scores: torch.Tensor,
    texts: list[str] | None,
    embed,
    base: torch.Tensor | None = None,
) -> torch.Tensor:
    """The method's per-row values (new scores, or advantages given ``base``) of rows grouped by uid; (N,) float64.

    Groups of equal size are stacked into one `GroupBatch` (B groups x G rows) holding only the inputs the method
    reads: texts, answers (``cfg.answer_extractor``), embeddings (``embed(texts)``), correct (score >
    ``cfg.correct_threshold``).
    """
    method, params = cfg.diversity_method, cfg.method_params
    needs = method.required_inputs(**params)
    groups = group_rows_by_uid(uids)
    by_size: dict[int, list[np.ndarray]] = {}
    for rows in groups:
        by_size.setdefault(len(rows), []).append(rows)
    if params.get("scope") == "batch" and len(by_size) > 1:
        raise ValueError(f"{cfg.method} with scope='batch' needs uid groups of one size, got sizes {sorted(by_size)}")
    emb = embed(texts) if "embeddings" in needs else None
    out = torch.zeros(len(uids), dtype=torch.float64)
    for size, gs in by_size.items():
        idx = np.concatenate(gs)
        fields: dict[str, Any] = {}
        if "texts" in needs:
            fields["texts"] = [texts[i] for i in idx]
        if "answers" in needs:
            fields["answers"] = [ANSWER_EXTRACTORS[cfg.answer_extractor](texts[i]) for i in idx]
        if emb is not None:
            fields["embeddings"] = emb[torch.as_tensor(idx)]
        if "correct" in needs:
            fields["correct"] = scores[torch.as_tensor(idx)] > cfg.correct_threshold
        batch = GroupBatch.from_rows(scores[torch.as_tensor(idx)].double(), size, **fields)
        adv = None if base is None else base[torch.as_tensor(idx)].double().view(-1, size)
        out[torch.as_tensor(idx)] = method(batch, adv, **params).reshape(-1).double()
    return out


def _final_real_rows(batch_keys: list[str], tags: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows scored: each real session's final output, all final rows, row -> session), as the credit uses them."""
    final_rows, row_to_session = session_final_rows(batch_keys)
    rows = np.asarray([r for r in final_rows if not tags[r].get("is_padding", False)], dtype=np.int64)
    return rows, final_rows, row_to_session


@register_trainer("setpo_sync")
class SetPOTrainerSync(PPOTrainerSync):
    """verl's sync trainer plus the SetPO credit (settings from the config's top-level ``setpo`` section)."""

    def __init__(self, config):
        super().__init__(config)
        self._init_setpo()

    def _build_replay_buffer(self):
        # verl's base trainer branches on trainer_mode == "sync" (replay buffer class, prompt refills,
        # checkpoint restore, batch submission); this mode is the sync trainer plus the credit, so it must
        # take the sync branches. _build_replay_buffer is the first call after __init__ reads the mode.
        self.trainer_mode = "sync"
        return super()._build_replay_buffer()

    def _init_setpo(self) -> None:
        """Read the ``setpo`` section and build the embedder now (lambda > 0), before verl loads any model.

        A wrong embedder name, a missing package or a GPU this process cannot see then fails at start-up,
        not at the first advantage step after model loading and a rollout.
        """
        self.setpo_config = SetPOVerlConfig.from_mapping(self.config.get("setpo"))
        check_base_estimator(self.config.algorithm.adv_estimator)
        self._setpo_embedder: Embedder | None = None
        self._setpo_last_lambda = 0.0
        if self.setpo_config.needs_embedder:
            self._setpo_embedder = embedder_from_config(self.setpo_config)

    @property
    def setpo_embedder(self) -> Embedder:
        """Built at init (lambda > 0) or on first use, in this (trainer) process, on ``setpo.embed_device``."""
        if self._setpo_embedder is None:
            self._setpo_embedder = embedder_from_config(self.setpo_config)
        return self._setpo_embedder

    def _method_texts(self, data: TensorDict, rows: np.ndarray) -> list[str] | None:
        needs = self.setpo_config.diversity_method.required_inputs(**self.setpo_config.method_params)
        if not needs & {"texts", "answers", "embeddings"}:
            return None
        responses_nt = data["responses"]
        pad_id = getattr(self.tokenizer, "pad_token_id", None)
        responses = responses_nt.to_padded_tensor(0 if pad_id is None else pad_id)
        lengths = responses_nt.offsets().diff()
        return decode_responses(self.tokenizer, responses[rows], lengths[rows], self.setpo_config.skip_special_tokens)

    def _reward_method_advantage(self, batch, metrics: dict):
        """verl's advantage step on scores R~ from the method, then the original ``rm_scores`` written back."""
        cfg = self.setpo_config
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=METHOD_FIELDS)
        original = data["rm_scores"]
        scores = original.to_padded_tensor(0.0)
        lengths = original.offsets().diff()
        seq = scores.double().sum(-1)
        rows, _, _ = _final_real_rows(batch.keys, batch.tags)
        uids = _as_list(data["uid"])
        texts = self._method_texts(data, rows)
        new = method_by_uid(
            cfg, [uids[r] for r in rows], seq[rows], texts, lambda t: embed_texts(self.setpo_embedder, t)
        )
        delta = torch.zeros(len(batch.keys), dtype=torch.float64)
        delta[torch.as_tensor(rows)] = new - seq[rows]
        changed = scores.clone()
        last = (lengths - 1).clamp_min(0)
        changed[torch.arange(len(batch.keys)), last] += delta.to(changed.dtype)
        nested = torch.nested.as_nested_tensor(
            [changed[i, : int(n)] for i, n in enumerate(lengths)], layout=torch.jagged
        )
        tq.kv_batch_put(
            keys=batch.keys,
            partition_id=batch.partition_id,
            fields=TensorDict({"rm_scores": nested}, batch_size=len(batch)),
        )
        algorithm = self.config.algorithm
        norm = algorithm.get("norm_adv_by_std_in_grpo", True)
        try:
            if cfg.diversity_method.group_scale == "none":
                with open_dict(algorithm):
                    algorithm.norm_adv_by_std_in_grpo = False
            batch = super()._compute_advantage(batch, metrics)
        finally:
            with open_dict(algorithm):
                algorithm.norm_adv_by_std_in_grpo = norm
            tq.kv_batch_put(
                keys=batch.keys,
                partition_id=batch.partition_id,
                fields=TensorDict({"rm_scores": original}, batch_size=len(batch)),
            )
        metrics[f"method/{cfg.method}/reward_delta"] = float(delta[torch.as_tensor(rows)].abs().mean())
        return batch

    def _advantage_method(self, batch, metrics: dict):
        """The method's advantages from verl's per-row advantages, broadcast over each row's response mask."""
        cfg = self.setpo_config
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=[*METHOD_FIELDS, "advantages"]
        )
        response_mask = data["response_mask"]
        mask = response_mask.to_padded_tensor(0)
        advantages = data["advantages"].to_padded_tensor(0.0)
        seq = data["rm_scores"].to_padded_tensor(0.0).double().sum(-1)
        m = mask.double()
        base = (advantages.double() * m).sum(-1) / m.sum(-1).clamp_min(1)  # outcome estimators: one value per row
        rows, final_rows, row_to_session = _final_real_rows(batch.keys, batch.tags)
        uids = _as_list(data["uid"])
        texts = self._method_texts(data, rows)
        idx = torch.as_tensor(rows)
        new = method_by_uid(
            cfg, [uids[r] for r in rows], seq[idx], texts, lambda t: embed_texts(self.setpo_embedder, t), base[idx]
        )
        by_row = base.clone()
        by_row[idx] = new
        row_values = by_row[torch.as_tensor(final_rows)][torch.as_tensor(row_to_session)]
        padding = torch.as_tensor([t.get("is_padding", False) for t in batch.tags])
        shaped = torch.where(padding.unsqueeze(-1), advantages, (row_values.unsqueeze(-1) * m).to(advantages.dtype))
        metrics[f"method/{cfg.method}/advantage_delta"] = float((new - base[idx]).abs().mean())
        return tq.kv_batch_put(
            keys=batch.keys,
            partition_id=batch.partition_id,
            fields=TensorDict({"advantages": response_to_nested(shaped, response_mask)}, batch_size=len(batch)),
        )

    def _compute_advantage(self, batch, metrics: dict):
        method = self.setpo_config.diversity_method
        if method is not None and method.entry == "reward":
            return self._reward_method_advantage(batch, metrics)
        batch = super()._compute_advantage(batch, metrics)
        if method is not None:
            return self._advantage_method(batch, metrics)
        if not self.setpo_config.enabled:
            return batch
        t0 = time.perf_counter()
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=SETPO_FIELDS)
        shaped, setpo_metrics = shape_advantages(
            data,
            batch.keys,
            batch.tags,
            self.tokenizer,
            self.setpo_embedder,
            self.setpo_config,
            step=int(getattr(self, "global_steps", 0) or 0),
            last_lambda=self._setpo_last_lambda,
        )
        self._setpo_last_lambda = setpo_metrics["setpo/lambda"]
        batch = tq.kv_batch_put(
            keys=batch.keys,
            partition_id=batch.partition_id,
            fields=TensorDict({"advantages": shaped}, batch_size=len(batch)),
        )
        setpo_metrics["timing_s/setpo"] = time.perf_counter() - t0
        metrics.update(setpo_metrics)
        return batch
