"""Per-row embeddings of a TRL generation batch: decoded text through an ``Embedder``, or the policy's hidden states."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import torch

from setpo.embedders.base import Embedder
from setpo.integrations.trl.group_rewards import completion_text


def texts_for_embedding(prompts: Sequence[Any], completions: Sequence[Any], field: str) -> list[str]:
    """The text the kernel sees for each row: the completion (paper) or prompt followed by completion."""
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    if field == "completion":
        return [completion_text(c) for c in completions]
    if field == "prompt+completion":
        return [completion_text(p) + completion_text(c) for p, c in zip(prompts, completions)]
    raise ValueError(f"unknown embed field {field!r}; use 'completion' or 'prompt+completion'")


def embed_texts(embedder: Embedder, texts: Sequence[str], batch_size: int) -> torch.Tensor:
    """(N, d) float32 embeddings from ``embedder`` called on chunks of ``batch_size`` texts."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    chunks = []
    for start in range(0, len(texts), batch_size):
        part = list(texts[start : start + batch_size])
        e = torch.as_tensor(embedder(part))
        if e.dim() != 2 or e.shape[0] != len(part):
            raise ValueError(f"embedder returned shape {tuple(e.shape)} for {len(part)} texts; expected (N, d)")
        if not torch.is_floating_point(e):
            raise ValueError(f"embedder returned dtype {e.dtype}; expected a floating tensor")
        chunks.append(e.detach().float().cpu())
    if not chunks:
        raise ValueError("no texts to embed")
    return torch.cat(chunks, dim=0)


@torch.no_grad()
def policy_embeddings(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    batch_size: int,
    max_tokens: int | None = None,
    autocast=None,
) -> torch.Tensor:
    """(B, H) float32: the policy's last hidden states mean-pooled over completion tokens (the first ``max_tokens``).

    A row with no completion token gets the zero vector (the kernel isolates it). ``autocast`` is a context
    manager factory (e.g. ``accelerator.autocast``).
    """
    from setpo.embedders import mean_pool_hidden_states

    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    pool_mask = completion_mask.clone()
    if max_tokens is not None:
        pool_mask = pool_mask * (pool_mask.cumsum(dim=1) <= max_tokens).to(pool_mask.dtype)
    pool_mask = torch.cat([torch.zeros_like(prompt_mask), pool_mask], dim=1)
    out = []
    for start in range(0, input_ids.shape[0], batch_size):
        sl = slice(start, start + batch_size)
        with autocast() if autocast is not None else nullcontext():
            outputs = model(
                input_ids=input_ids[sl],
                attention_mask=attention_mask[sl],
                output_hidden_states=True,
                use_cache=False,
                logits_to_keep=1,  # only the hidden states are needed
            )
        hidden = outputs.hidden_states[-1].float()
        out.append(mean_pool_hidden_states(hidden, pool_mask[sl]).float())
    return torch.cat(out, dim=0)
