"""V1 trainer mode ``setpo_sync``: verl's sync PPO trainer whose ``_compute_advantage`` runs one registered method.

The method (``+setpo.method=NAME``, SetPO by default: A_bar + lambda s per uid group, eq. 6) is dispatched through
``setpo.methods`` like every other. An "advantage" method (SetPO, pass@k) runs after verl's own advantage step
(GRPO for GRPO / GSPO / DAPO runs): the trainer reads ``uid``, ``responses``, ``response_mask``, ``rm_scores`` and
``advantages`` back from the TransferQueue, decodes the responses, builds one `GroupBatch` per group size (uid
groups may differ in size) with the inputs the method declares, calls the method at unit weight, applies the
experiment controls of `setpo.core.controls` (weight, target ratio, placebo) to its term u = A - A_bar, and writes
the result back broadcast over the response mask (the layout verl's outcome estimators use). A "reward" method
(DRA-GRPO, DARLING, DIVER, DQO) maps each final output's sequence score R to R~ within its uid group; R~ - R is
added to the last response token of ``rm_scores`` for verl's own advantage step (KL in reward, rollout correction,
GRPO by uid, multi-output sessions), after which the original ``rm_scores`` are written back; a method with
``group_scale="none"`` (DARLING) runs that step with ``norm_adv_by_std_in_grpo=False``. ``returns`` are left as
verl wrote them: the actor loss reads only ``advantages``.
"""

from __future__ import annotations

import logging
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

from setpo.core.controls import controlled_advantages, placebo_permutation
from setpo.embedders import Embedder, embed_texts
from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.embedding import decode_responses, embedder_from_config, release_cached_memory
from setpo.integrations.verl.groups import credit_metrics, group_rows_by_uid, method_by_uid, session_final_rows

logger = logging.getLogger(__name__)

FIELDS = ["uid", "responses", "response_mask", "rm_scores"]
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


