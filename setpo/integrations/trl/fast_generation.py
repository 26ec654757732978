"""Prefix-shared sampling and scoring for causal LMs: each distinct prompt runs through the model once.

A GRPO step samples G completions of each prompt and an evaluation n; both then run the same prompt tokens
through the model G (n) times, and TRL's loss forward does so again. Here each distinct prompt is run once, its
key/value cache is copied to every row that continues it, and only the completion tokens run per row:

* `shared_prefix_generate`: sampling with the warpers of transformers' `generate` (temperature, top-k, top-p, in
  that order; greedy at temperature 0), rows that reached a stop token dropped from the batch;
* `shared_prefix_logps`: per-token log-probabilities (and entropies) of given completions, differentiable: the
  gradient of a prompt's keys and values sums over the rows that continue it.

Same distribution as `generate` and the same log-probabilities as a full forward up to float rounding (position
ids count real tokens, as `generate` does; RoPE attention depends only on their differences). The random stream
differs from `generate`'s, so sampled completions differ for a given seed.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch

from setpo._validate import check_int, check_real


def distinct_rows(rows: Sequence[Sequence[int]]) -> tuple[list[list[int]], torch.Tensor]:
    """(distinct rows in order of first appearance, index of each input row's distinct row)."""
    seen: dict[tuple[int, ...], int] = {}
    index = [seen.setdefault(tuple(r), len(seen)) for r in rows]
    return [list(r) for r in seen], torch.tensor(index, dtype=torch.long)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask), rows left-padded to the longest."""
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("every prompt needs at least one token")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.as_tensor(list(r), dtype=torch.long)
        mask[i, width - len(r) :] = 1
    return ids, mask


def prompt_positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of left-padded rows: real tokens count from 0, padding gets 1 (as `generate` sets them)."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)


def warp(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Logits after transformers' warpers: / temperature, top-k, then top-p (cumulative mass <= 1 - top_p removed)."""
    scores = logits.float() / temperature
    if top_k and 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False  # keep at least one token
        scores = scores.masked_fill(remove.scatter(-1, order, remove), float("-inf"))
    return scores


def next_tokens(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """One token per row: argmax at temperature 0, else a draw from softmax(warp(logits)) (global torch RNG)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = warp(logits, temperature, top_k, top_p).softmax(dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)


def _select_rows(cache, index: torch.Tensor) -> None:
    for layer in cache.layers:
        layer.reorder_cache(index)


def _cache_name(model) -> str:
    """The keyword a model's forward takes its key/value cache by (``cache`` from transformers 5.x on)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(inner).forward).parameters else "past_key_values"


def _cache_of(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


@torch.no_grad()
def shared_prefix_generate(
    model,
    prompts: Sequence[Sequence[int]],
    prefix_index: torch.Tensor,
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    pad_id: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> list[list[int]]:
    """Completion token ids of row i = continuation of ``prompts[prefix_index[i]]``, each ending at (and keeping) its
    first stop token or after ``max_new_tokens``. Every distinct prompt is prefilled once; finished rows leave the
    batch."""
    check_int(max_new_tokens, "max_new_tokens", minimum=1)
    check_real(temperature, "temperature", minimum=0)
    check_real(top_p, "top_p", minimum=0, maximum=1, strict=True)
    device = next(model.parameters()).device
    ids, mask = left_pad(prompts, pad_id, device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=prompt_positions(mask), use_cache=True,
                logits_to_keep=1)  # fmt: skip
    name, cache = _cache_name(model), _cache_of(out)
    index = prefix_index.to(device)
    _select_rows(cache, index)
    logits = out.logits[:, -1][index]
    mask = mask[index]
    position = mask.sum(-1, keepdim=True)  # next token's position id
    stops = torch.tensor(sorted(set(stop_ids)), device=device)
    rows = torch.arange(len(index), device=device)  # which output row each batch row is
    completions: list[list[int]] = [[] for _ in range(len(index))]
    for step in range(max_new_tokens):
        token = next_tokens(logits, temperature, top_k, top_p)
        for r, t in zip(rows.tolist(), token.tolist()):
            completions[r].append(t)
        alive = ~torch.isin(token, stops)
        if step == max_new_tokens - 1 or not bool(alive.any()):
            break
        if not bool(alive.all()):
            keep = alive.nonzero().squeeze(-1)
            _select_rows(cache, keep)
            rows, token, mask, position = rows[keep], token[keep], mask[keep], position[keep]
        mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=-1)
        out = model(input_ids=token[:, None], attention_mask=mask, position_ids=position, use_cache=True,
                    logits_to_keep=1, **{name: cache})  # fmt: skip
        cache, logits, position = _cache_of(out), out.logits[:, -1], position + 1
    return completions


def shared_prefix_logps(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    entropy: bool = False,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, C) log pi(c_t | prompt, c_<t) of the completions (logits / temperature), and the (B, C) entropies of the
    same distributions when ``entropy`` (with a gradient only when ``entropy_grad``).

    Rows with the same (left-padded) prompt share one prompt forward; the completions run on copies of its cache.
    """
    B, C = completion_ids.shape
    key = torch.cat([prompt_ids * prompt_mask, prompt_mask], dim=1)
    distinct, index = torch.unique(key, dim=0, return_inverse=True)
    u_ids, u_mask = distinct[:, : prompt_ids.shape[1]], distinct[:, prompt_ids.shape[1] :]
    out = model(input_ids=u_ids, attention_mask=u_mask, position_ids=prompt_positions(u_mask), use_cache=True,
                logits_to_keep=1)  # fmt: skip
    cache = _cache_of(out)
    _select_rows(cache, index)
    first = out.logits[:, -1:][index]  # predicts completion token 0
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    position = prompt_mask.sum(-1, keepdim=True) + torch.arange(C, device=completion_ids.device)
    if C > 1:
        rest = model(input_ids=completion_ids[:, :-1], attention_mask=mask[:, :-1], position_ids=position[:, :-1],
                     use_cache=True, **{_cache_name(model): cache}).logits  # fmt: skip
        logits = torch.cat([first, rest], dim=1)
    else:
        logits = first
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logps = logp_all.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    ent = None
    if entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            ent = -(logp_all.exp() * logp_all).sum(-1)
    return logps, ent
