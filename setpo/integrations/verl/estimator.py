"""The ``setpo`` advantage estimator in verl's registry (``algorithm.adv_estimator=setpo``).

verl 0.9.1 calls a registered estimator with ``token_level_rewards``, ``response_mask``, ``config`` and
``index`` (the uid) only: it never passes the responses. This estimator therefore computes verl's own GRPO
advantage and adds lambda * s only when it also receives the means to build embeddings (``embeddings=``,
``batch["setpo_embeddings"]``, ``texts=`` or ``responses=`` with a tokenizer, plus an embedder). Called the
way verl 0.9.1 calls it, it warns (RuntimeWarning and a log line) and returns the plain GRPO advantage: the
credit then needs the V1 trainer mode ``trainer.v1.trainer_mode=setpo_sync`` with ``adv_estimator=grpo``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

from setpo.embedders import Embedder
from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.embedding import decode_responses, embed_texts, embedder_from_config
from setpo.integrations.verl.groups import add_credits_to_token_advantages, credits_by_uid

logger = logging.getLogger(__name__)

EMBEDDINGS_KEY = "setpo_embeddings"
NO_EMBEDDINGS_MESSAGE = (
    "setpo estimator: no embeddings, texts or decodable responses were passed (verl 0.9.1 passes none to "
    "advantage estimators), so this batch gets the plain GRPO advantage without the SetPO credit. Use "
    "trainer.v1.trainer_mode=setpo_sync with algorithm.adv_estimator=grpo (python -m setpo.integrations.verl)."
)


def _cfg_get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    if isinstance(config, Mapping) or hasattr(config, "get"):
        try:
            return config.get(key, default)
        except TypeError:
            pass
    return getattr(config, key, default)


def _setpo_config(setpo: SetPOVerlConfig | Mapping | None, config: Any) -> SetPOVerlConfig | None:
    if isinstance(setpo, SetPOVerlConfig):
        return setpo
    if setpo is not None:
        return SetPOVerlConfig.from_mapping(setpo)
    section = _cfg_get(config, "setpo")
    return None if section is None else SetPOVerlConfig.from_mapping(section)


def _embeddings_from_inputs(
    n: int,
    response_mask: torch.Tensor,
    cfg: SetPOVerlConfig | None,
    embeddings: torch.Tensor | None,
    batch: Any,
    texts: Sequence[str] | None,
    responses: torch.Tensor | None,
    tokenizer: Any,
    embedder: Embedder | None,
) -> torch.Tensor | None:
    """The (N, d) embeddings from whichever input carries them, in order of precedence; None when none does."""
    if embeddings is not None:
        return torch.as_tensor(embeddings)
    if batch is not None and EMBEDDINGS_KEY in batch.keys():
        return torch.as_tensor(batch[EMBEDDINGS_KEY])
    if texts is None and tokenizer is not None:
        if responses is None and batch is not None and "responses" in batch.keys():
            responses = batch["responses"]
        if responses is not None:
            if responses.shape != response_mask.shape:
                raise ValueError(
                    f"responses {tuple(responses.shape)} and response_mask {tuple(response_mask.shape)} differ in shape"
                )
            # right-padded responses: the length is the position after the last unmasked token
            pos = torch.arange(1, response_mask.shape[1] + 1, device=response_mask.device)
            lengths = (response_mask.bool() * pos).amax(dim=1)
            skip = True if cfg is None else cfg.skip_special_tokens
            texts = decode_responses(tokenizer, responses, lengths, skip)
    if texts is None:
        return None
    if len(texts) != n:
        raise ValueError(f"got {len(texts)} texts for {n} rows")
    if embedder is None:
        if cfg is None:
            raise ValueError("setpo estimator got texts but neither an embedder nor a setpo config to build one")
        embedder = embedder_from_config(cfg)
    return embed_texts(embedder, texts)


@register_adv_est("setpo")
def compute_setpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    setpo: SetPOVerlConfig | Mapping | None = None,
    embeddings: torch.Tensor | None = None,
    texts: Sequence[str] | None = None,
    responses: torch.Tensor | None = None,
    tokenizer: Any = None,
    embedder: Embedder | None = None,
    batch: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO advantage (verl's own) plus lambda * s per uid group (paper eq. 6); returns (advantages, returns).

    The SetPO settings come from `setpo` (a ``SetPOVerlConfig`` or mapping) or a ``setpo`` section of the
    algorithm `config`. ``norm_adv_by_std_in_grpo`` defaults to the config's value, as verl's GRPO path uses it.
    Other keyword arguments verl may pass (``reward_baselines``, ``non_tensor_batch``, ...) are accepted.
    """
    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = bool(_cfg_get(config, "norm_adv_by_std_in_grpo", True))
    base, _ = compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
    )
    cfg = _setpo_config(setpo, config)
    emb = _embeddings_from_inputs(
        base.shape[0], response_mask, cfg, embeddings, batch, texts, responses, tokenizer, embedder
    )
    if emb is None:
        warnings.warn(NO_EMBEDDINGS_MESSAGE, RuntimeWarning, stacklevel=2)
        logger.warning(NO_EMBEDDINGS_MESSAGE)
        return base, base
    if cfg is None:
        raise ValueError(
            "setpo estimator got embeddings but no setpo settings (lambda); pass setpo=SetPOVerlConfig(...)"
        )
    credits = credits_by_uid(emb, index, g=cfg.shaping, small_group=cfg.small_group)
    adv = add_credits_to_token_advantages(base, response_mask, credits, cfg.lam)
    return adv, adv
