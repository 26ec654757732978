"""Sampling n completions per prompt: vLLM when installed, transformers `generate` otherwise.

Defaults follow the paper's evaluation (Sec. 5): temperature 0.5, top-p 0.9, n = 64 samples per problem.
A sample ends at the tokenizer's eos or at ``<|im_end|>`` / ``<|endoftext|>`` when the vocabulary has them
(Qwen: ids 151645 / 151643), as the Qwen2.5-Math evaluation stops: a base model that writes past its turn
would otherwise have the next, invented problem's \\boxed{} scored. The stop token itself is not in the text.
The vLLM path is written against vLLM's `LLM` / `SamplingParams` API; it is not exercised by the CPU tests.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import torch

from setpo._validate import check_choice, check_int, check_real

Messages = list[dict[str, str]]
Generator = Callable[[Sequence[Messages]], list[list[str]]]

#: End-of-turn / end-of-text tokens that stop a sample when the tokenizer's vocabulary has them.
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


def stop_token_ids(tokenizer) -> list[int]:
    """Token ids that end a sample: the tokenizer's eos, then those of STOP_TOKENS in its vocabulary (no repeats)."""
    vocab = tokenizer.get_vocab()
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    ids += [vocab[t] for t in STOP_TOKENS if t in vocab]
    ids = list(dict.fromkeys(int(i) for i in ids))
    if not ids:
        raise ValueError(f"tokenizer has no eos token and none of {', '.join(STOP_TOKENS)}: samples would never stop")
    return ids


def _cut_at_stop(ids: list[int], stops: set[int]) -> list[int]:
    for j, t in enumerate(ids):
        if t in stops:
            return ids[:j]
    return ids


@dataclass
class SamplingConfig:
    """How completions are sampled. ``max_new_tokens`` for evaluation is not stated in the paper (training used 756)."""

    n: int = 64
    temperature: float = 0.5
    top_p: float = 0.9
    max_new_tokens: int = 3072
    batch_size: int = 64  # sequences per `generate` call (transformers backend)
    seed: int = 0
    use_chat_template: bool = True

    def __post_init__(self):
        check_int(self.n, "n", minimum=1)
        check_real(self.temperature, "temperature", minimum=0)
        check_real(self.top_p, "top_p", minimum=0, maximum=1, strict=True)
        check_int(self.max_new_tokens, "max_new_tokens", minimum=1)
        check_int(self.batch_size, "batch_size", minimum=1)


def render_prompt(tokenizer, messages: Messages | str, use_chat_template: bool = True) -> str:
    """Prompt text: the tokenizer's chat template (with generation prompt) when it has one, else the raw contents."""
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, dict) and "content" in m for m in messages):
        raise ValueError(f"prompt must be a string or a chat list of {{'role', 'content'}} dicts, got {messages!r:.80}")
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in messages)


