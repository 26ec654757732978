"""GAPO's frequency-aware group reward (Anschel et al., arXiv 2511.12596, Sec. 3)."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from typing import Callable, Collection, Literal, Sequence

import torch

_PUNCT = re.escape(string.punctuation)


def normalize_answer(text: str | None) -> str:
    """Canonical form for validity and frequency counting: NFKC, casefold, collapsed spaces, outer punctuation off."""
    if text is None:
        return ""
    t = unicodedata.normalize("NFKC", str(text)).casefold()
    t = re.sub(r"\s+", " ", t).strip()
    return re.sub(rf"^[{_PUNCT}\s]+|[{_PUNCT}\s]+$", "", t)


def checked_normalize(normalize: Callable[[str | None], str]) -> Callable[[str | None], str]:
    """`normalize` wrapped so that a result other than a string raises ValueError instead of being counted."""
    if not callable(normalize):
        raise ValueError(f"normalize must be a callable str | None -> str, got {type(normalize).__name__}")

    def checked(text: str | None) -> str:
        out = normalize(text)
        if not isinstance(out, str):
            raise ValueError(f"normalize must return a string, got {type(out).__name__} for {text!r}")
        return out

    return checked


def gapo_rewards(
    answers: Sequence[str | None],
    valid_sets: Sequence[Collection[str]],
    group_size: int,
    form: Literal["published", "absolute"] = "published",
    count: Literal["inclusive", "leave_one_out"] = "inclusive",
    invalid_reward: float = -1.0,
    normalize: Callable[[str | None], str] = normalize_answer,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """R~_i = 1 - (f_{o_i} - 1/L) if o_i in V else -1, f over the group's valid rollouts (GAPO eq. 3).

    ``answers`` holds N = B * G extracted answers (None for no answer), groups being G consecutive
    rows; ``valid_sets`` holds one collection of valid answers V per group (length B) or per row
    (length N, equal within a group). ``form="absolute"`` uses 1 - |f - 1/L| (as some restatements of the
    paper write it); ``count="leave_one_out"`` estimates f without the scored rollout, (n_v - 1)/(n_valid - 1)
    (0 when it is the only valid one), which removes the self-count bias of f as an estimate of the policy's
    probability of that answer. ``normalize`` must return a string (ValueError otherwise).
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if isinstance(answers, (str, bytes)) or not isinstance(answers, Sequence):
        raise ValueError(f"answers must be a sequence of strings (or None), got {type(answers).__name__}")
    if any(a is not None and not isinstance(a, str) for a in answers):
        raise ValueError("answers must hold strings (or None for no answer)")
    normalize = checked_normalize(normalize)
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    if not math.isfinite(invalid_reward):
        raise ValueError(f"invalid_reward must be finite, got {invalid_reward}")
    N = len(answers)
    if N == 0 or N % group_size != 0:
        raise ValueError(f"number of answers {N} must be a positive multiple of group_size {group_size}")
    if form not in ("published", "absolute"):
        raise ValueError(f"unknown form {form!r}; use 'published' or 'absolute'")
    if count not in ("inclusive", "leave_one_out"):
        raise ValueError(f"unknown count {count!r}; use 'inclusive' or 'leave_one_out'")
    B = N // group_size
    if isinstance(valid_sets, str) or any(isinstance(v, str) for v in valid_sets):
        raise ValueError("valid_sets must hold collections of answers, one per group or row, not bare strings")
    if len(valid_sets) == N:
        per_group = [valid_sets[b * group_size] for b in range(B)]
        for b in range(B):
            ref = {normalize(v) for v in per_group[b]}
            for i in range(b * group_size, (b + 1) * group_size):
                if {normalize(v) for v in valid_sets[i]} != ref:
                    raise ValueError(f"valid_sets differ within group {b} (row {i})")
    elif len(valid_sets) == B:
        per_group = list(valid_sets)
    else:
        raise ValueError(f"valid_sets must have one entry per group ({B}) or per row ({N}), got {len(valid_sets)}")

    out = torch.empty(N, dtype=torch.float64)
    for b in range(B):
        V = {normalize(v) for v in per_group[b]}
        V.discard("")
        if not V:
            raise ValueError(f"group {b} has an empty valid set")
        L = len(V)
        norm = [normalize(a) for a in answers[b * group_size : (b + 1) * group_size]]
        counts = Counter(a for a in norm if a in V)
        n_valid = sum(counts.values())
        for j, a in enumerate(norm):
            if a not in V:
                out[b * group_size + j] = invalid_reward
                continue
            if count == "inclusive":
                f = counts[a] / n_valid
            else:
                f = (counts[a] - 1) / (n_valid - 1) if n_valid > 1 else 0.0
            gap = f - 1.0 / L
            out[b * group_size + j] = 1.0 - (abs(gap) if form == "absolute" else gap)
    return out.to(dtype)
