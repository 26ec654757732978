"""``SharedPrefixSetPOTrainer``: `SetPOTrainer` whose sampling and loss forward run each distinct prompt once.

TRL's GRPO step on a CPU repeats the prompt for every completion three ways: `generate` prefills each of the
B = prompts x G rows, the loss forward runs all B prompt copies (with their gradient), and, off CUDA, TRL's fused
LM head scores every position of every row against the whole vocabulary, prompt positions included. This trainer
samples with `shared_prefix_generate` and scores with `shared_prefix_logps` (`fast_generation`): one prompt
forward per distinct prompt, the vocabulary projection only at completion positions. The objective, the
advantages and the method are TRL's and `SetPOTrainer`'s unchanged; the log-probabilities equal TRL's to float
rounding, and sampling follows `generate`'s distribution with another random stream, so a run's numbers differ
from `SetPOTrainer`'s at the same seed. Text prompts only (no vLLM, tools, images, min-p or repetition penalty).
"""

from __future__ import annotations

import torch

from setpo.integrations.trl.fast_generation import distinct_rows, shared_prefix_generate, shared_prefix_logps
from setpo.integrations.trl.trainer import SetPOTrainer

#: generation settings the shared-prefix sampler reproduces (anything else set is refused)
_SUPPORTED_GENERATION = {"max_new_tokens", "do_sample", "pad_token_id", "bos_token_id", "eos_token_id", "temperature",
                         "top_p", "top_k", "min_p", "repetition_penalty", "cache_implementation"}  # fmt: skip


class SharedPrefixMixin:
    """Overrides TRL's generation and per-token log-prob pass with the prefix-shared ones (text prompts only)."""

    def _check_shared_prefix(self) -> None:
        """Refuse the settings the shared-prefix path does not reproduce (one line naming the setting)."""
        kw = getattr(self, "generation_kwargs", None) or {}
        problems = []
        if getattr(self, "use_vllm", False) or getattr(self, "use_transformers_continuous_batching", False):
            problems.append("vLLM / continuous batching generation")
        if getattr(self, "tools", None) or getattr(self, "rollout_func", None) is not None:
            problems.append("tools or a rollout_func")
        if getattr(self, "environment_factories", None) is not None:
            problems.append("environments")
        if set(kw) - _SUPPORTED_GENERATION:
            problems.append(f"generation_kwargs {sorted(set(kw) - _SUPPORTED_GENERATION)}")
        if kw.get("min_p") is not None or kw.get("repetition_penalty") not in (None, 1.0):
            problems.append("min_p / repetition_penalty")
        if kw.get("cache_implementation") not in (None, "dynamic"):
            problems.append(f"cache_implementation={kw.get('cache_implementation')!r}")
        if getattr(self, "aux_loss_enabled", False):
            problems.append("MoE auxiliary loss")
        if problems:
            raise ValueError(f"{type(self).__name__} does not support {', '.join(problems)}; use SetPOTrainer")

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if images is not None or multimodal_fields:
            raise ValueError(f"{type(self).__name__} samples text prompts only; got images or multimodal fields")
        kw = self.generation_kwargs
        distinct, index = distinct_rows(prompt_ids)
        model = self.accelerator.unwrap_model(self.model)
        with torch.no_grad():
            completion_ids = shared_prefix_generate(
                model, distinct, index, max_new_tokens=int(kw["max_new_tokens"]), stop_ids=self.eos_token_ids,
                pad_id=self._tokenizer.pad_token_id, temperature=float(kw["temperature"]),
                top_k=int(kw.get("top_k") or 0), top_p=float(kw.get("top_p") or 1.0),
            )  # fmt: skip
        return completion_ids, None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):  # fmt: skip
        if compute_aux_loss or any(v is not None for v in multimodal.values()):
            raise ValueError(f"{type(self).__name__} scores text completions only (no images, no MoE aux loss)")
        C = logits_to_keep
        logps, entropies = shared_prefix_logps(
            model, input_ids[:, :-C], attention_mask[:, :-C], input_ids[:, -C:], attention_mask[:, -C:],
            temperature=self.temperature, entropy=compute_entropy,
            entropy_grad=bool(getattr(self, "_entropy_bonus_enabled", False)),
        )  # fmt: skip
        return logps, entropies, None


class SharedPrefixSetPOTrainer(SharedPrefixMixin, SetPOTrainer):
    """`SetPOTrainer` with prefix-shared sampling and scoring (see the module docstring); same arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._check_shared_prefix()
