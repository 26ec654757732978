"""Argument checks for the whole package: one way to refuse a bad value, naming the value and the problem.

Every check raises ValueError (``as_float_tensor`` also TypeError for non-arrays) and returns the value it
accepted, so a call reads ``x = check_int(x, "x", minimum=1)``. Booleans are refused wherever a number is
expected (``True`` is an ``int`` in Python, never a valid count or weight here).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import torch


def _bounds(minimum: float | None, maximum: float | None, strict: bool = False) -> str:
    if minimum is not None and maximum is not None:
        return f" in {'(' if strict else '['}{minimum}, {maximum}]"
    if minimum is not None:
        return f" {'>' if strict else '>='} {minimum}"
    return "" if maximum is None else f" <= {maximum}"


def check_int(
    value: Any,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    kind: type | tuple[type, ...] = int,
    none: bool = False,
) -> Any:
    """`value` unless it is not an integer of `kind` (``numbers.Integral`` admits numpy's) in [minimum, maximum].

    ``none=True`` lets None through.
    """
    if none and value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        raise ValueError(
            f"{name} must be {'None or ' if none else ''}an integer{_bounds(minimum, maximum)}, got {value!r}"
        )
    return value


def check_real(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict: bool = False,
    kind: type | tuple[type, ...] = (int, float),
    none: bool = False,
    item: bool = False,
) -> Any:
    """`value` as a finite float of `kind`, >= `minimum` (> with `strict`) and <= `maximum`.

    ``none=True`` lets None through; ``item=True`` reads a one-element tensor with ``.item()``.
    """
    if none and value is None:
        return None
    if item and isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or not math.isfinite(value)
        or (minimum is not None and (value <= minimum if strict else value < minimum))
        or (maximum is not None and value > maximum)
    ):
        raise ValueError(
            f"{name} must be {'None or ' if none else ''}a finite number{_bounds(minimum, maximum, strict)}, "
            f"got {value!r}"
        )
    return float(value)


def check_lambda(value: Any, name: str = "lambda") -> float:
    """The weight lambda of eq. 6 as a float: a finite real number >= 0 (numpy scalars and 1-element tensors too)."""
    return check_real(value, name, minimum=0, kind=numbers.Real, item=True)


def check_bool(value: Any, name: str, *, none: bool = False) -> Any:
    """`value` unless it is not True or False (None too with ``none=True``); 0 and 1 are refused."""
    if not (isinstance(value, bool) or (none and value is None)):
        raise ValueError(f"{name} must be {'None, ' if none else ''}True or False, got {value!r}")
    return value


def check_choice(value: Any, name: str, choices: Collection[Any], hint: str = "") -> Any:
    """`value` unless it is not one of `choices`; `hint` follows the list in the error."""
    if value not in choices:
        listed = sorted(choices) if isinstance(choices, (set, frozenset)) else list(choices)
        raise ValueError(f"unknown {name} {value!r}; use one of {listed}{hint}")
    return value


def check_callable(value: Any, name: str, what: str = "", *, none: bool = False) -> Any:
    """`value` unless it is not callable (None passes with ``none=True``); `what` (e.g. " (texts -> (N, d))") says
    what it should compute."""
    if not (callable(value) or (none and value is None)):
        raise ValueError(f"{name} must be {'None or ' if none else ''}callable{what}, got {type(value).__name__}")
    return value


def check_str(value: Any, name: str, *, none: bool = False, blank: bool = False, empty: bool = False) -> Any:
    """`value` unless it is not a string, or is empty (unless ``empty=True``) or blank (unless ``blank=True``);
    None passes with ``none=True``."""
    if none and value is None:
        return None
    if not isinstance(value, str) or not (empty or (value if blank else value.strip())):
        what = "a string" if empty else "a non-empty string"
        raise ValueError(f"{name} must be {'None or ' if none else ''}{what}, got {value!r:.80}")
    return value


def check_ints(
    values: Any, name: str, *, minimum: int | None = None, kind: type | tuple[type, ...] = int, empty: bool = False
) -> tuple:
    """`values` as a tuple of integers of `kind` (bools refused), each >= `minimum`; non-empty unless `empty`."""
    out = tuple(values)
    if (not out and not empty) or any(
        isinstance(v, bool) or not isinstance(v, kind) or (minimum is not None and v < minimum) for v in out
    ):
        what = "sequence" if empty else "non-empty sequence"
        raise ValueError(f"{name} must be a {what} of integers{_bounds(minimum, None)}, got {values!r:.120}")
    return out


def check_len(values: Any, name: str, minimum: int = 1) -> Any:
    """`values` unless it holds fewer than `minimum` items."""
    if len(values) < minimum:
        raise ValueError(f"{name} must hold at least {minimum} item(s), got {len(values)}")
    return values


def check_same_len(**named: Any) -> int:
    """The common length of the named sequences; the error lists each one's length when they differ."""
    sizes = {name: len(values) for name, values in named.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError("lengths differ: " + ", ".join(f"{n} {name}" for name, n in sizes.items()))
    return next(iter(sizes.values()))


def check_mapping(value: Any, name: str, *, keys: type | None = None) -> Any:
    """`value` unless it is not a mapping (whose keys are all of type `keys`, when given)."""
    if not isinstance(value, Mapping) or (keys is not None and not all(isinstance(k, keys) for k in value)):
        of = f" with {keys.__name__} keys" if keys is not None else ""
        raise ValueError(f"{name} must be a mapping{of}, got {value!r:.80}")
    return value


def check_known(names: Iterable[Any], known: Collection[Any], what: str, listed: bool = True) -> None:
    """Refuse any of `names` outside `known`: "unknown {what} [...]", then the known ones when `listed`."""
    unknown = sorted(set(names) - set(known), key=str)
    if unknown:
        raise ValueError(f"unknown {what} {unknown}" + (f"; known: {sorted(known, key=str)}" if listed else ""))


def check_shape(t: Any, name: str, shape: Sequence[int | str], axes: str = "") -> Any:
    """`t` unless its shape differs from `shape`, where a str entry (e.g. "T") takes any size; `axes` names them."""
    if len(t.shape) != len(shape) or any(isinstance(s, int) and s != n for s, n in zip(shape, t.shape)):
        want = f"({', '.join(map(str, shape))})" if len(shape) != 1 else f"({shape[0]},)"
        raise ValueError(f"{name} must have shape {axes + ' = ' if axes else ''}{want}, got {tuple(t.shape)}")
    return t


def check_finite(t: torch.Tensor, name: str) -> torch.Tensor:
    """`t` unless it holds NaN or inf (the error counts each)."""
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(bad.sum()) - n_nan
        raise ValueError(f"{name} contains {n_nan} NaN and {n_inf} inf value(s)")
    return t


def as_float_tensor(x: Any, name: str) -> torch.Tensor:
    """`x` as a floating torch tensor (numpy/lists accepted).

    TypeError when `x` is not array-like at all (None, strings, objects); ValueError for integer or complex dtypes.
    """
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be a floating-point tensor or array, got {type(x).__name__}")
    try:
        t = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"{name} must be a floating-point tensor or array, got {type(x).__name__} ({err})") from None
    if not torch.is_floating_point(t):
        if t.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
        raise ValueError(f"{name} has unsupported dtype {t.dtype}")
    return t


def check_strings(values: Any, name: str, *, n: int | None = None, none: bool = False) -> list:
    """`values` as a list of strings (None too with ``none=True``), `n` of them when given; a bare string is refused
    (it would read as one-letter texts)."""
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of strings, got a bare string {values[:40]!r}; wrap it in a list")
    if not isinstance(values, Sequence):
        raise ValueError(f"{name} must be a sequence of strings, got {type(values).__name__}")
    if n is not None and len(values) != n:
        raise ValueError(f"{name} must hold {n} entries, got {len(values)}")
    bad = [i for i, v in enumerate(values) if not (isinstance(v, str) or (none and v is None))]
    if bad:
        raise ValueError(f"{name}[{bad[0]}] is {type(values[bad[0]]).__name__}, not str{' or None' if none else ''}")
    return list(values)


def check_texts(texts: Sequence[str]) -> list[str]:
    """`texts` as a list of str (an embedder's input)."""
    return check_strings(texts, "texts")


def check_embeddings(emb: torch.Tensor, n: int, name: str = "embedder") -> torch.Tensor:
    """Check an embedder's output is an (n, d) finite floating tensor and return it."""
    if not isinstance(emb, torch.Tensor):
        raise ValueError(f"{name} returned {type(emb).__name__}, expected a torch.Tensor")
    if emb.dim() != 2 or emb.shape[0] != n:
        raise ValueError(f"{name} returned shape {tuple(emb.shape)} for {n} texts, expected ({n}, d)")
    if not torch.is_floating_point(emb):
        raise ValueError(f"{name} returned dtype {emb.dtype}, expected a floating tensor")
    bad = ~torch.isfinite(emb)
    if bool(bad.any()):
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()
        raise ValueError(f"{name} returned NaN/inf embeddings for text(s) at index {rows[:10]}")
    return emb
