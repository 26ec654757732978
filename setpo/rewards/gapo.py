"""GAPO's frequency-aware group reward (Anschel et al., arXiv 2511.12596, Sec. 3)."""

from __future__ import annotations

import numbers
import re
import string
import unicodedata
from collections import Counter
from typing import Callable, Collection, Literal, Sequence

import torch

from setpo._validate import check_callable, check_choice, check_int, check_real, check_strings

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
    check_callable(normalize, "normalize", " (str | None -> str)")

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
    check_int(group_size, "group_size", minimum=1)
    check_strings(answers, "answers", none=True)
    normalize = checked_normalize(normalize)
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    check_real(invalid_reward, "invalid_reward", kind=numbers.Real)
    N = len(answers)
    if N == 0 or N % group_size != 0:
        raise ValueError(f"number of answers {N} must be a positive multiple of group_size {group_size}")
    check_choice(form, "form", ("published", "absolute"))
    check_choice(count, "count", ("inclusive", "leave_one_out"))
    per_group = _valid_set_per_group(valid_sets, N, group_size, normalize)
    out = torch.empty(N, dtype=torch.float64)
    for b, valid in enumerate(per_group):
        V = {normalize(v) for v in valid}
        V.discard("")
        if not V:
            raise ValueError(f"group {b} has an empty valid set")
        norm = [normalize(a) for a in answers[b * group_size : (b + 1) * group_size]]
        rows = _group_rewards(norm, V, form, count, invalid_reward)
        out[b * group_size : (b + 1) * group_size] = torch.tensor(rows, dtype=torch.float64)
    return out.to(dtype)


def _valid_set_per_group(
    valid_sets: Sequence[Collection[str]], N: int, G: int, normalize: Callable[[str | None], str]
) -> list[Collection[str]]:
    """One valid set per group, from one per group or one per row (then equal within each group)."""
    B = N // G
    if isinstance(valid_sets, str) or any(isinstance(v, str) for v in valid_sets):
        raise ValueError("valid_sets must hold collections of answers, one per group or row, not bare strings")
    if len(valid_sets) == B and len(valid_sets) != N:
        return list(valid_sets)
    if len(valid_sets) != N:
        raise ValueError(f"valid_sets must have one entry per group ({B}) or per row ({N}), got {len(valid_sets)}")
    per_group = [valid_sets[b * G] for b in range(B)]
    for b in range(B):
        ref = {normalize(v) for v in per_group[b]}
        for i in range(b * G, (b + 1) * G):
            if {normalize(v) for v in valid_sets[i]} != ref:
                raise ValueError(f"valid_sets differ within group {b} (row {i})")
    return per_group


def _group_rewards(norm: list[str], V: set[str], form: str, count: str, invalid_reward: float) -> list[float]:
    """GAPO eq. 3 for one group's normalised answers against its valid set V."""
    counts = Counter(a for a in norm if a in V)
    n_valid = sum(counts.values())
    out = []
    for a in norm:
        if a not in V:
            out.append(invalid_reward)
            continue
        if count == "inclusive":
            f = counts[a] / n_valid
        else:
            f = (counts[a] - 1) / (n_valid - 1) if n_valid > 1 else 0.0
        gap = f - 1.0 / len(V)
        out.append(1.0 - (abs(gap) if form == "absolute" else gap))
    return out
