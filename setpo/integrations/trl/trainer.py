"""``SetPOTrainer``: TRL's ``GRPOTrainer`` plus one registered diversity method (SetPO by default, paper eq. 6)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import nanstd

from setpo._validate import check_callable
from setpo.core.controls import controlled_advantages, placebo_permutation, warmup_factor
from setpo.embedders import Embedder, embed_texts, is_policy_embedder
from setpo.integrations.trl.config import ANSWER_EXTRACTORS, CONTROLS, SetPOConfig, check_num_generations
from setpo.integrations.trl.embedding import build_text_embedder, texts_for_embedding
from setpo.integrations.trl.group_rewards import GroupRewardScoring, completion_text
from setpo.integrations.trl.policy_reuse import PolicyHiddenReuse
from setpo.methods import GroupBatch
from setpo.methods.advantage.setpo import setpo_credits

logger = logging.getLogger(__name__)


class SetPOTrainer(PolicyHiddenReuse, GroupRewardScoring, GRPOTrainer):
    """GRPOTrainer whose advantages come from one registered diversity method, SetPO's A_bar + lambda s (eq. 6) first.

    Takes GRPOTrainer's arguments, positionally or by name, plus ``embedder`` (an object following the ``Embedder``
    protocol, used instead of ``args.setpo_embedder``) and ``answer_extractor`` (completion text -> answer).

    One path for every method (``args.diversity_method``, a ``setpo.methods`` name): after TRL's own
    ``_generate_and_score_completions`` (rewards gathered, A_bar computed), one ``GroupBatch`` is built over the
    gathered batch with the inputs the method declares (embeddings, gathered across processes; texts; answers from
    ``answer_extractor`` or ``diversity_answer_extractor``; valid sets from ``diversity_valid_set_column``; correct =
    reward > ``diversity_correct_threshold``) and ``mask``, the rows the method may act on: rows outside it are
    unscorable completions (every reward function returned None, so TRL sets A_bar = 0) and, with
    ``mask_truncated_completions``, the truncated completions TRL masks out of the loss (SetPO leaves them out of the
    kernel). The method runs ("reward": R -> R~, then TRL's group normalisation of R~, centring only for
    ``group_scale="none"``; "advantage": A_bar -> A), and the experiment controls of `setpo.core.controls` act on its
    term u = A - A_bar at unit weight, whatever the method: ``setpo_target_ratio``, ``setpo_lambda_warmup_steps``,
    ``setpo_placebo`` (the same permutation on every process). Each process keeps its own rows. A method with a zero
    weight and no target ratio (``setpo_lambda=0``) skips all of it: plain GRPO, bit for bit. A group of fewer than
    the method's ``min_group`` acting rows keeps A_bar (SetPO: 3; so does every group of an evaluation with
    ``num_generations_eval`` < 3); a step in which the method acts on no row is reported once in the log.
    ``args.setpo_lambda`` may be raised from 0 during training (e.g. by a callback): the embedder is then built at
    the first step that needs it. ``entropy_bonus`` is TRL's own ``entropy_coef`` (set by the config).

    Reward functions wrapped in ``GroupRewardFunction`` (a reward that reads whole groups, e.g. an LLM judge of a
    group) are scored once, by the main process, on the gathered batch (`GroupRewardScoring`). GAPO is the method
    ``diversity_method="gapo"``. The ``"policy"`` embedder reuses a forward pass TRL already
    runs where it can (`PolicyHiddenReuse`).

    Metrics: setpo/lambda (the term's effective weight), setpo/placebo, setpo/credit_mean and setpo/credit_std (of u
    over acting rows; SetPO: the credit s), setpo/shaping_ratio (mean |lambda u| / mean |A_bar| over acting rows),
    setpo/kernel_row_frac (acting rows), setpo/diversity (mean D(Omega) of the groups, with embeddings; SetPO's g),
    setpo/embed_time_s and setpo/credit_time_s (slowest process), setpo/policy_forward_reused (policy embedder),
    method/<name>/advantage_delta (mean |A - A_bar|), method/<name>/time_s; for reward methods
    method/<name>/reward_delta (mean |R~ - R|) and the method's reward R~ logged as TRL logs the task reward R
    (method/<name>/reward, method/<name>/reward_std, method/<name>/frac_reward_zero_std); with ``log_completions``
    the completions table gets ``method_term`` (u) and ``method_advantage`` columns beside TRL's (base) advantage.
    """

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
        check_callable(embedder, "embedder", " (the Embedder protocol: texts -> (N, d))", none=True)
        check_callable(answer_extractor, "answer_extractor", " (completion text -> answer or None)", none=True)
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        self._method_answer = answer_extractor or ANSWER_EXTRACTORS[self.args.diversity_answer_extractor]
        self._rows: tuple[list, list, list] | None = None  # this batch's local prompts, completions, completion ids
        self._rewards_per_func: torch.Tensor | None = None  # (N, F) gathered
        self._valid: list | None = None
        self._ratio_lambda = {"train": 0.0, "eval": 0.0}  # last weight set from the target ratio, per mode
        self._reported_idle = False
        self.method_last: dict[str, Any] | None = None  # the last batch of the method (inputs and outputs)
        self._embedder_arg = embedder
        self._use_policy = embedder is None and is_policy_embedder(self.args.setpo_embedder)
        self.setpo_embedder: Embedder | None = None
        if self._needs_embeddings():
            self._build_embedder()

    def _needs(self) -> frozenset[str]:
        return self.args.method.required_inputs(**self.args.method_params)

    def _needs_embeddings(self) -> bool:
        return self.args.method_enabled and "embeddings" in self._needs()

    def _build_embedder(self) -> None:
        """Build the text embedder once (at construction, or at the first step that needs it)."""
        if self._use_policy or self.setpo_embedder is not None:
            return
        if self._embedder_arg is not None:
            self.setpo_embedder = self._embedder_arg
            return
        self.setpo_embedder = build_text_embedder(
            self.args.setpo_embedder,
            device=self.accelerator.device,
            batch_size=self.args.setpo_embed_batch_size,
            max_length=self.args.setpo_embed_max_length,
            accelerator=self.accelerator,
        )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """The rewards (group rewards scored on the gathered batch); this batch's rows recorded for the method."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rows = (list(prompts), list(completions), list(completion_ids_list))
        self._rewards_per_func = rewards_per_func
        if self.args.method_enabled and "valid_sets" in self._needs():
            column = self.args.diversity_valid_set_column
            if column not in inputs[0]:
                raise ValueError(
                    f"diversity_method={self.args.diversity_method!r} needs the dataset column {column!r} "
                    "(valid answers per prompt; set diversity_valid_set_column)"
                )
            self._valid = gather_object([example[column] for example in inputs])
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        self._rows = self._rewards_per_func = self._valid = None
        self.setpo_last_embed_source = None
        capture = self._start_capture() if self._use_policy and self._needs_embeddings() else None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._setpo_capture = None
        rows, self._rows = self._rows, None  # this batch's rows only, never a stale one
        if not self.args.method_enabled:
            return output
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        if G < self.args.method.min_group:
            if mode == "train":  # the weight was raised after construction
                check_num_generations(G, "num_generations", self.args.method)
            return output  # evaluation with too small groups: A_bar is kept
        if rows is None or self._rewards_per_func is None:
            raise RuntimeError("completions of this batch were not recorded (the reward pass did not run)")
        batch, t_embed = self._group_batch(output, rows, capture, G)
        t0 = time.perf_counter()
        base = output["advantages"]
        all_base = self.accelerator.gather(base.contiguous()).to(batch.rewards.device)
        advantages = self._method_then_controls(batch, all_base, G, mode)
        B_local = base.shape[0]
        start = self.accelerator.process_index * B_local
        output["advantages"] = advantages[start : start + B_local].to(device=base.device, dtype=base.dtype)
        self._log(mode, batch, t_embed, time.perf_counter() - t0)
        return output

    def _group_batch(self, output: dict[str, Any], rows: tuple[list, list, list], capture, G: int):
        """(one GroupBatch over the gathered batch with the inputs the method reads, seconds spent embedding)."""
        rpf = self._rewards_per_func
        unscorable = torch.isnan(rpf).all(dim=1)
        rewards = (rpf * self.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)  # TRL's summed reward
        keep = ~unscorable.cpu()
        if self.mask_truncated_completions:
            # TRL's own test: a completion is truncated when its last token is neither EOS nor padding.
            eos_and_pad = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            truncated = torch.tensor([bool(ids) and ids[-1] not in eos_and_pad for ids in rows[2]], dtype=torch.long)
            keep &= ~self.accelerator.gather(truncated.to(self.accelerator.device)).cpu().bool()
        needs = self._needs()
        fields: dict[str, Any] = {"mask": keep.to(rewards.device)}
        if needs & {"texts", "answers"}:
            texts = gather_object([completion_text(c) for c in rows[1]])
            fields["texts"] = texts if "texts" in needs else None
            fields["answers"] = [self._method_answer(t) for t in texts] if "answers" in needs else None
        t_embed = 0.0
        if "embeddings" in needs:
            t0 = time.perf_counter()
            local, t_inside = self._embed_local(output, rows, capture)
            t_embed = time.perf_counter() - t0 + t_inside
            local = local.to(device=self.accelerator.device, dtype=torch.float32).contiguous()
            fields["embeddings"] = self.accelerator.gather(local).to(rewards.device)
        if "valid_sets" in needs:
            fields["valid_sets"] = list(self._valid[::G])
        if "correct" in needs:
            fields["correct"] = rewards > self.args.diversity_correct_threshold
        unknown = needs - {"rewards", *fields}
        if unknown:
            raise ValueError(
                f"diversity_method={self.args.diversity_method!r} needs {sorted(unknown)}, which TRL lacks"
            )
        return GroupBatch.from_rows(rewards, G, **fields), t_embed

    def _embed_local(
        self, output: dict[str, Any], rows: tuple[list, list, list], capture
    ) -> tuple[torch.Tensor, float]:
        """(B_local, d) embeddings of this process's rows, and seconds of pooling spent inside TRL's own pass."""
        prompts, completions, completion_ids_list = rows
        if len(completions) != output["advantages"].shape[0]:
            raise RuntimeError(f"{len(completions)} recorded completions for {output['advantages'].shape[0]} rows")
        if self._use_policy:
            return self._policy_embed_local(output, completion_ids_list, capture)
        self._build_embedder()
        texts = texts_for_embedding(prompts, completions, self.args.setpo_embed_field)
        return embed_texts(self.setpo_embedder, texts, self.args.setpo_embed_batch_size), 0.0

    def _method_then_controls(self, batch: GroupBatch, all_base: torch.Tensor, G: int, mode: str) -> torch.Tensor:
        """The gathered batch's final advantages: the method's A, then the controls on u = A - A_bar (unit weight)."""
        args, method, params = self.args, self.args.method, dict(self.args.method_params)
        unscorable = torch.isnan(self._rewards_per_func).all(dim=1).to(batch.rewards.device)
        controls = any(getattr(args, f) != off for f, off in CONTROLS.items())
        if method.scale is not None:  # the weight is the controls' lambda; the method runs at unit weight
            lam = params[method.scale]
            params[method.scale] = 1.0
        else:
            lam = 1.0
        base64 = all_base.to(torch.float64)
        new_rewards = None
        if method.entry == "reward":
            rewards = batch.rewards.reshape(-1)
            new_rewards = method(batch, **params).reshape(-1).to(rewards.dtype)
            m, name = self._metrics[mode], method.name
            m[f"method/{name}/reward_delta"].append((new_rewards - rewards)[~unscorable].abs().mean().item())
            method_rewards = new_rewards.masked_fill(unscorable, float("nan"))
            unit, std = self._normalise(method_rewards, G)
            m[f"method/{name}/reward"].append(torch.nanmean(method_rewards).item())  # as TRL logs the task reward
            m[f"method/{name}/reward_std"].append(nanstd(method_rewards).item())
            zero_std = torch.isclose(std, torch.zeros_like(std)).float().mean().item()
            m[f"method/{name}/frac_reward_zero_std"].append(zero_std)
        else:
            unit = method(batch, base64.view(-1, G), **params).reshape(-1).masked_fill(unscorable, 0.0)
        own = term = unit.to(torch.float64) - base64
        acting = batch.acting_rows(method.min_group).reshape(-1)
        if method.scale is None and not controls:
            advantages, lam_t = unit.to(all_base.dtype), 1.0  # the method's own advantages, exactly
        else:
            placebo = self._placebo(all_base.shape[0], G, mode) if args.setpo_placebo else None
            target = args.setpo_target_ratio
            warmup = warmup_factor(int(self.state.global_step), args.setpo_lambda_warmup_steps)
            advantages, lam = controlled_advantages(
                all_base, term, acting, self._ratio_lambda[mode] if target is not None else lam,
                target_ratio=target, warmup=warmup, placebo=placebo,
            )  # fmt: skip
            if target is not None:
                self._ratio_lambda[mode] = lam
            lam_t = lam * warmup
            term = term.masked_fill(~acting, 0.0)
            if placebo is not None:
                term = term[placebo.to(term.device)].masked_fill(~acting, 0.0)
        if not bool(acting.any()) and not self._reported_idle:
            self._reported_idle = True
            logger.warning(
                "diversity_method=%r acts on no row of this %s batch (every group has fewer than %d rows in its "
                "mask: unscorable or truncated completions); such steps train on A_bar alone (reported once)",
                method.name, mode, method.min_group,
            )  # fmt: skip
        self.method_last = {
            "batch": batch, "base": all_base, "rewards": new_rewards, "own_term": own, "term": term,
            "acting": acting, "lambda": lam_t, "advantages": advantages,
        }  # fmt: skip
        return advantages

    def _normalise(self, rewards: torch.Tensor, G: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(A, std): A_i = (R_i - mean_group R) / (std + 1e-4), TRL's sum_then_normalize (GRPO, SetPO paper Sec. 2).

        NaN rows get A = 0. ``scale_rewards`` chooses the std (group, batch or none: the group's std, for logging
        only, as TRL does); a method with ``group_scale="none"`` centres only.
        """
        scale = "none" if self.args.method.group_scale == "none" else self.scale_rewards
        grouped = rewards.view(-1, G)
        advantages = rewards - torch.nanmean(grouped, dim=1).repeat_interleave(G)
        if scale == "batch":
            std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
        else:
            std = nanstd(grouped, dim=1).repeat_interleave(G) if G > 1 else torch.zeros_like(rewards)
        if scale != "none":
            advantages = advantages / (std + 1e-4)
        return torch.nan_to_num(advantages, nan=0.0), std

    def _placebo(self, N: int, G: int, mode: str) -> torch.Tensor:
        """The placebo's cross-group permutation of the gathered rows (seeded: the same on every process)."""
        if N // G < 2:
            raise ValueError(
                f"setpo_placebo needs at least 2 groups in the gathered batch to move terms across groups; this "
                f"{mode} batch has {N} rows = 1 group of {G}. Use more prompts per step."
            )
        seed = (int(self.args.seed) * 1_000_003 + 2 * int(self.state.global_step) + (mode == "eval")) % 2**63
        return placebo_permutation(torch.arange(N) // G, torch.Generator().manual_seed(seed))

    def _log(self, mode: str, batch: GroupBatch, t_embed: float, t_method: float) -> None:
        last, name, m = self.method_last, self.args.diversity_method, self._metrics[mode]
        times = self.accelerator.gather(
            torch.tensor([[t_embed, t_method]], device=self.accelerator.device, dtype=torch.float64)
        )
        acting = last["acting"].cpu()
        u = last["term"].double().cpu()[acting]
        a = last["base"].double().cpu()[acting]
        lam = float(last["lambda"])
        m["setpo/lambda"].append(lam)
        m["setpo/placebo"].append(1.0 if self.args.setpo_placebo else 0.0)
        m["setpo/kernel_row_frac"].append(acting.double().mean().item())
        if u.numel() > 0:
            m["setpo/credit_mean"].append(u.mean().item())
            m["setpo/credit_std"].append(u.std().item() if u.numel() > 1 else 0.0)
            denominator = a.abs().mean().item()
            if denominator > 0:  # all-tied rewards give A_bar = 0: the ratio is undefined, nothing is logged
                m["setpo/shaping_ratio"].append(lam * u.abs().mean().item() / denominator)
        if batch.embeddings is not None:
            params = self.args.method_params
            params = params if "shaping" in params else {}  # the method's own D (SetPO's), else the paper's kernel
            _, D = setpo_credits(batch, clamp=params.get("clamp", True), shaping=params.get("shaping", "neglog1p"))
            D = D[~torch.isnan(D)]
            if D.numel() > 0:
                m["setpo/diversity"].append(D.mean().item())
            m["setpo/embed_time_s"].append(times[:, 0].max().item())
        m["setpo/credit_time_s"].append(times[:, 1].max().item())
        if self._use_policy:
            m["setpo/policy_forward_reused"].append(float(self.setpo_last_embed_source in ("old", "ref")))
        delta = (last["advantages"].double() - last["base"].double()).abs().mean().item()
        m[f"method/{name}/advantage_delta"].append(delta)
        m[f"method/{name}/time_s"].append(times.sum(1).max().item())
        self._logs["extra"]["method_term"].extend(last["term"].tolist())
        self._logs["extra"]["method_advantage"].extend(last["advantages"].tolist())
