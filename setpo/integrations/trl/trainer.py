"""``SetPOTrainer``: TRL's ``GRPOTrainer`` with A_hat = A_bar + lambda * s (paper eq. 6) and group-level rewards."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from accelerate.utils import broadcast_object_list, gather_object
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import nanstd

from setpo.core import setpo_advantages
from setpo.core.controls import placebo_permutation, ratio_lambda, warmup_factor
from setpo.embedders import Embedder, build_embedder, embed_texts, embedder_accepts, is_policy_embedder
from setpo.integrations.trl.config import ANSWER_EXTRACTORS, SetPOConfig, check_group_size
from setpo.integrations.trl.distributed import BatchCredits, credits_for_local_rows
from setpo.integrations.trl.embedding import HiddenStateCapture, policy_embeddings, texts_for_embedding
from setpo.integrations.trl.group_rewards import GroupRewardFunction, completion_text
from setpo.methods import GroupBatch

_NOT_REWARD_COLUMNS = ("prompt", "completion", "completion_ids")


def _zero_reward(prompts, completions, **kwargs) -> list[float]:
    # Stands in for a group reward during TRL's per-process pass; the real column is filled after gathering.
    return [0.0] * len(completions)


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


class SetPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages get the SetPO credit: A_hat_i = A_bar_i + lambda * s_i (eq. 6).

    Takes GRPOTrainer's arguments, positionally or by name, plus ``embedder``: an object following the
    ``Embedder`` protocol, used instead of ``args.setpo_embedder``.

    After TRL's own ``_generate_and_score_completions`` (rewards gathered, base advantages A_bar computed and
    sliced), every process embeds its completions, the embeddings are gathered, each group of G consecutive
    rows gets its kernel and leave-one-out credits (Lemma D.1), and each process adds lambda * s to its own
    slice. ``setpo_lambda=0`` without a target ratio skips all of it (plain GRPO, bit for bit).

    Rows kept out of the kernel get no credit and do not shift their group's credits: unscorable completions
    (every reward function returned None, so TRL sets A_bar = 0) and, with ``mask_truncated_completions``, the
    truncated completions TRL masks out of the loss. A group keeping fewer than 3 rows gets no credit; so does
    every group of an evaluation with ``num_generations_eval`` < 3.

    Controls (``SetPOConfig``): ``setpo_target_ratio`` sets lambda each training step to
    target * mean|A_bar| / mean|s| over the kernel rows (the previous value is kept when either mean is 0);
    ``setpo_lambda_warmup_steps`` scales lambda by min(1, global_step / warm-up); ``setpo_placebo`` gives
    every row the credit of a row of another group (the same permutation on every process). ``args.setpo_lambda``
    may be raised from 0 during training (e.g. by a callback): the embedder is then built at the first step that
    needs it.

    Reward functions wrapped in ``GroupRewardFunction`` (e.g. ``gapo_reward_func``) are scored once, by the main
    process, on the gathered batch (so groups split across processes are seen whole) and the result is
    broadcast: every process uses the same rewards even when the function is not deterministic.

    The ``"policy"`` embedder reuses a forward pass TRL already runs over the batch, so the credit costs no forward
    of its own there: the one seam is ``_get_per_token_logps_and_entropies``, whose calls during the batch's scoring
    are recorded (:class:`~setpo.integrations.trl.embedding.HiddenStateCapture`: a hook on the decoder pools the
    last hidden states over the completion tokens, the same pooling as the extra forward). Sources, in the order
    of ``setpo_policy_hidden_sources``: ``"old"``, the old per-token log-probs (the current policy; TRL runs it when
    ``num_iterations > 1``, when ``gradient_accumulation_steps`` is not a multiple of ``steps_per_generation *
    num_iterations``, or for vLLM importance sampling). Where it does not run (TRL's default ``num_iterations=1``)
    the policy runs one extra no-grad forward over the batch in eval mode (``setpo_policy_chunk_tokens`` tokens per
    pass): about the cost of the old log-prob pass, a third of a forward + backward. Opt-in: ``("old", "ref")``
    also reuses the reference log-prob pass (``beta != 0``: the reference model, or the PEFT base with the adapter
    off), which is the *start* policy: a frozen embedder equal to the current policy's hidden states only at the
    first step, so "policy" then no longer means the current policy. ``()`` always runs the extra forward. Set it
    on the class or instance. TRL runs its pass with the model in training
    mode (dropout on if the model has any; TRL's ``disable_dropout`` turns it off), the extra forward in eval mode.

    Metrics: setpo/lambda (effective), setpo/placebo (1 or 0), setpo/credit_mean, setpo/credit_std (over kernel
    rows), setpo/shaping_ratio (mean |lambda s| / mean |A_bar| over kernel rows), setpo/diversity (mean
    D(Omega)), setpo/kernel_row_frac, setpo/embed_time_s and setpo/credit_time_s (slowest process), and with the
    policy embedder setpo/policy_forward_reused (1 when TRL's pass was reused, 0 for an extra forward); with
    ``log_completions`` the completions table gets a ``setpo_credit`` column beside TRL's (base) advantage.

    Other diversity methods (``diversity_method``, a ``setpo.methods`` name) replace the credit. After TRL's step,
    one ``GroupBatch`` is built over the gathered batch with only the inputs the method declares (embeddings from
    the same embedder path as the credit, texts from the completions, answers from ``answer_extractor`` or
    ``diversity_answer_extractor``, valid sets from ``diversity_valid_set_column``, correct = reward >
    ``diversity_correct_threshold``). A "reward" method maps the summed rewards R to R~, and the advantages are
    TRL's group normalisation of R~ (``scale_rewards``; centring only for a method with ``group_scale="none"``,
    e.g. DARLING). An "advantage" method maps TRL's A_bar of the gathered batch to its advantages. Each process
    keeps its own rows, as for the credit. Unscorable rows enter the method with reward 0 and keep advantage 0.
    ``entropy_bonus`` is TRL's own ``entropy_coef`` (set by the config). Metrics: method/<name>/reward_delta
    (mean |R~ - R|, reward methods), method/<name>/advantage_delta (mean |A - A_bar|) and method/<name>/time_s (the
    method's inputs, call and normalisation on the slowest process).
    """

    #: TRL passes whose hidden states the "policy" embedder reuses, in order of preference ("old", and opt-in "ref").
    setpo_policy_hidden_sources: tuple[str, ...] = ("old",)

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: SetPOConfig | None = None,
        *positional,
        embedder=None,
        answer_extractor: Callable[[str], str | None] | None = None,
        **kwargs,
    ):
        if args is None:
            name = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "")
            args = SetPOConfig(f"{str(name).split('/')[-1] or 'model'}-SetPO")
        if not isinstance(args, SetPOConfig):
            kind = "GRPOConfig" if isinstance(args, GRPOConfig) else type(args).__name__
            raise ValueError(f"SetPOTrainer needs a SetPOConfig, got {kind}; build one with SetPOConfig(...)")
        args._validate_setpo()  # fields may have been changed after construction
        if embedder is not None and not callable(embedder):
            raise ValueError(f"embedder must follow the Embedder protocol (texts -> (N, d)), got {type(embedder)}")
        if answer_extractor is not None and not callable(answer_extractor):
            raise ValueError(
                f"answer_extractor must be callable (completion text -> answer or None), got {answer_extractor!r}"
            )
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        self._method_answer = answer_extractor or ANSWER_EXTRACTORS[self.args.diversity_answer_extractor]
        self._method_rewards_per_func: torch.Tensor | None = None
        self._method_valid: list | None = None
        self.method_last: dict[str, Any] | None = None  # the last batch of a diversity method (inputs and outputs)
        self._setpo_local_rows: tuple[list, list, list] | None = None
        self._setpo_capture: HiddenStateCapture | None = None
        self.setpo_last_embed_source: str | None = None  # policy embedder: "old", "ref" or "extra" (own forward)
        self._setpo_unscorable: torch.Tensor | None = None
        self._setpo_embedder_arg = embedder
        self._setpo_use_policy = embedder is None and is_policy_embedder(self.args.setpo_embedder)
        self._setpo_ratio_lambda = {"train": 0.0, "eval": 0.0}  # last lambda set from the target ratio, per mode
        self.setpo_last_credits: BatchCredits | None = None  # the credits added (after the placebo, if on)
        self.setpo_last_unpermuted_credits: BatchCredits | None = None  # the batch's own credits
        self.setpo_last_lambda: float | None = None
        self.setpo_embedder: Embedder | None = None
        if self._setpo_needs_embeddings():
            self._setpo_build_embedder()

    def _setpo_enabled(self) -> bool:
        return self.args.setpo_enabled

    def _method_active(self) -> bool:
        """A diversity method other than the SetPO credit changes rewards or advantages here."""
        return self.args.diversity_method != "setpo" and self.args.method.entry in ("reward", "advantage")

    def _setpo_needs_embeddings(self) -> bool:
        """The credit is on, or the active diversity method reads embeddings."""
        if self._method_active():
            return "embeddings" in self.args.method.required_inputs(**self.args.method_params)
        return self._setpo_enabled()

    def _setpo_build_embedder(self) -> None:
        """Build the text embedder once (at construction, or at the first step with the credit on)."""
        if self._setpo_use_policy or self.setpo_embedder is not None:
            return
        if self._setpo_embedder_arg is not None:
            self.setpo_embedder = self._setpo_embedder_arg
            return
        self.setpo_embedder = build_text_embedder(
            self.args.setpo_embedder,
            device=self.accelerator.device,
            batch_size=self.args.setpo_embed_batch_size,
            max_length=self.args.setpo_embed_max_length,
            accelerator=self.accelerator,
        )

    # -- rewards -----------------------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's per-process rewards, then every GroupRewardFunction column scored once on the gathered batch."""
        rewards_per_func = self._setpo_calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self._method_active():
            self._method_rewards_per_func = rewards_per_func
            if "valid_sets" in self.args.method.required_inputs(**self.args.method_params):
                column = self.args.diversity_valid_set_column
                if column not in inputs[0]:
                    raise ValueError(
                        f"diversity_method={self.args.diversity_method!r} needs the dataset column {column!r} "
                        "(valid answers per prompt; set diversity_valid_set_column)"
                    )
                self._method_valid = gather_object([example[column] for example in inputs])
        return rewards_per_func

    def _setpo_calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._setpo_local_rows = (list(prompts), list(completions), list(completion_ids_list))
        group_idx = [i for i, f in enumerate(self.reward_funcs) if isinstance(f, GroupRewardFunction)]
        if not group_idx:
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._setpo_unscorable = torch.isnan(rewards_per_func).all(dim=1).cpu()
            return rewards_per_func
        originals = list(self.reward_funcs)
        try:
            for i in group_idx:
                self.reward_funcs[i] = _zero_reward
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.reward_funcs[:] = originals

        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        keys = [k for k in inputs[0] if k not in _NOT_REWARD_COLUMNS]
        columns = {k: gather_object([example[k] for example in inputs]) for k in keys}
        all_prompts, all_completions = gather_object(list(prompts)), gather_object(list(completions))
        all_ids = gather_object([list(ids) for ids in completion_ids_list])
        for i in group_idx:
            r = self._score_group_reward_once(
                originals[i],
                lambda fn=originals[i]: fn.score(
                    all_prompts, all_completions, G, completion_ids=all_ids, trainer_state=self.state, **columns
                ),
            )
            if r.shape[0] != rewards_per_func.shape[0]:
                raise ValueError(f"group reward gave {r.shape[0]} rows, gathered batch has {rewards_per_func.shape[0]}")
            rewards_per_func[:, i] = r.to(rewards_per_func.device)
        self._setpo_unscorable = torch.isnan(rewards_per_func).all(dim=1).cpu()
        return rewards_per_func

    def _score_group_reward_once(self, fn: GroupRewardFunction, score) -> torch.Tensor:
        """``score()`` run on the main process only and broadcast, so every process gets the same rewards."""
        if self.accelerator.num_processes == 1:
            return score()
        payload: list[Any] = [None]
        error: BaseException | None = None
        if self.accelerator.is_main_process:
            try:
                payload[0] = score().tolist()
            except Exception as err:  # every process must leave the broadcast, then all raise
                error = err
                payload[0] = f"{type(err).__name__}: {err}"
        broadcast_object_list(payload, from_process=0)
        if error is not None:
            raise error
        if isinstance(payload[0], str):
            raise RuntimeError(f"group reward {fn.__name__!r} failed on the main process: {payload[0]}")
        return torch.tensor(payload[0], dtype=torch.float32)

    # -- credits -----------------------------------------------------------------------------------------------

    def _setpo_embed_local(
        self, output: dict[str, Any], rows: tuple[list, list, list] | None, reused: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B_local, d) embeddings of this process's rows (``rows``: the prompts, completions and completion ids
        recorded during this batch's reward pass; ``reused``: the policy's pooled hidden states from TRL's pass)."""
        if rows is None:
            raise RuntimeError("completions of this batch were not recorded (the reward pass did not run)")
        prompts, completions, completion_ids_list = rows
        if len(completions) != output["advantages"].shape[0]:
            raise RuntimeError(f"{len(completions)} recorded completions for {output['advantages'].shape[0]} rows")
        if not self._setpo_use_policy:
            texts = texts_for_embedding(prompts, completions, self.args.setpo_embed_field)
            return embed_texts(self.setpo_embedder, texts, self.args.setpo_embed_batch_size)
        if any(k in output for k in ("pixel_values", "image_grid_thw")):
            raise ValueError("setpo_embedder='policy' does not support multimodal inputs; use a text embedder")
        if reused is not None:
            if reused.shape[0] != len(completions):
                raise RuntimeError(f"{reused.shape[0]} reused hidden-state rows for {len(completions)} completions")
            return reused
        return self._setpo_policy_forward(output, completion_ids_list)

    def _setpo_policy_forward(self, output: dict[str, Any], completion_ids_list: list) -> torch.Tensor:
        """(B_local, H) policy embeddings from one extra no-grad forward of the policy over the batch (eval mode)."""
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

    def _setpo_kernel_rows(self, rows: tuple[list, list, list], n_rows: int) -> torch.Tensor:
        """(N,) bool over the gathered batch: rows that enter the kernel (scorable, and not masked as truncated)."""
        unscorable = self._setpo_unscorable
        keep = torch.ones(n_rows, dtype=torch.bool) if unscorable is None else ~unscorable
        if keep.shape != (n_rows,):
            raise RuntimeError(f"{keep.shape[0]} reward rows recorded for a gathered batch of {n_rows}")
        if self.mask_truncated_completions:
            # TRL's own test: a completion is truncated when its last token is neither EOS nor padding.
            eos_and_pad = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            truncated = torch.tensor([bool(ids) and ids[-1] not in eos_and_pad for ids in rows[2]], dtype=torch.long)
            truncated = self.accelerator.gather(truncated.to(self.accelerator.device)).cpu().bool()
            keep &= ~truncated
        return keep

    def _setpo_placebo(self, credits: BatchCredits, group_size: int, mode: str) -> BatchCredits:
        """Every row takes the credit of a row of another group (the same permutation on every process)."""
        N = credits.all.shape[0]
        if N // group_size < 2:
            raise ValueError(
                f"setpo_placebo needs at least 2 groups in the gathered batch to move credits across groups; this "
                f"{mode} batch has {N} rows = 1 group of {group_size}. Use more prompts per step."
            )
        seed = (int(self.args.seed) * 1_000_003 + 2 * int(self.state.global_step) + (mode == "eval")) % 2**63
        perm = placebo_permutation(torch.arange(N) // group_size, torch.Generator().manual_seed(seed))
        defined = credits.defined_rows
        s = credits.all[perm.to(credits.all.device)]
        s[~defined.to(s.device)] = 0.0  # rows outside the kernel never get a credit
        B_local = credits.local.shape[0]
        start = self.accelerator.process_index * B_local
        return BatchCredits(local=s[start : start + B_local], all=s, diversity=credits.diversity, defined=defined)

    def _setpo_lambda_now(self, mode: str, credits: BatchCredits, all_base: torch.Tensor) -> float:
        """Effective lambda: fixed or set from the target ratio over the kernel rows, times the warm-up factor."""
        target = self.args.setpo_target_ratio
        if target is None:
            lam = self.args.setpo_lambda
        else:
            defined = credits.defined_rows.to(all_base.device)
            r = ratio_lambda(credits.all.to(all_base.device)[defined], all_base[defined], target)
            if r is not None:
                self._setpo_ratio_lambda[mode] = r
            lam = self._setpo_ratio_lambda[mode]
        return lam * warmup_factor(int(self.state.global_step), self.args.setpo_lambda_warmup_steps)

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

    def _setpo_reused_hidden(self, output: dict[str, Any], capture: HiddenStateCapture | None) -> torch.Tensor | None:
        """The pooled hidden states of the first TRL pass in ``setpo_policy_hidden_sources`` that ran, or None."""
        if capture is None:
            return None
        # TRL runs the old pass (if at all) before the reference pass; the output says which ran.
        ran = [k for k in ("old", "ref") if output.get(f"{k}_per_token_logps") is not None]
        if len(ran) != len(capture.pooled):  # another call came through the seam: trust none of them
            return None
        by_source = dict(zip(ran, capture.pooled))
        for source in self.setpo_policy_hidden_sources:
            if by_source.get(source) is not None:
                self.setpo_last_embed_source = source
                return by_source[source]
        return None

    def _generate_and_score_completions(self, inputs):
        self._setpo_local_rows = None
        self._setpo_unscorable = None
        self.setpo_last_embed_source = None
        self._method_rewards_per_func = None
        self._method_valid = None
        capture = None
        if self._setpo_use_policy and self._setpo_needs_embeddings() and self.setpo_policy_hidden_sources:
            unknown = set(self.setpo_policy_hidden_sources) - {"old", "ref"}
            if unknown:
                raise ValueError(f"setpo_policy_hidden_sources may hold only 'old' and 'ref', got {sorted(unknown)}")
            capture = HiddenStateCapture(max_tokens=self.args.setpo_embed_max_length)
        self._setpo_capture = capture
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._setpo_capture = None
        rows, self._setpo_local_rows = self._setpo_local_rows, None  # this batch's rows only, never a stale one
        if self._method_active():
            return self._method_step(output, rows, capture)
        if not self._setpo_enabled():
            return output
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        if G < 3:
            if mode == "train":  # lambda was raised after construction
                check_group_size(G, "num_generations")
            return output  # evaluation with G = 1 or 2: the credit is undefined, A_bar is kept
        self._setpo_build_embedder()
        device = self.accelerator.device

        reused = self._setpo_reused_hidden(output, capture) if self._setpo_use_policy else None
        if self._setpo_use_policy and reused is None:
            self.setpo_last_embed_source = "extra"
        t0 = time.perf_counter()
        local = self._setpo_embed_local(output, rows, reused).to(device=device, dtype=torch.float32).contiguous()
        t1 = time.perf_counter()
        t_embed = t1 - t0 + (capture.seconds if reused is not None else 0.0)  # the pooling ran inside TRL's pass
        gathered = self.accelerator.gather(local)
        per_process = list(gathered.split(local.shape[0]))
        kernel_rows = self._setpo_kernel_rows(rows, gathered.shape[0])
        credits = credits_for_local_rows(
            per_process,
            self.accelerator.process_index,
            G,
            clamp=self.args.setpo_kernel_clamp,
            shaping=self.args.setpo_shaping,
            kernel_rows=kernel_rows,
        )
        self.setpo_last_unpermuted_credits = credits
        if self.args.setpo_placebo:
            credits = self._setpo_placebo(credits, G, mode)
        base = output["advantages"]
        all_base = self.accelerator.gather(base.contiguous()).double()
        lam = self._setpo_lambda_now(mode, credits, all_base)
        output["advantages"] = setpo_advantages(base, credits.local.to(device=base.device, dtype=base.dtype), lam)
        t2 = time.perf_counter()
        self.setpo_last_credits = credits
        self.setpo_last_lambda = lam
        self._setpo_log(mode, credits, all_base, lam, t_embed, t2 - t1)
        if self._setpo_use_policy:
            self._metrics[mode]["setpo/policy_forward_reused"].append(float(reused is not None))
        return output

    # -- other diversity methods -------------------------------------------------------------------------------

    def _method_batch(
        self, output: dict[str, Any], rows: tuple[list, list, list] | None, capture, rewards: torch.Tensor, G: int
    ) -> GroupBatch:
        """One GroupBatch over the gathered batch, holding only the inputs the method reads."""
        if rows is None:
            raise RuntimeError("completions of this batch were not recorded (the reward pass did not run)")
        needs = self.args.method.required_inputs(**self.args.method_params)
        fields: dict[str, Any] = {}
        if needs & {"texts", "answers"}:
            texts = gather_object([completion_text(c) for c in rows[1]])
            if "texts" in needs:
                fields["texts"] = texts
            if "answers" in needs:
                fields["answers"] = [self._method_answer(t) for t in texts]
        if "embeddings" in needs:
            self._setpo_build_embedder()
            reused = self._setpo_reused_hidden(output, capture) if self._setpo_use_policy else None
            local = self._setpo_embed_local(output, rows, reused)
            local = local.to(device=self.accelerator.device, dtype=torch.float32).contiguous()
            fields["embeddings"] = self.accelerator.gather(local).to(rewards.device)
        if "valid_sets" in needs:
            fields["valid_sets"] = list(self._method_valid[::G])
        if "correct" in needs:
            fields["correct"] = rewards > self.args.diversity_correct_threshold
        unknown = needs - {"rewards", *fields}
        if unknown:
            raise ValueError(
                f"diversity_method={self.args.diversity_method!r} needs {sorted(unknown)}, which TRL lacks"
            )
        return GroupBatch.from_rows(rewards, G, **fields)

    def _method_normalise(self, rewards: torch.Tensor, G: int) -> torch.Tensor:
        """A_i = (R_i - mean_group R) / (std + 1e-4), TRL's sum_then_normalize (GRPO, SetPO paper Sec. 2), NaN rows out.

        ``scale_rewards`` chooses the std (group, batch or none); a method with ``group_scale="none"`` centres only.
        """
        scale = "none" if self.args.method.group_scale == "none" else self.scale_rewards
        grouped = rewards.view(-1, G)
        advantages = rewards - torch.nanmean(grouped, dim=1).repeat_interleave(G)
        if scale == "group":
            std = nanstd(grouped, dim=1).repeat_interleave(G) if G > 1 else torch.zeros_like(rewards)
            advantages = advantages / (std + 1e-4)
        elif scale == "batch":
            std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
            advantages = advantages / (std + 1e-4)
        return torch.nan_to_num(advantages, nan=0.0)

    def _method_step(self, output: dict[str, Any], rows: tuple[list, list, list] | None, capture) -> dict[str, Any]:
        """Rewards or advantages of the gathered batch from the diversity method; this process keeps its rows."""
        t0 = time.perf_counter()
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        method, params, name = self.args.method, self.args.method_params, self.args.diversity_method
        rpf = self._method_rewards_per_func
        if rpf is None:
            raise RuntimeError("rewards of this batch were not recorded (the reward pass did not run)")
        unscorable = torch.isnan(rpf).all(dim=1)
        rewards = (rpf * self.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)  # TRL's summed reward
        base = output["advantages"]
        all_base = self.accelerator.gather(base.contiguous()).to(rewards.device)
        batch = self._method_batch(output, rows, capture, rewards, G)
        m = self._metrics[mode]
        new_rewards = None
        if method.entry == "reward":
            new_rewards = method(batch, **params).reshape(-1).to(rewards.dtype)
            m[f"method/{name}/reward_delta"].append((new_rewards - rewards)[~unscorable].abs().mean().item())
            new_rewards = new_rewards.masked_fill(unscorable, float("nan"))
            advantages = self._method_normalise(new_rewards, G)
        else:
            advantages = method(batch, all_base.view(-1, G).to(rewards.dtype), **params).reshape(-1)
            advantages = advantages.masked_fill(unscorable, 0.0)
        m[f"method/{name}/advantage_delta"].append((advantages - all_base.to(advantages.dtype)).abs().mean().item())
        B_local = base.shape[0]
        start = self.accelerator.process_index * B_local
        output["advantages"] = advantages[start : start + B_local].to(device=base.device, dtype=base.dtype)
        self.method_last = {"batch": batch, "rewards": new_rewards, "base": all_base, "advantages": advantages}
        self._logs["extra"]["method_advantage"].extend(advantages.tolist())
        seconds = torch.tensor([time.perf_counter() - t0], device=self.accelerator.device, dtype=torch.float64)
        m[f"method/{name}/time_s"].append(self.accelerator.gather(seconds).max().item())  # the slowest process
        return output

    def _setpo_log(
        self, mode: str, credits: BatchCredits, all_base: torch.Tensor, lam: float, t_embed, t_credit
    ) -> None:
        times = self.accelerator.gather(
            torch.tensor([[t_embed, t_credit]], device=self.accelerator.device, dtype=torch.float64)
        )
        defined = credits.defined_rows
        s = credits.all.double().cpu()[defined.cpu()]
        a = all_base.cpu()[defined.cpu()]
        m = self._metrics[mode]
        m["setpo/lambda"].append(float(lam))
        m["setpo/placebo"].append(1.0 if self.args.setpo_placebo else 0.0)
        m["setpo/kernel_row_frac"].append(defined.double().mean().item())
        if s.numel() > 0:
            m["setpo/credit_mean"].append(s.mean().item())
            m["setpo/credit_std"].append(s.std().item() if s.numel() > 1 else 0.0)
            denominator = a.abs().mean().item()
            if denominator > 0:  # all-tied rewards give A_bar = 0: the ratio is undefined, nothing is logged
                m["setpo/shaping_ratio"].append(lam * s.abs().mean().item() / denominator)
        diversity = credits.diversity[~torch.isnan(credits.diversity)]
        if diversity.numel() > 0:
            m["setpo/diversity"].append(diversity.mean().item())
        m["setpo/embed_time_s"].append(times[:, 0].max().item())
        m["setpo/credit_time_s"].append(times[:, 1].max().item())
        # Completions table (log_completions): the credit of every gathered row beside TRL's A_bar.
        self._logs["extra"]["setpo_credit"].extend(credits.all.tolist())