def _final_real_rows(batch_keys: list[str], tags: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows scored: each real session's final output, all final rows, row -> session), as the credit uses them."""
    final_rows, row_to_session = session_final_rows(batch_keys)
    rows = np.asarray([r for r in final_rows if not tags[r].get("is_padding", False)], dtype=np.int64)
    return rows, final_rows, row_to_session


@register_trainer("setpo_sync")
class SetPOTrainerSync(PPOTrainerSync):
    """verl's sync trainer plus one diversity method (settings from the config's top-level ``setpo`` section)."""

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
        """Read the ``setpo`` section and build the embedder now (when needed), before verl loads any model.

        A wrong embedder name, a missing package or a GPU this process cannot see then fails at start-up,
        not at the first advantage step after model loading and a rollout.
        """
        self.setpo_config = SetPOVerlConfig.from_mapping(self.config.get("setpo"))
        check_base_estimator(self.config.algorithm.adv_estimator)
        self._setpo_embedder: Embedder | None = None
        self._last_lambda = 0.0  # the last weight set from the target ratio
        self._embed_seconds = 0.0
        self._reported_idle = False
        if self.setpo_config.needs_embedder:
            self._setpo_embedder = embedder_from_config(self.setpo_config)

    @property
    def setpo_embedder(self) -> Embedder:
        """Built at init (when needed) or on first use, in this (trainer) process, on ``setpo.embed_device``."""
        if self._setpo_embedder is None:
            self._setpo_embedder = embedder_from_config(self.setpo_config)
        return self._setpo_embedder

    def _method_texts(self, data: TensorDict, rows: np.ndarray) -> list[str] | None:
        cfg = self.setpo_config
        if not cfg.diversity_method.required_inputs(**cfg.method_params) & {"texts", "answers", "embeddings"}:
            return None
        responses_nt = data["responses"]
        pad_id = getattr(self.tokenizer, "pad_token_id", None)
        responses = responses_nt.to_padded_tensor(0 if pad_id is None else pad_id)
        lengths = responses_nt.offsets().diff()
        return decode_responses(self.tokenizer, responses[rows], lengths[rows], cfg.skip_special_tokens)

    def _embed(self, texts: list[str]) -> torch.Tensor:
        """(N, d) float32 CPU embeddings; the embedder's cached CUDA memory is released afterwards."""
        t0 = time.perf_counter()
        try:
            return embed_texts(self.setpo_embedder, texts)
        finally:
            release_cached_memory(self.setpo_config.embed_device)
            self._embed_seconds += time.perf_counter() - t0

    def _reward_method_advantage(self, batch, metrics: dict):
        """verl's advantage step on scores R~ from the method, then the original ``rm_scores`` written back."""
        cfg = self.setpo_config
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=FIELDS)
        original = data["rm_scores"]
        scores = original.to_padded_tensor(0.0)
        lengths = original.offsets().diff()
        seq = scores.double().sum(-1)
        rows, _, _ = _final_real_rows(batch.keys, batch.tags)
        uids = _as_list(data["uid"])
        texts = self._method_texts(data, rows)
        new, _ = method_by_uid(cfg, [uids[r] for r in rows], seq[rows], texts, self._embed)
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
        """The method's advantages from verl's per-row A_bar, the controls on its term, broadcast over the mask."""
        cfg, method = self.setpo_config, self.setpo_config.diversity_method
        t0 = time.perf_counter()
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=[*FIELDS, "advantages"])
        response_mask = data["response_mask"]
        mask = response_mask.to_padded_tensor(0)
        advantages = data["advantages"].to_padded_tensor(0.0)
        seq = data["rm_scores"].to_padded_tensor(0.0).double().sum(-1)
        m = mask.double()
        base = (advantages.double() * m).sum(-1) / m.sum(-1).clamp_min(1)  # outcome estimators: one value per row
        rows, final_rows, row_to_session = _final_real_rows(batch.keys, batch.tags)
        uids = _as_list(data["uid"])
        row_uids = [uids[r] for r in rows]
        idx = torch.as_tensor(rows)
        params = dict(cfg.method_params)
        lam = 1.0
        if method.scale is not None:  # the weight is the controls' lambda; the method runs at unit weight
            lam, params[method.scale] = params[method.scale], 1.0
        self._embed_seconds = 0.0
        texts = self._method_texts(data, rows)
        unit, acting = method_by_uid(cfg, row_uids, seq[idx], texts, self._embed, base[idx], params)
        own = term = unit - base[idx]
        if method.scale is None and cfg.target_ratio is None and not cfg.placebo:
            new = unit
        else:
            placebo = None
            if cfg.placebo:
                group_ids = torch.as_tensor([list(dict.fromkeys(row_uids)).index(u) for u in row_uids])
                step = int(getattr(self, "global_steps", 0) or 0)
                placebo = placebo_permutation(group_ids, torch.Generator().manual_seed(cfg.seed * 1_000_003 + step))
                term = term[placebo].masked_fill(~acting, 0.0)
            if cfg.target_ratio is not None:
                lam = self._last_lambda
            new, lam = controlled_advantages(
                base[idx], own, acting, lam, target_ratio=cfg.target_ratio, placebo=placebo
            )
            self._last_lambda = lam
        by_row = base.clone()
        by_row[idx] = new
        row_values = by_row[torch.as_tensor(final_rows)][torch.as_tensor(row_to_session)]
        padding = torch.as_tensor([t.get("is_padding", False) for t in batch.tags])
        shaped = torch.where(padding.unsqueeze(-1), advantages, (row_values.unsqueeze(-1) * m).to(advantages.dtype))
        metrics.update(credit_metrics(term, group_rows_by_uid(row_uids), method.min_group))
        metrics["setpo/lambda"] = float(lam)
        metrics["setpo/placebo"] = float(cfg.placebo)
        metrics["timing_s/setpo_embed"] = self._embed_seconds
        metrics["timing_s/setpo"] = time.perf_counter() - t0
        metrics["timing_s/setpo_credit"] = metrics["timing_s/setpo"] - self._embed_seconds
        metrics[f"method/{cfg.method}/advantage_delta"] = float((new - base[idx]).abs().mean()) if len(rows) else 0.0
        if not bool(acting.any()) and not self._reported_idle:
            self._reported_idle = True
            logger.warning(
                "setpo.method=%s acts on no row of this batch (no uid group of %d or more rows); such steps train "
                "on A_bar alone (reported once)", cfg.method, method.min_group,
            )  # fmt: skip
        return tq.kv_batch_put(
            keys=batch.keys,
            partition_id=batch.partition_id,
            fields=TensorDict({"advantages": response_to_nested(shaped, response_mask)}, batch_size=len(batch)),
        )

    def _compute_advantage(self, batch, metrics: dict):
        if not self.setpo_config.enabled:
            return super()._compute_advantage(batch, metrics)
        if self.setpo_config.diversity_method.entry == "reward":
            return self._reward_method_advantage(batch, metrics)
        batch = super()._compute_advantage(batch, metrics)
        return self._advantage_method(batch, metrics)
