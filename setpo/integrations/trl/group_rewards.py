"""Reward functions that score whole groups (e.g. a judge of a group's answers) on the batch gathered across processes.

TRL calls reward functions on each process's local rows and gathers the rewards afterwards, so a function that
looks at the other members of a group would see only part of a group that straddles two processes. A
``GroupRewardFunction`` is instead called by ``SetPOTrainer`` on the gathered prompts, completions and dataset
columns (concatenated in process order, as ``gather_object`` does), with the group size G: groups are G
consecutive rows. The main process scores the gathered batch once and broadcasts the rewards, so every group is
scored exactly once and every process uses the same numbers, even for a non-deterministic reward (an LLM judge,
an API call, sampling). GAPO's frequency reward is the method ``diversity_method="gapo"`` (`setpo.methods`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from accelerate.utils import broadcast_object_list, gather_object

from setpo._validate import check_callable, check_same_len

_NOT_REWARD_COLUMNS = ("prompt", "completion", "completion_ids")


def completion_text(completion: Any) -> str:
    """Plain text of a TRL completion: a string, or a list of chat messages (their text contents joined)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, list):
        parts = []
        for message in completion:
            content = message.get("content", "") if isinstance(message, dict) else message
            if isinstance(content, list):  # content blocks
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            parts.append("" if content is None else str(content))
        return "\n".join(parts)
    raise ValueError(f"cannot read text from a completion of type {type(completion).__name__}")


class GroupRewardFunction:
    """Wraps ``fn(prompts, completions, group_size, **kwargs) -> list[float]`` over the gathered batch.

    kwargs carry the dataset columns (one value per row), ``completion_ids`` and ``trainer_state``.
    Only ``SetPOTrainer`` knows how to call it; calling it like a per-process TRL reward raises.
    """

    def __init__(self, fn: Callable[..., Sequence[float | None]], name: str | None = None):
        check_callable(fn, "fn")
        self.fn = fn
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)

    def score(self, prompts: Sequence[Any], completions: Sequence[Any], group_size: int, **kwargs) -> torch.Tensor:
        """Rewards (N,) float32 for the gathered batch; ``None`` entries become NaN as in TRL."""
        N = check_same_len(prompts=prompts, completions=completions)
        if not isinstance(group_size, int) or group_size < 1 or N % group_size != 0:
            raise ValueError(f"{N} rows cannot be split into groups of {group_size!r}")
        out = list(self.fn(prompts, completions, group_size, **kwargs))
        check_same_len(**{f"rewards from group reward {self.__name__!r}": out, "completions": completions})
        vals = [math.nan if r is None else float(r) for r in out]
        return torch.tensor(vals, dtype=torch.float32)

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"group reward {self.__name__!r} needs whole groups gathered across processes; pass it to SetPOTrainer "
            "(which calls .score on the gathered batch), not to GRPOTrainer"
        )

    def __repr__(self) -> str:
        return f"GroupRewardFunction({self.__name__})"


def _zero_reward(prompts, completions, **kwargs) -> list[float]:
    # Stands in for a group reward during TRL's per-process pass; the real column is filled after gathering.
    return [0.0] * len(completions)


class GroupRewardScoring:
    """Mixin for a ``GRPOTrainer``: every ``GroupRewardFunction`` column scored once, on the gathered batch.

    TRL scores its per-process reward functions as usual (a group reward stands in as zeros); then the main process
    scores each group reward on the gathered prompts, completions and dataset columns, and broadcasts the result.
    """

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
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
        G = self.num_generations if self.model.training else self.num_generations_eval
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
