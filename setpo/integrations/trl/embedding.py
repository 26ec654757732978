"""Per-row embeddings of a TRL generation batch: decoded text through an ``Embedder``, or the policy's hidden states."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any, Sequence

import torch

from setpo._validate import check_choice, check_int, check_same_len
from setpo.embedders import Embedder, build_embedder, embedder_accepts
from setpo.integrations.trl.group_rewards import completion_text


@contextmanager
def zero3_init_disabled(accelerator: Any = None) -> Iterator[None]:
    """Models loaded inside are not partitioned by DeepSpeed ZeRO-3 (``from_pretrained`` skips ``zero.Init``).

    Under ZeRO-3, transformers wraps every ``from_pretrained`` in ``deepspeed.zero.Init`` while an HF DeepSpeed
    config is registered, which leaves a separately loaded embedder with empty partitioned weights ("'weight'
    must be 2-D"). The embedder is small and only used for inference, so each process keeps a full copy.
    """
    import transformers.integrations.deepspeed as hf_deepspeed

    saved = hf_deepspeed._hf_deepspeed_config_weak_ref
    plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
    try:
        with ExitStack() as stack:
            if plugin is not None and hasattr(plugin, "zero3_init_context_manager"):
                stack.enter_context(plugin.zero3_init_context_manager(enable=False))
            hf_deepspeed._hf_deepspeed_config_weak_ref = None
            yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = saved


def build_text_embedder(
    spec: str, device: Any = None, batch_size: int = 64, max_length: int | None = None, accelerator: Any = None
) -> Embedder:
    """``setpo.embedders.build_embedder(spec)`` with device / batching / truncation where the embedder takes them,
    built outside any DeepSpeed ZeRO-3 init context (see :func:`zero3_init_disabled`)."""
    kwargs = {"device": device, "batch_size": batch_size, "max_length": max_length}
    # Model-free embedders (e.g. "hashed") have no batch size or token limit: they are built with their defaults.
    with zero3_init_disabled(accelerator):
        return build_embedder(spec, **(kwargs if embedder_accepts(spec, kwargs) else {}))


def texts_for_embedding(prompts: Sequence[Any], completions: Sequence[Any], field: str) -> list[str]:
    """The text the kernel sees for each row: the completion (paper) or prompt followed by completion."""
    check_same_len(prompts=prompts, completions=completions)
    if check_choice(field, "embed field", ("completion", "prompt+completion")) == "completion":
        return [completion_text(c) for c in completions]
    return [completion_text(p) + completion_text(c) for p, c in zip(prompts, completions)]


def _decoder_of(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module whose output holds the last hidden states (``get_decoder()`` of a causal LM, PEFT or not)."""
    get_decoder = getattr(model, "get_decoder", None)
    if not callable(get_decoder):
        return None
    try:
        decoder = get_decoder()
    except (AttributeError, NotImplementedError, TypeError):
        return None
    return decoder if isinstance(decoder, torch.nn.Module) and decoder is not model else None


def _last_hidden(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    last = getattr(output, "last_hidden_state", None)
    if isinstance(last, torch.Tensor):
        return last
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    return None


def token_chunks(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Rows grouped into forward passes of at most ``max_tokens`` padded tokens (rows x longest row; at least one
    row each), rows sorted by length so each pass pads little."""
    check_int(max_tokens, "max_tokens", minimum=1)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    chunks: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = max(lengths[i], 1)  # sorted: this row is the longest of the chunk so far
        if current and (len(current) + 1) * width > max_tokens:
            chunks.append(current)
            current = []
        current.append(i)
    if current:
        chunks.append(current)
    return chunks


def completion_pool_mask(completion_mask: torch.Tensor, max_tokens: int | None) -> torch.Tensor:
    """(B, C) 0/1: the completion tokens pooled into a row's embedding, the first ``max_tokens`` when given."""
    if max_tokens is None:
        return completion_mask
    return completion_mask * (completion_mask.cumsum(dim=1) <= max_tokens).to(completion_mask.dtype)


class HiddenStateCapture:
    """Pooled last hidden states of forward passes that someone else runs over a (B, P + C) batch.

    ``SetPOTrainer`` wraps TRL's old / reference log-prob passes in :meth:`recording`: a forward hook on the
    model's decoder mean-pools each pass's last hidden states over the completion tokens (the last C columns whose
    attention mask is 1, the first ``max_tokens`` of them) exactly as :func:`policy_embeddings` does, so the policy
    embedder needs no forward of its own. ``pooled`` holds one (B, H) tensor per recorded pass, or None where the
    decoder's output was not usable (no decoder found, hidden states of another width, rows missing); ``seconds``
    is the time spent pooling.
    """

    def __init__(self, max_tokens: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.pooled: list[torch.Tensor | None] = []
        self.seconds = 0.0

    @contextmanager
    def recording(self, model: torch.nn.Module, attention_mask: torch.Tensor, completion_width: int) -> Iterator[None]:
        """Pool the hidden states of every forward of ``model`` inside the block (chunks of rows, in order)."""
        from setpo.embedders import mean_pool_hidden_states

        decoder = _decoder_of(model)
        if decoder is None or completion_width < 1:
            self.pooled.append(None)
            yield
            return
        pool_mask = completion_pool_mask(attention_mask[:, -completion_width:], self.max_tokens)
        width, parts, ok = attention_mask.shape[1], [], [True]

        def hook(module, args, output) -> None:
            t0 = time.perf_counter()
            hidden = _last_hidden(output)
            start = sum(p.shape[0] for p in parts)
            if (
                hidden is None
                or hidden.dim() != 3
                or hidden.shape[1] != width
                or start + hidden.shape[0] > len(pool_mask)
            ):
                ok[0] = False
            elif ok[0]:
                rows = pool_mask[start : start + hidden.shape[0]].to(hidden.device)
                parts.append(mean_pool_hidden_states(hidden[:, -completion_width:], rows))
            self.seconds += time.perf_counter() - t0

        handle = decoder.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
        complete = ok[0] and sum(p.shape[0] for p in parts) == len(pool_mask)
        self.pooled.append(torch.cat(parts) if complete else None)


@torch.no_grad()
def policy_embeddings(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    autocast=None,
    chunk_tokens: int | None = None,
) -> torch.Tensor:
    """(B, H): the policy's last hidden states mean-pooled over completion tokens (the first ``max_tokens``);
    float32, float64 for a float64 model.

    A row with no completion token gets the zero vector (the kernel isolates it). ``autocast`` is a context
    manager factory (e.g. ``accelerator.autocast``). The model runs in eval mode (no dropout, so a batch always
    gets the same embeddings) and its training flag is restored afterwards. Only the last layer's hidden states
    are kept: they are read from the decoder's output by a forward hook (``output_hidden_states`` would keep every
    layer's). Rows are run in passes of at most ``chunk_tokens`` padded tokens (rows x sequence length, trailing
    padding trimmed per pass), or of ``batch_size`` rows when ``chunk_tokens`` is None.
    """
    from setpo.embedders import mean_pool_hidden_states

    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    pool_mask = torch.cat([torch.zeros_like(prompt_mask), completion_pool_mask(completion_mask, max_tokens)], dim=1)
    # Columns after a row's last attended token never affect its earlier positions (causal attention): trim them.
    positions = torch.arange(1, input_ids.shape[1] + 1, device=input_ids.device)
    used = (attention_mask.bool() * positions).amax(dim=1).tolist()
    if chunk_tokens is not None:
        chunks = token_chunks(used, chunk_tokens)
    else:
        check_int(batch_size, "batch_size (chunk_tokens is None)", minimum=1)
        chunks = [list(range(s, min(s + batch_size, len(used)))) for s in range(0, len(used), batch_size)]

    decoder = _decoder_of(model)
    captured: list[Any] = []
    hook = decoder.register_forward_hook(lambda m, a, out: captured.append(out)) if decoder is not None else None

    def last_hidden(idx: torch.Tensor, width: int, all_layers: bool) -> torch.Tensor | None:
        captured.clear()
        with autocast() if autocast is not None else nullcontext():
            outputs = model(
                input_ids=input_ids[idx, :width],
                attention_mask=attention_mask[idx, :width],
                output_hidden_states=all_layers,
                use_cache=False,
                logits_to_keep=1,  # only the hidden states are needed
            )
        if all_layers:
            return outputs.hidden_states[-1]
        return _last_hidden(captured[-1]) if captured else None

    was_training = model.training
    model.eval()
    out = torch.zeros(input_ids.shape[0], 0)
    try:
        for rows in chunks:
            width = max(max(used[i] for i in rows), 1)
            idx = torch.tensor(rows, device=input_ids.device)
            hidden = last_hidden(idx, width, all_layers=hook is None)
            if hidden is None:  # the decoder's output held no hidden states: fall back to output_hidden_states
                hook.remove()
                hook = None
                hidden = last_hidden(idx, width, all_layers=True)
            pooled = mean_pool_hidden_states(hidden, pool_mask[idx, :width])  # float32, float64 kept
            if out.shape[1] == 0:
                out = torch.zeros(input_ids.shape[0], pooled.shape[1], device=pooled.device, dtype=pooled.dtype)
            out[idx.to(pooled.device)] = pooled
    finally:
        if hook is not None:
            hook.remove()
        model.train(was_training)
    return out
