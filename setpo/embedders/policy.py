"""Embeddings from the policy's own hidden states: masked mean pooling over completion tokens (no extra model)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch

from setpo._validate import check_callable, check_embeddings, check_int, check_shape, check_texts

#: The embedder spec that makes the trainers pool the policy's own hidden states (no separate model to build).
POLICY_EMBEDDER = "policy"


def is_policy_embedder(spec: object) -> bool:
    """Whether `spec` (any case, surrounding spaces allowed) asks for the policy's hidden states."""
    return isinstance(spec, str) and spec.strip().lower() == POLICY_EMBEDDER


def _check_pool_inputs(hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(hidden, torch.Tensor) or not torch.is_floating_point(hidden) or hidden.dim() != 3:
        shape = tuple(hidden.shape) if isinstance(hidden, torch.Tensor) else type(hidden).__name__
        raise ValueError(f"hidden must be a floating (B, T, H) tensor, got {shape}")
    mask = check_shape(torch.as_tensor(mask, device=hidden.device), "mask", tuple(hidden.shape[:2]), "(B, T) of hidden")
    if mask.dtype != torch.bool:
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("mask must hold only 0/1 (or bool) values")
        mask = mask == 1
    return hidden, mask


def mean_pool_hidden_states(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of hidden[b, t] over the t with mask[b, t] = 1; (B, T, H), (B, T) -> (B, H), float32 (float64 kept).

    Rows with no masked token (empty completions) give the zero vector. Values at unmasked positions are
    never read, so padding may hold anything (even NaN). Raises if a pooled row is not finite.
    """
    hidden, mask = _check_pool_inputs(hidden, mask)
    dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    h = torch.where(mask.unsqueeze(-1), hidden.detach().to(dtype), 0.0)
    count = mask.sum(-1, keepdim=True).to(dtype)
    pooled = h.sum(1) / count.clamp_min(1.0)
    return check_embeddings(pooled, hidden.shape[0], "mean_pool_hidden_states")


class PolicyHiddenStateEmbedder:
    """Embed texts with a causal LM's hidden states (layer `layer`), mean-pooled over the text's tokens.

    For scripts and analysis; inside training ``SetPOTrainer`` pools, with :func:`mean_pool_hidden_states`, the
    hidden states of TRL's own old / reference log-prob pass where one runs, else of one extra forward. Texts are
    tokenised without special tokens and right-padded by hand (so each text's positions start at 0 whatever the
    batch), truncated to `max_length` tokens if given.
    The model is run under ``torch.no_grad`` in eval mode (its training flag is restored afterwards).
    Empty texts give the zero vector. Output: (N, H) float32 on CPU.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        layer: int = -1,
        batch_size: int = 16,
        max_length: int | None = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        check_callable(tokenizer, "tokenizer", " (a tokenizer)")
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        if pad is None:
            raise ValueError("tokenizer has neither pad_token_id nor eos_token_id to pad with")
        n = getattr(getattr(model, "config", None), "num_hidden_layers", None)
        bounds = {} if n is None else {"minimum": -(n + 1), "maximum": n}
        check_int(layer, f"layer (of a model with {n} layers + embeddings)", **bounds)
        check_int(batch_size, "batch_size", minimum=1)
        check_int(max_length, "max_length", minimum=1, none=True)
        self.model = model
        self.tokenizer = tokenizer
        self.layer = layer
        self.batch_size = batch_size
        self.max_length = max_length
        self.pad_token_id = int(pad)
        # Only the hidden states are needed: skip the LM head over all positions where the model allows it.
        params = inspect.signature(model.forward).parameters
        self._forward_kwargs = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def _batch(self, ids: list[list[int]]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        T = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), T), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), T), dtype=torch.long)
        for b, x in enumerate(ids):
            input_ids[b, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[b, : len(x)] = 1
        out = self.model(
            input_ids=input_ids.to(device),
            attention_mask=mask.to(device),
            output_hidden_states=True,
            use_cache=False,
            **self._forward_kwargs,
        )
        return mean_pool_hidden_states(out.hidden_states[self.layer].float(), mask.to(device)).cpu()

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        texts = check_texts(texts)
        hidden_size = self.model.get_input_embeddings().embedding_dim
        out = torch.zeros(len(texts), hidden_size, dtype=torch.float32)
        nonempty = [i for i, t in enumerate(texts) if t]
        ids: list[list[int]] = [[] for _ in texts]
        if nonempty:
            encoded = self.tokenizer([texts[i] for i in nonempty], add_special_tokens=False)["input_ids"]
            for i, x in zip(nonempty, encoded):
                ids[i] = list(x)
        if self.max_length is not None:
            ids = [x[: self.max_length] for x in ids]
        todo = sorted((i for i, x in enumerate(ids) if x), key=lambda i: len(ids[i]))  # similar lengths batch together
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(todo), self.batch_size):
                    chunk = todo[start : start + self.batch_size]
                    out[chunk] = self._batch([ids[i] for i in chunk])
        finally:
            self.model.train(was_training)
        return check_embeddings(out, len(texts), "PolicyHiddenStateEmbedder")
