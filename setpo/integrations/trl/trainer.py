"""``SetPOTrainer``: TRL's ``GRPOTrainer`` with A_hat = A_bar + lambda * s (paper eq. 6) and group-level rewards."""

from __future__ import annotations

import time
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOConfig, GRPOTrainer

from setpo.core import setpo_advantages
from setpo.embedders import Embedder, build_embedder
from setpo.integrations.trl.config import SetPOConfig
from setpo.integrations.trl.distributed import BatchCredits, credits_for_local_rows
from setpo.integrations.trl.embedding import embed_texts, policy_embeddings, texts_for_embedding
from setpo.integrations.trl.group_rewards import GroupRewardFunction

_NOT_REWARD_COLUMNS = ("prompt", "completion", "completion_ids")


def _zero_reward(prompts, completions, **kwargs) -> list[float]:
    # Stands in for a group reward during TRL's per-process pass; the real column is filled after gathering.
    return [0.0] * len(completions)


def build_text_embedder(spec: str, device: Any = None, batch_size: int = 64, max_length: int | None = None) -> Embedder:
    """``setpo.embedders.build_embedder(spec)`` with device / batching / truncation where the embedder takes them."""
    try:
        return build_embedder(spec, device=device, batch_size=batch_size, max_length=max_length)
    except TypeError as err:
        if "unexpected keyword argument" not in str(err):
            raise
    # Model-free embedders (e.g. "hashed") have no batch size or token limit.
    return build_embedder(spec)


class SetPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages get the SetPO credit: A_hat_i = A_bar_i + lambda * s_i (eq. 6).

    After TRL's own ``_generate_and_score_completions`` (rewards gathered, base advantages A_bar computed and
    sliced), every process embeds its completions, the embeddings are gathered, each group of G consecutive
    rows gets its kernel and leave-one-out credits (Lemma D.1), and each process adds lambda * s to its own
    slice. ``setpo_lambda=0`` skips all of it (plain GRPO, bit for bit).

    ``embedder``: an object following the ``Embedder`` protocol, used instead of ``args.setpo_embedder``.
    Reward functions wrapped in ``GroupRewardFunction`` (e.g. ``gapo_reward_func``) are scored on the
    gathered batch, so groups split across processes are seen whole.
    Metrics: setpo/credit_mean, setpo/credit_std, setpo/shaping_ratio (mean |lambda s| / mean |A_bar|),
    setpo/diversity (mean D(Omega)), setpo/embed_time_s and setpo/credit_time_s (slowest process); with
    ``log_completions`` the completions table gets a ``setpo_credit`` column beside TRL's (base) advantage.
    """

    def __init__(self, model, reward_funcs=None, args: SetPOConfig | None = None, *, embedder=None, **kwargs):
        if args is None:
            name = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "")
            args = SetPOConfig(f"{str(name).split('/')[-1] or 'model'}-SetPO")
        if not isinstance(args, SetPOConfig):
            kind = "GRPOConfig" if isinstance(args, GRPOConfig) else type(args).__name__
            raise ValueError(f"SetPOTrainer needs a SetPOConfig, got {kind}; build one with SetPOConfig(...)")
        args._validate_setpo()  # fields may have been changed after construction
        if embedder is not None and not callable(embedder):
            raise ValueError(f"embedder must follow the Embedder protocol (texts -> (N, d)), got {type(embedder)}")
        super().__init__(model, reward_funcs, args, **kwargs)
        self._setpo_local_rows: tuple[list, list, list] | None = None
        self.setpo_last_credits: BatchCredits | None = None
        self.setpo_embedder: Embedder | None = None
        self._setpo_use_policy = False
        if self.args.setpo_lambda > 0:
            if embedder is not None:
                self.setpo_embedder = embedder
            elif self.args.setpo_embedder.strip().lower() == "policy":
                self._setpo_use_policy = True
            else:
                self.setpo_embedder = build_text_embedder(
                    self.args.setpo_embedder,
                    device=self.accelerator.device,
                    batch_size=self.args.setpo_embed_batch_size,
                    max_length=self.args.setpo_embed_max_length,
                )

    # -- rewards -----------------------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's per-process rewards, then every GroupRewardFunction column recomputed on the gathered batch."""
        self._setpo_local_rows = (list(prompts), list(completions), list(completion_ids_list))
        group_idx = [i for i, f in enumerate(self.reward_funcs) if isinstance(f, GroupRewardFunction)]
        if not group_idx:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
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
            r = originals[i].score(
                all_prompts, all_completions, G, completion_ids=all_ids, trainer_state=self.state, **columns
            )
            if r.shape[0] != rewards_per_func.shape[0]:
                raise ValueError(f"group reward gave {r.shape[0]} rows, gathered batch has {rewards_per_func.shape[0]}")
            rewards_per_func[:, i] = r.to(rewards_per_func.device)
        return rewards_per_func

    # -- credits -----------------------------------------------------------------------------------------------

    def _setpo_embed_local(self, output: dict[str, Any], rows: tuple[list, list, list] | None) -> torch.Tensor:
        """(B_local, d) embeddings of this process's rows (``rows``: the prompts, completions and completion ids
        recorded during this batch's reward pass)."""
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
            batch_size=self.args.setpo_embed_batch_size,
            max_tokens=self.args.setpo_embed_max_length,
            autocast=self.accelerator.autocast,
        )

    def _generate_and_score_completions(self, inputs):
        self._setpo_local_rows = None
        output = super()._generate_and_score_completions(inputs)
        rows, self._setpo_local_rows = self._setpo_local_rows, None  # this batch's rows only, never a stale one
        lam = self.args.setpo_lambda
        if lam == 0.0:
            return output
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        device = self.accelerator.device

        t0 = time.perf_counter()
        local = self._setpo_embed_local(output, rows).to(device=device, dtype=torch.float32).contiguous()
        t1 = time.perf_counter()
        gathered = self.accelerator.gather(local)
        per_process = list(gathered.split(local.shape[0]))
        credits = credits_for_local_rows(
            per_process,
            self.accelerator.process_index,
            G,
            clamp=self.args.setpo_kernel_clamp,
            shaping=self.args.setpo_shaping,
        )
        base = output["advantages"]
        output["advantages"] = setpo_advantages(base, credits.local.to(device=base.device, dtype=base.dtype), lam)
        t2 = time.perf_counter()
        self.setpo_last_credits = credits
        self._setpo_log(mode, credits, base, lam, t1 - t0, t2 - t1)
        return output

    def _setpo_log(self, mode: str, credits: BatchCredits, base: torch.Tensor, lam: float, t_embed, t_credit) -> None:
        all_base = self.accelerator.gather(base.contiguous()).double()
        times = self.accelerator.gather(torch.tensor([[t_embed, t_credit]], device=base.device, dtype=torch.float64))
        s = credits.all
        m = self._metrics[mode]
        m["setpo/credit_mean"].append(s.mean().item())
        m["setpo/credit_std"].append(s.std().item() if s.numel() > 1 else 0.0)
        denominator = all_base.abs().mean().item()
        if denominator > 0:  # all-tied rewards give A_bar = 0: the ratio is undefined, nothing is logged
            m["setpo/shaping_ratio"].append(lam * s.abs().mean().item() / denominator)
        m["setpo/diversity"].append(credits.diversity.mean().item())
        m["setpo/embed_time_s"].append(times[:, 0].max().item())
        m["setpo/credit_time_s"].append(times[:, 1].max().item())
        # Completions table (log_completions): the credit of every gathered row beside TRL's A_bar.
        self._logs["extra"]["setpo_credit"].extend(s.tolist())
