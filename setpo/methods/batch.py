"""`GroupBatch`: the one input every diversity method reads, B prompts x G rollouts, row-major."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from setpo._validate import as_float_tensor, check_finite, check_int, check_known, check_shape, check_strings
from setpo._validate import check_real as _check_real

#: The optional per-rollout inputs a method may declare it needs (the field names of `GroupBatch`).
INPUT_FIELDS = (
    "rewards",
    "embeddings",
    "texts",
    "answers",
    "valid_sets",
    "correct",
    "token_logprobs",
    "token_entropies",
    "response_mask",
    "mask",
)


def _text_rows(values: Any, name: str, n: int, allow_none: bool) -> tuple | None:
    """`values` as a tuple of `n` strings (or None where allowed); None stays None."""
    if values is None:
        return None
    return tuple(check_strings(values, name, n=n, none=allow_none))


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _zero_one_mask(x: Any, name: str, any_dtype: bool) -> torch.Tensor:
    """`x` as a bool tensor: bool as given, 0/1 values converted (of any dtype, or only float/int ones)."""
    c = torch.as_tensor(x)
    if c.dtype == torch.bool:
        return c
    if not (any_dtype or c.is_floating_point() or c.dtype in _INT_DTYPES):
        raise ValueError(f"{name} must be a bool mask, got dtype {c.dtype}")
    if not bool(((c == 0) | (c == 1)).all()):
        raise ValueError(f"{name} must be a bool mask (or hold only 0 and 1)")
    return c != 0


def _embeddings(x: Any, bg: tuple[int, int]) -> torch.Tensor | None:
    if x is None:
        return None
    e = as_float_tensor(x, "embeddings")
    if e.dim() != 3 or tuple(e.shape[:2]) != bg or e.shape[2] < 1:
        raise ValueError(f"embeddings must have shape (B, G, d) = ({bg[0]}, {bg[1]}, d >= 1), got {tuple(e.shape)}")
    return check_finite(e, "embeddings")


def _valid_sets(vs: Any, B: int) -> tuple | None:
    if vs is None:
        return None
    if isinstance(vs, (str, bytes)) or not isinstance(vs, Sequence) or len(vs) != B:
        raise ValueError(f"valid_sets must be a sequence of {B} collections of answers, one per prompt")
    if any(isinstance(v, (str, bytes)) or not isinstance(v, Collection) for v in vs):
        raise ValueError("valid_sets must hold collections of answers, not bare strings")
    return tuple(vs)


def _correct(x: Any, bg: tuple[int, int]) -> torch.Tensor | None:
    if x is None:
        return None
    return check_shape(_zero_one_mask(x, "correct", any_dtype=False), "correct", bg, "(B, G)")


def _response_mask(x: Any, bg: tuple[int, int], tokens: tuple[tuple[str, Any], ...]) -> torch.Tensor | None:
    if x is None:
        return None
    m = check_shape(_zero_one_mask(x, "response_mask", any_dtype=True), "response_mask", (*bg, "T"), "(B, G, T)")
    for name, t in tokens:
        if t is not None and t.shape != m.shape:
            raise ValueError(f"response_mask shape {tuple(m.shape)} differs from {name} {tuple(t.shape)}")
    return m


def _row_mask(x: Any, bg: tuple[int, int]) -> torch.Tensor | None:
    if x is None:
        return None
    k = torch.as_tensor(x)
    if k.dtype != torch.bool or tuple(k.shape) != bg:
        raise ValueError(f"mask must be a bool tensor of shape (B, G) = {bg}, got {k.dtype} {tuple(k.shape)}")
    return k


def _token_tensor(x: Any, name: str, bg: tuple[int, int]) -> torch.Tensor | None:
    if x is None:
        return None
    return check_finite(check_shape(as_float_tensor(x, name), name, (*bg, "T"), "(B, G, T)"), name)


@dataclass(frozen=True, eq=False)
class GroupBatch:
    """The rollouts of B prompts, G per prompt, and everything a method may read about them.

    Row-major layout: rollout g of prompt b is ``[b, g]`` in tensors and entry ``b * G + g`` in the flat
    sequences (TRL's and verl's order of consecutive groups). Only ``rewards`` is required; a method names the
    fields it needs and refuses a batch that lacks them.

    * ``rewards`` (B, G): the task rewards (float, finite).
    * ``embeddings`` (B, G, d): one embedding per rollout (float, finite).
    * ``texts``: B * G completion texts.
    * ``answers``: B * G extracted final answers (None: no answer); methods normalise them themselves.
    * ``valid_sets``: B collections of valid answers, one per prompt (GAPO's V).
    * ``correct`` (B, G): bool correctness mask.
    * ``token_logprobs``, ``token_entropies`` (B, G, T): per-token log-probabilities / entropies of the policy.
    * ``response_mask`` (B, G, T): which tokens belong to the response (bool or 0/1).
    * ``mask`` (B, G): the rollouts a method may act on (bool; None: all). The engines mark, not drop, the rows
      outside it (unscorable, or truncated and masked out of the loss); SetPO leaves them out of the kernel.
    """

    rewards: torch.Tensor
    embeddings: torch.Tensor | None = None
    texts: Sequence[str] | None = None
    answers: Sequence[str | None] | None = None
    valid_sets: Sequence[Collection[str]] | None = None
    correct: torch.Tensor | None = None
    token_logprobs: torch.Tensor | None = None
    token_entropies: torch.Tensor | None = None
    response_mask: torch.Tensor | None = None
    mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        r = as_float_tensor(self.rewards, "rewards")
        if r.dim() != 2 or r.shape[0] < 1 or r.shape[1] < 1:
            raise ValueError(f"rewards must have shape (B, G) with B, G >= 1, got {tuple(r.shape)}")
        check_finite(r, "rewards")
        B, G = r.shape
        for name in ("embeddings", "correct", "token_logprobs", "token_entropies", "response_mask", "mask"):
            t = getattr(self, name)
            if isinstance(t, torch.Tensor) and t.device != r.device:
                raise ValueError(f"{name} is on {t.device} but rewards are on {r.device}: put the batch on one device")
        bg = (B, G)
        set_ = object.__setattr__
        set_(self, "rewards", r)
        set_(self, "embeddings", _embeddings(self.embeddings, bg))
        set_(self, "texts", _text_rows(self.texts, "texts", B * G, allow_none=False))
        set_(self, "answers", _text_rows(self.answers, "answers", B * G, allow_none=True))
        set_(self, "valid_sets", _valid_sets(self.valid_sets, B))
        set_(self, "correct", _correct(self.correct, bg))
        set_(self, "token_logprobs", _token_tensor(self.token_logprobs, "token_logprobs", bg))
        set_(self, "token_entropies", _token_tensor(self.token_entropies, "token_entropies", bg))
        tokens = (("token_logprobs", self.token_logprobs), ("token_entropies", self.token_entropies))
        set_(self, "response_mask", _response_mask(self.response_mask, bg, tokens))
        set_(self, "mask", _row_mask(self.mask, bg))

    @property
    def num_groups(self) -> int:
        """B, the number of prompts."""
        return self.rewards.shape[0]

    @property
    def group_size(self) -> int:
        """G, the rollouts per prompt."""
        return self.rewards.shape[1]

    def acting_rows(self, min_group: int = 1) -> torch.Tensor:
        """(B, G) bool: rows in ``mask`` (all when None) of groups with at least ``min_group`` such rows."""
        keep = torch.ones_like(self.rewards, dtype=torch.bool) if self.mask is None else self.mask
        return keep & (keep.sum(1, keepdim=True) >= min_group)

    def present(self) -> frozenset[str]:
        """The names of the fields this batch carries."""
        return frozenset(f for f in INPUT_FIELDS if getattr(self, f) is not None)

    def replace(self, **changes: Any) -> GroupBatch:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_rows(cls, rewards: Any, group_size: int, **fields: Any) -> GroupBatch:
        """Build from flat rows as the engines hold them: rewards (N,), embeddings (N, d), correct (N,),
        token tensors (N, T); N = B * G consecutive groups of `group_size`. Flat sequences pass through."""
        check_int(group_size, "group_size", minimum=1)
        r = as_float_tensor(rewards, "rewards")
        if r.dim() != 1 or r.shape[0] == 0 or r.shape[0] % group_size != 0:
            raise ValueError(f"rewards must be flat (N,), N a positive multiple of {group_size}, got {tuple(r.shape)}")
        B = r.shape[0] // group_size
        check_known(fields, INPUT_FIELDS, "GroupBatch field(s)")
        out = {}
        for name, value in fields.items():
            if value is not None and name in (
                "embeddings",
                "correct",
                "token_logprobs",
                "token_entropies",
                "response_mask",
                "mask",
            ):
                t = torch.as_tensor(value)
                if t.dim() < 1 or t.shape[0] != r.shape[0]:
                    raise ValueError(f"{name} must have N = {r.shape[0]} rows, got shape {tuple(t.shape)}")
                value = t.reshape(B, group_size, *t.shape[1:])
            out[name] = value
        return cls(rewards=r.reshape(B, group_size), **out)


def check_group_tensor(x: Any, name: str, batch: GroupBatch) -> torch.Tensor:
    """`x` as a finite float tensor of shape (B, G) matching `batch`."""
    t = check_shape(as_float_tensor(x, name), name, (batch.num_groups, batch.group_size), "(B, G)")
    return check_finite(t, name)


def check_real(value: Any, name: str, **bounds: Any) -> float:
    """A method parameter as a finite float within `bounds` (`setpo._validate.check_real`'s; tensors are read)."""
    return _check_real(value, name, item=True, **bounds)
