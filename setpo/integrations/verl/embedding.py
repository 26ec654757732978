"""Response ids -> text -> embeddings for the verl adapter (no verl import; the tokenizer is duck-typed)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from setpo._validate import check_same_len, check_shape
from setpo.embedders import Embedder, build_embedder, embedder_accepts
from setpo.integrations.verl.config import SetPOVerlConfig


def decode_responses(tokenizer, responses: torch.Tensor, lengths: Sequence[int], skip_special_tokens: bool = True):
    """Text of each response: row i's first ``lengths[i]`` ids of the right-padded (N, T) `responses`."""
    check_shape(responses, "responses (token ids)", ("N", "T"))
    lengths = [int(n) for n in (lengths.tolist() if hasattr(lengths, "tolist") else lengths)]
    check_same_len(lengths=lengths, responses=responses)
    if any(n < 0 or n > responses.shape[1] for n in lengths):
        raise ValueError(f"response lengths must lie in [0, {responses.shape[1]}], got {lengths}")
    ids = [responses[i, :n].tolist() for i, n in enumerate(lengths)]
    texts = tokenizer.batch_decode(ids, skip_special_tokens=skip_special_tokens)
    check_same_len(responses=ids, **{"texts from tokenizer.batch_decode": texts})
    return list(texts)


def embedder_from_config(cfg: SetPOVerlConfig) -> Embedder:
    """``setpo.embedders.build_embedder(cfg.embedder, device=cfg.embed_device, **cfg.embedder_kwargs)``, its dtype
    pinned: ``cfg.embed_dtype`` on "cuda", float32 on "cpu" (for a model-backed embedder, via ``model_kwargs``)."""
    if cfg.embed_device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "setpo.embed_device=cuda but this process sees no CUDA device (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). verl's TaskRunner reserves no GPU: it sees the GPUs of "
            "its node only on Ray >= 2.49 with RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0 (python -m "
            "setpo.integrations.verl sets it) and only on a node that has GPUs; otherwise use setpo.embed_device=cpu"
        )
    kwargs = dict(cfg.embedder_kwargs)
    kwargs.setdefault("device", cfg.embed_device)
    if embedder_accepts(cfg.embedder, ["model_kwargs"]):
        dtype = getattr(torch, cfg.embed_dtype if cfg.embed_device == "cuda" else "float32")
        kwargs["model_kwargs"] = {"dtype": dtype, **(kwargs.get("model_kwargs") or {})}
    return build_embedder(cfg.embedder, **kwargs)


def release_cached_memory(device: str | torch.device) -> bool:
    """Return the embedder's cached activations to the driver after a step on a CUDA device (GPU 0 is shared with
    the training workers); a no-op elsewhere. True when the cache was emptied."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return False
    torch.cuda.empty_cache()
    return True
