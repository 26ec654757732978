"""Unbiased pass@k (Chen et al. 2021, eq. 1), as used for every pass@k number in the paper."""

from __future__ import annotations

import numpy as np


def pass_at_k(n, c, k):
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, eq. 1), 1 when n - c < k; inputs broadcast.

    Evaluated in the product form 1 - prod_{i=n-c+1}^{n} (1 - k/i) as -expm1(sum log1p(-k/i)): relative
    error of order c * 1e-16, with no large binomials, for any n.
    Returns a float for scalar input, else a float64 array.
    """
    n_a, c_a, k_a = (np.asarray(v) for v in (n, c, k))
    for name, v in (("n", n_a), ("c", c_a), ("k", k_a)):
        integral_float = v.dtype.kind == "f" and np.all(np.isfinite(v)) and np.all(v == np.round(v))
        if v.dtype.kind not in "iu" and not integral_float:
            raise ValueError(f"{name} must hold integers, got {v!r}")
    for name, v in (("n", n_a), ("c", c_a), ("k", k_a)):
        if v.size and v.dtype.kind in "uf" and np.max(v) > np.iinfo(np.int64).max:
            raise ValueError(f"{name} is too large")
    n_a, c_a, k_a = np.broadcast_arrays(n_a.astype(np.int64), c_a.astype(np.int64), k_a.astype(np.int64))
    if np.any(n_a < 1):
        raise ValueError("n (samples per problem) must be >= 1")
    if np.any((c_a < 0) | (c_a > n_a)):
        raise ValueError("c (correct samples) must satisfy 0 <= c <= n")
    if np.any((k_a < 1) | (k_a > n_a)):
        raise ValueError("k must satisfy 1 <= k <= n for the unbiased estimator")
    out = np.ones(n_a.shape, dtype=np.float64)
    for idx in np.argwhere(n_a - c_a >= k_a):
        idx = tuple(idx)
        n_i, c_i, k_i = int(n_a[idx]), int(c_a[idx]), int(k_a[idx])
        if c_i == 0:
            out[idx] = 0.0
            continue
        out[idx] = -np.expm1(np.log1p(-k_i / np.arange(n_i - c_i + 1, n_i + 1, dtype=np.float64)).sum())
    return float(out) if out.ndim == 0 else out
