"""Unbiased pass@k (Chen et al. 2021, eq. 1), as used for every pass@k number in the paper."""

from __future__ import annotations

import math
import numbers

import numpy as np

# Partial sums of log-factors are evaluated in chunks; below this the product is under 2^-54 and 1 - it is 1.0.
_CHUNK = 1 << 20
_LOG_NEGLIGIBLE = -40.0


def _is_integer(x) -> bool:
    """An integer of any kind (not a bool), or a float with an integer value."""
    if isinstance(x, float):
        return math.isfinite(x) and x == int(x)
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _as_int_array(v, name: str) -> np.ndarray:
    """`v` as an array of Python ints (object dtype): any integer size, integral floats, numpy integers."""
    a = np.asarray(v)
    if a.dtype.kind in "iu" and not isinstance(v, bool):
        return a.astype(object)
    flat = a.reshape(-1).tolist() if a.dtype.kind != "O" else list(a.reshape(-1))
    if a.dtype.kind == "b" or isinstance(v, bool) or not all(_is_integer(x) for x in flat):
        raise ValueError(f"{name} must hold integers, got {v!r}")
    out = np.empty(len(flat), dtype=object)
    out[:] = [int(x) for x in flat]
    return out.reshape(a.shape)


def _log_ratio(n: int, c: int, k: int) -> float:
    """log(C(n-c, k) / C(n, k)) as a sum of min(c, k) terms log1p(-x), stopping once it is below -40."""
    # k <= c: prod_{i<k} (n-c-i)/(n-i) = prod_{i<k} (1 - c/(n-i)); else prod_{i=n-c+1}^{n} (1 - k/i), the same
    # form with c and k swapped. Either way the denominators are n, n-1, ..., n-min(c, k)+1.
    num, count = (float(c), k) if k <= c else (float(k), c)
    total = 0.0
    for lo in range(0, count, _CHUNK):
        i = np.arange(lo, min(count, lo + _CHUNK), dtype=np.float64)
        total += float(np.log1p(-num / (float(n) - i)).sum())
        if total < _LOG_NEGLIGIBLE:
            break
    return total


def pass_at_k(n, c, k):
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, eq. 1), 1 when n - c < k; inputs broadcast.

    Evaluated as a product of min(c, k) factors, 1 - prod_{i<k} (1 - c/(n-i)) or 1 - prod_{i=n-c+1}^{n} (1 - k/i),
    via -expm1(sum log1p(.)): relative error of order min(c, k) * 1e-16, no large binomials, any integer n
    (Python ints beyond int64 included). Returns a float for scalar input, else a float64 array.
    """
    n_a, c_a, k_a = (_as_int_array(v, name) for v, name in ((n, "n"), (c, "c"), (k, "k")))
    n_a, c_a, k_a = np.broadcast_arrays(n_a, c_a, k_a)
    if np.any(n_a < 1):
        raise ValueError("n (samples per problem) must be >= 1")
    if np.any((c_a < 0) | (c_a > n_a)):
        raise ValueError(f"c (correct samples) must satisfy 0 <= c <= n, got c={c!r}, n={n!r}")
    if np.any((k_a < 1) | (k_a > n_a)):
        raise ValueError(f"k must satisfy 1 <= k <= n for the unbiased estimator, got k={k!r}, n={n!r}")
    out = np.ones(n_a.shape, dtype=np.float64)
    for idx in np.ndindex(n_a.shape):
        n_i, c_i, k_i = int(n_a[idx]), int(c_a[idx]), int(k_a[idx])
        if n_i - c_i < k_i:
            continue
        out[idx] = 0.0 if c_i == 0 else -math.expm1(_log_ratio(n_i, c_i, k_i))
    return float(out) if out.ndim == 0 else out
