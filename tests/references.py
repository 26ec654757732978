"""Brute-force oracles the tests compare the fast code with: plain loops over the definitions, float64.

Importable from tests/ and tests/verl/ (pytest puts tests/ on sys.path for its conftest.py). Nothing here imports
trl or verl at module level, so either environment can import it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch

from setpo.core import ShapingSpec, SmallGroupPolicy, get_shaping, loo_credits_reference
from setpo.embedders.policy import _check_pool_inputs
from setpo.metrics.diversity import Smoothing, Tokenize, check_not_bare_string, sentence_bleu, tokenize


def cosine_kernel_reference(vectors: Sequence[torch.Tensor], clamp: bool = True) -> torch.Tensor:
    """k(o_i, o_j) = clamp(cos(e_i, e_j), 0, 1) (or to [-1, 1]) entry by entry; a zero vector is similar only to
    zero vectors; unit diagonal."""
    G = len(vectors)
    norms = [float(torch.linalg.vector_norm(v.to(torch.float64))) for v in vectors]
    K = torch.empty(G, G, dtype=torch.float64)
    for i in range(G):
        for j in range(G):
            if i == j:
                k = 1.0
            elif norms[i] == 0 or norms[j] == 0:
                k = 1.0 if norms[i] == norms[j] == 0 else 0.0
            else:
                k = float(vectors[i].to(torch.float64) @ vectors[j].to(torch.float64)) / (norms[i] * norms[j])
            K[i, j] = min(max(k, 0.0 if clamp else -1.0), 1.0)
    return K


def masked_credits_reference(
    embeddings: torch.Tensor,
    group_size: int,
    mask: torch.Tensor | None = None,
    clamp: bool = True,
    shaping: ShapingSpec = "neglog1p",
) -> torch.Tensor:
    """Brute force of ``setpo_credits`` on a masked batch, flat (N,): row by row, find the group by index and its
    rows in the mask, build their kernel entry by entry, and run the literal Algorithm 1 (float64); 0 for a row
    outside the mask or in a group with fewer than 3 rows in it."""
    N = embeddings.shape[0]
    allowed = [True] * N if mask is None else mask.reshape(-1).tolist()
    g = get_shaping(shaping)
    out = []
    for n in range(N):
        start = (n // group_size) * group_size
        kept = [i for i in range(start, start + group_size) if allowed[i]]
        if not allowed[n] or len(kept) < 3:
            out.append(torch.tensor(0.0, dtype=torch.float64))
            continue
        members = [embeddings[i] for i in kept]
        out.append(loo_credits_reference(cosine_kernel_reference(members, clamp), g)[kept.index(n)])
    return torch.stack(out)


def credits_by_uid_reference(
    embeddings,
    uids: Sequence[Hashable],
    g: ShapingSpec = "neglog1p",
    small_group: SmallGroupPolicy = "zero",
    active: Sequence[bool] | None = None,
) -> torch.Tensor:
    """Brute force of SetPO's credits per uid group as the verl hook computes them (``method_by_uid``): one group at
    a time, loop-built kernel, literal Algorithm 1; inactive rows and groups of fewer than 3 rows get 0."""
    uid_list = list(uids.tolist() if hasattr(uids, "tolist") else uids)
    e = torch.as_tensor(embeddings, dtype=torch.float64).cpu()
    keep = [True] * len(uid_list) if active is None else list(active)
    credits = torch.zeros(len(uid_list), dtype=torch.float64)
    for uid in dict.fromkeys(u for u, k in zip(uid_list, keep) if k):
        rows = [i for i, u in enumerate(uid_list) if u == uid and keep[i]]
        if len(rows) < 3:
            if small_group == "raise":
                raise ValueError(f"uid group {uid!r} has {len(rows)} rollout(s)")
            continue
        s = loo_credits_reference(cosine_kernel_reference(list(e[rows])), g)
        for r, v in zip(rows, s.tolist()):
            credits[r] = v
    return credits


def score_gathered(
    fn: Any,
    per_process_prompts: Sequence[Sequence[Any]],
    per_process_completions: Sequence[Sequence[Any]],
    group_size: int,
    per_process_columns: Sequence[dict[str, Sequence[Any]]] | None = None,
    **extra: Any,
) -> torch.Tensor:
    """What ``SetPOTrainer`` does with a ``GroupRewardFunction`` `fn`: concatenate every process's rows in process
    order (what ``gather_object`` yields) and score the groups."""
    n_proc = len(per_process_prompts)
    if n_proc == 0 or len(per_process_completions) != n_proc:
        raise ValueError("need prompts and completions from the same (non-zero) number of processes")
    columns = per_process_columns if per_process_columns is not None else [{} for _ in range(n_proc)]
    if len(columns) != n_proc:
        raise ValueError(f"{len(columns)} column dicts for {n_proc} processes")
    keys = sorted(columns[0])
    if any(sorted(c) != keys for c in columns):
        raise ValueError("processes carry different dataset columns")
    prompts = [p for proc in per_process_prompts for p in proc]
    completions = [c for proc in per_process_completions for c in proc]
    gathered = {k: [v for c in columns for v in c[k]] for k in keys}
    return fn.score(prompts, completions, group_size, **gathered, **extra)


def mean_pairwise_distance_reference(embeddings) -> float:
    """Plain double loop over pairs (float64, no zero-norm rows), reference for `mean_pairwise_distance`."""
    e = np.asarray(embeddings, dtype=np.float64)
    total, pairs = 0.0, 0
    for i in range(len(e)):
        for j in range(i + 1, len(e)):
            total += 1.0 - float(e[i] @ e[j]) / (np.linalg.norm(e[i]) * np.linalg.norm(e[j]))
            pairs += 1
    return total / pairs


def self_bleu_reference(
    texts: Sequence[str],
    max_n: int = 4,
    smoothing: Smoothing = "epsilon",
    epsilon: float = 0.1,
    tokenization: Tokenize = "word",
) -> float:
    """Self-BLEU by the definition: mean over i of `sentence_bleu`(text_i, all other texts) (Zhu et al. 2018).

    Texts are lower-cased before they are split into tokens (see `tokenize`).
    """
    check_not_bare_string(texts, "texts")
    if len(texts) < 2:
        raise ValueError(f"Self-BLEU needs at least 2 texts, got {len(texts)}")
    toks = [tokenize(t, tokenization) for t in texts]
    return float(
        np.mean([sentence_bleu(h, toks[:i] + toks[i + 1 :], max_n, smoothing, epsilon) for i, h in enumerate(toks)])
    )


def mean_pool_hidden_states_reference(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-by-row reference for ``mean_pool_hidden_states``: select the masked tokens, take their mean."""
    hidden, mask = _check_pool_inputs(hidden, mask)
    dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    rows = []
    for b in range(hidden.shape[0]):
        tokens = hidden[b][mask[b]].detach().to(dtype)
        rows.append(tokens.mean(0) if tokens.shape[0] else torch.zeros(hidden.shape[-1], dtype=dtype))
    return torch.stack(rows)