class HFGenerator:
    """Batched sampling with transformers `generate` (left padding, new tokens decoded, special tokens dropped).

    ``shared_prefix``: prefill each prompt once and sample its n completions from copies of its cache
    (`setpo.integrations.trl.fast_generation`), about batch_size // n prompts per call: the same distribution as
    `generate`, another random stream (so other samples at the same seed)."""

    def __init__(self, model, tokenizer, config: SamplingConfig, progress: bool = True, shared_prefix: bool = False):
        self.model, self.tokenizer, self.config, self.progress = model, tokenizer, config, progress
        self.shared_prefix = shared_prefix

    def with_n(self, n: int) -> HFGenerator:
        """The same model sampling `n` completions per prompt."""
        return HFGenerator(self.model, self.tokenizer, replace(self.config, n=n), self.progress, self.shared_prefix)

    @torch.no_grad()
    def __call__(self, prompts: Sequence[Messages | str]) -> list[list[str]]:
        cfg, tok = self.config, self.tokenizer
        texts = [render_prompt(tok, p, cfg.use_chat_template) for p in prompts]
        flat = [(i, t) for i, t in enumerate(texts) for _ in range(cfg.n)]
        out: list[list[str]] = [[] for _ in texts]
        pad_side, pad_id = tok.padding_side, tok.pad_token_id
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        device = next(self.model.parameters()).device
        stops = stop_token_ids(tok)
        limit = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        if limit is not None and texts:
            longest = max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
            if longest + cfg.max_new_tokens > limit:
                raise ValueError(
                    f"longest prompt ({longest} tokens) + max_new_tokens ({cfg.max_new_tokens}) exceeds the model's "
                    f"max_position_embeddings ({limit}); lower max_new_tokens or use a model with a longer context"
                )
        from tqdm.auto import tqdm  # imported here: tqdm is not a core dependency

        was_training = self.model.training
        self.model.eval()
        try:
            if self.shared_prefix:
                self._sample_shared(texts, out, stops)
                return out
            chunks = range(0, len(flat), cfg.batch_size)
            for c, start in enumerate(tqdm(chunks, desc="generate", disable=not self.progress, leave=False)):
                batch = flat[start : start + cfg.batch_size]
                enc = tok([t for _, t in batch], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
                torch.manual_seed(cfg.seed * 1_000_003 + c)  # reproducible per chunk (sets the global RNG)
                sampling = cfg.temperature > 0
                gen = self.model.generate(
                    **enc,
                    do_sample=sampling,
                    temperature=cfg.temperature if sampling else None,
                    top_p=cfg.top_p if sampling else None,
                    top_k=0 if sampling else None,  # no top-k cut (a model's generation_config may set 50)
                    max_new_tokens=cfg.max_new_tokens,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=stops,
                )
                new = [_cut_at_stop(row, set(stops)) for row in gen[:, enc["input_ids"].shape[1] :].tolist()]
                for (i, _), text in zip(batch, tok.batch_decode(new, skip_special_tokens=True)):
                    out[i].append(text)
        finally:
            tok.padding_side = pad_side
            if pad_id is None:
                tok.pad_token = None
            self.model.train(was_training)
        return out

    def _sample_shared(self, texts: list[str], out: list[list[str]], stops: list[int]) -> None:
        """Fill ``out`` with cfg.n samples per prompt, each prompt prefilled once (chunk c seeded like `__call__`)."""
        from setpo.integrations.trl.fast_generation import shared_prefix_generate

        cfg, tok = self.config, self.tokenizer
        per_chunk = max(1, cfg.batch_size // cfg.n)
        for c, start in enumerate(range(0, len(texts), per_chunk)):
            ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts[start : start + per_chunk]]
            torch.manual_seed(cfg.seed * 1_000_003 + c)
            rows = shared_prefix_generate(
                self.model, ids, torch.arange(len(ids)).repeat_interleave(cfg.n), max_new_tokens=cfg.max_new_tokens,
                stop_ids=stops, pad_id=tok.pad_token_id, temperature=cfg.temperature, top_k=0, top_p=cfg.top_p,
            )  # fmt: skip
            new = [_cut_at_stop(row, set(stops)) for row in rows]
            for j, text in enumerate(tok.batch_decode(new, skip_special_tokens=True)):
                out[start + j // cfg.n].append(text)


class VLLMGenerator:
    """Sampling with vLLM: one `LLM.generate` call with `SamplingParams(n=..., stop_token_ids=...)` over all prompts."""

    def __init__(self, model_path: str, config: SamplingConfig, llm: Any = None, **llm_kwargs: Any):
        from vllm import LLM, SamplingParams

        self.config = config
        self.llm = llm if llm is not None else LLM(model=model_path, seed=config.seed, **llm_kwargs)
        self.model_path = model_path
        self.params = SamplingParams(
            n=config.n,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            stop_token_ids=stop_token_ids(self.llm.get_tokenizer()),
        )

    def with_n(self, n: int) -> VLLMGenerator:
        """The same engine sampling `n` completions per prompt."""
        return VLLMGenerator(self.model_path, replace(self.config, n=n), llm=self.llm)

    def __call__(self, prompts: Sequence[Messages | str]) -> list[list[str]]:
        tok = self.llm.get_tokenizer()
        texts = [render_prompt(tok, p, self.config.use_chat_template) for p in prompts]
        results = self.llm.generate(texts, self.params)
        return [[o.text for o in r.outputs] for r in results]


def vllm_available() -> bool:
    """True when vLLM can be imported here."""
    return importlib.util.find_spec("vllm") is not None


def make_generator(
    model_path: str,
    config: SamplingConfig,
    backend: Literal["auto", "vllm", "hf"] = "auto",
    device: str | None = None,
    torch_dtype: str = "auto",
) -> Generator:
    """A generator for the checkpoint at `model_path`: vLLM when available (backend auto), else transformers.

    A verl checkpoint (run folder, ``checkpoints``, ``global_step_<N>`` or ``actor``) loads its merged Hugging
    Face model (`setpo.eval.checkpoint.resolve_model`)."""
    check_choice(backend, "backend", ("auto", "vllm", "hf"))
    from setpo.eval.checkpoint import resolve_model

    model_path = resolve_model(model_path)
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        if not vllm_available():
            raise ImportError("backend='vllm' needs vLLM installed (pip install vllm, GPU only)")
        return VLLMGenerator(model_path, config)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from setpo.tiny.model import META_FILE, load_tiny

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if (Path(model_path) / META_FILE).is_file():  # setpo.tiny folders: AutoTokenizer would rebuild the tokenizer
        model, tok = load_tiny(model_path, device=device)
        return HFGenerator(model, tok, config)
    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype)
    return HFGenerator(model.to(device), tok, config)


def config_dict(config: SamplingConfig) -> dict:
    """The sampling config as a plain dict (recorded beside every result)."""
    return asdict(config)
