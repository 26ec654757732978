"""The ``"policy"`` embedder inside ``SetPOTrainer``: reuse a forward pass TRL already runs, else one extra forward.

The one seam is ``_get_per_token_logps_and_entropies``: its calls during a batch's scoring are recorded
(:class:`~setpo.integrations.trl.embedding.HiddenStateCapture`: a hook on the decoder pools the last hidden states over
the completion tokens, the same pooling as the extra forward). Sources, in the order of
``setpo_policy_hidden_sources``: ``"old"``, the old per-token log-probs (the current policy; TRL runs it when
``num_iterations > 1``, when ``gradient_accumulation_steps`` is not a multiple of ``steps_per_generation *
num_iterations``, or for vLLM importance sampling). Where it does not run (TRL's default ``num_iterations=1``) the
policy runs one extra no-grad forward over the batch in eval mode (``setpo_policy_chunk_tokens`` tokens per pass):
about the cost of the old log-prob pass. Opt-in: ``("old", "ref")`` also reuses the reference log-prob pass
(``beta != 0``), which is the *start* policy, so "policy" then no longer means the current policy. ``()`` always runs
the extra forward. TRL runs its pass with the model in training mode (dropout on if the model has any), the extra
forward in eval mode.
"""

from __future__ import annotations

from typing import Any

import torch

from setpo._validate import check_known
from setpo.integrations.trl.embedding import HiddenStateCapture, policy_embeddings


class PolicyHiddenReuse:
    """Mixin for a ``GRPOTrainer``: pooled policy hidden states of a batch, reused from TRL's pass when it ran."""

    #: TRL passes whose hidden states the "policy" embedder reuses, in order of preference ("old", and opt-in "ref").
    setpo_policy_hidden_sources: tuple[str, ...] = ("old",)
    _setpo_capture: HiddenStateCapture | None = None
    #: The source of the last batch's policy embeddings: "old", "ref" or "extra" (own forward); None: not the policy.
    setpo_last_embed_source: str | None = None

    def _start_capture(self) -> HiddenStateCapture | None:
        """Record the hidden states of TRL's passes during this batch's scoring (None: no source to reuse)."""
        self._setpo_capture = None
        if not self.setpo_policy_hidden_sources:
            return None
        check_known(self.setpo_policy_hidden_sources, ("old", "ref"), "setpo_policy_hidden_sources entry(s)")
        self._setpo_capture = HiddenStateCapture(max_tokens=self.args.setpo_embed_max_length)
        return self._setpo_capture

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        """TRL's log-prob pass; during a batch's scoring with the policy embedder its hidden states are pooled too."""
        capture = self._setpo_capture
        if capture is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        with capture.recording(self.accelerator.unwrap_model(model), attention_mask, int(logits_to_keep)):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )

    def _reused_hidden(
        self, output: dict[str, Any], capture: HiddenStateCapture | None
    ) -> tuple[torch.Tensor | None, str | None]:
        """(pooled hidden states, source) of the first TRL pass in ``setpo_policy_hidden_sources`` that ran, or None."""
        if capture is None:
            return None, None
        # TRL runs the old pass (if at all) before the reference pass; the output says which ran.
        ran = [k for k in ("old", "ref") if output.get(f"{k}_per_token_logps") is not None]
        if len(ran) != len(capture.pooled):  # another call came through the seam: trust none of them
            return None, None
        by_source = dict(zip(ran, capture.pooled))
        for source in self.setpo_policy_hidden_sources:
            if by_source.get(source) is not None:
                return by_source[source], source
        return None, None

    def _policy_embed_local(
        self, output: dict[str, Any], completion_ids_list: list, capture: HiddenStateCapture | None
    ) -> tuple[torch.Tensor, float]:
        """(B_local, H) policy embeddings of this process's rows and the seconds spent pooling inside TRL's pass."""
        if any(k in output for k in ("pixel_values", "image_grid_thw")):
            raise ValueError("setpo_embedder='policy' does not support multimodal inputs; use a text embedder")
        reused, source = self._reused_hidden(output, capture)
        if reused is not None:
            if reused.shape[0] != len(completion_ids_list):
                raise RuntimeError(f"{reused.shape[0]} reused hidden-state rows for {len(completion_ids_list)} rows")
            self.setpo_last_embed_source = source
            return reused, capture.seconds
        return self._policy_forward(output, completion_ids_list), 0.0

    def _policy_forward(self, output: dict[str, Any], completion_ids_list: list) -> torch.Tensor:
        """(B_local, H) policy embeddings from one extra no-grad forward of the policy over the batch (eval mode)."""
        self.setpo_last_embed_source = "extra"
        # Pool over the generated tokens themselves: completion_mask may be zeroed for truncated completions.
        completion_ids = output["completion_ids"]
        lengths = torch.tensor([len(ids) for ids in completion_ids_list], device=completion_ids.device)
        positions = torch.arange(completion_ids.shape[1], device=completion_ids.device)
        gen_mask = (positions.unsqueeze(0) < lengths.unsqueeze(1)).to(output["completion_mask"].dtype)
        return policy_embeddings(
            self.model,
            output["prompt_ids"],
            output["prompt_mask"],
            completion_ids,
            gen_mask,
            max_tokens=self.args.setpo_embed_max_length,
            autocast=self.accelerator.autocast,
            chunk_tokens=self.args.setpo_policy_chunk_tokens,
        )
