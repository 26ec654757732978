"""Hypothesis strategies for groups, embeddings, kernels and distributions, shared by the test files.

Large arrays are not drawn element by element: a strategy draws a seed and a few shape/structure
choices, and a seeded numpy generator fills the array. Hypothesis then shrinks over those choices.
Kernels come back as float64 torch tensors of shape (*batch, G, G), symmetric, unit diagonal, values in [0, 1].
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from setpo import cosine_kernel

REGISTERED_SHAPINGS = ("neglog1p", "linear", "exp", "inverse")


def user_shaping(x: torch.Tensor) -> torch.Tensor:
    """A shaping function given as a plain callable, g(x) = 1 / (2 + x) (strictly decreasing on [0, 1])."""
    return 1.0 / (2.0 + x)


SHAPING_SPECS = (*REGISTERED_SHAPINGS, user_shaping)

KERNEL_KINDS = ("embedding", "random", "duplicates", "blocks", "ones", "identity", "near_duplicates", "sparse")
BATCH_SHAPES = ((), (1,), (4,), (2, 3))

seeds = st.integers(min_value=0, max_value=2**32 - 1)
shapings = st.sampled_from(SHAPING_SPECS)
registered_shapings = st.sampled_from(REGISTERED_SHAPINGS)


def symmetrize_unit(a: np.ndarray) -> np.ndarray:
    """Upper triangle of `a` mirrored, diagonal set to 1: a valid kernel matrix from any (..., G, G) array."""
    upper = np.triu(a, k=1)
    out = upper + np.swapaxes(upper, -1, -2)
    idx = np.arange(a.shape[-1])
    out[..., idx, idx] = 1.0
    return out


def make_kernel(kind: str, G: int, rng: np.random.Generator, batch: tuple[int, ...] = ()) -> torch.Tensor:
    """A float64 kernel of the named structure, shape (*batch, G, G)."""
    shape = (*batch, G, G)
    if kind == "embedding":
        d = int(rng.integers(2, 17))
        return cosine_kernel(torch.from_numpy(rng.standard_normal((*batch, G, d))))
    if kind == "random":
        return torch.from_numpy(symmetrize_unit(rng.uniform(0.0, 1.0, shape)))
    if kind == "duplicates":
        # Rollouts fall into a few types; two rollouts of one type are exact duplicates (k = 1).
        n_types = int(rng.integers(1, G + 1))
        types = rng.integers(0, n_types, size=(*batch, G))
        base = symmetrize_unit(rng.uniform(0.0, 1.0, (*batch, n_types, n_types)))
        K = np.take_along_axis(base, types[..., :, None].repeat(n_types, -1), axis=-2)
        K = np.take_along_axis(K, types[..., None, :].repeat(G, -2), axis=-1)
        return torch.from_numpy(np.ascontiguousarray(K))
    if kind == "blocks":
        n_clusters = int(rng.integers(1, min(G, 6) + 1))
        labels = rng.integers(0, n_clusters, size=(*batch, G))
        same = labels[..., :, None] == labels[..., None, :]
        vals = np.where(same, rng.uniform(0.7, 1.0, shape), rng.uniform(0.0, 0.3, shape))
        return torch.from_numpy(symmetrize_unit(vals))
    if kind == "ones":
        return torch.ones(shape, dtype=torch.float64)
    if kind == "identity":
        return torch.eye(G, dtype=torch.float64).expand(shape).clone()
    if kind == "near_duplicates":
        d = int(rng.integers(2, 17))
        centre = rng.standard_normal((*batch, 1, d))
        noise = 10.0 ** rng.uniform(-9, -3) * rng.standard_normal((*batch, G, d))
        return cosine_kernel(torch.from_numpy(centre + noise))
    if kind == "sparse":
        vals = rng.uniform(0.0, 1.0, shape) * (rng.uniform(size=shape) < 0.2)
        return torch.from_numpy(symmetrize_unit(vals))
    raise ValueError(f"unknown kernel kind {kind!r}; available: {KERNEL_KINDS}")


@st.composite
def kernels(
    draw,
    min_size: int = 3,
    max_size: int = 64,
    kinds: tuple[str, ...] = KERNEL_KINDS,
    batch_shapes: tuple[tuple[int, ...], ...] = ((),),
) -> torch.Tensor:
    """A float64 kernel (*batch, G, G) of one of `kinds`, G in [min_size, max_size]."""
    kind = draw(st.sampled_from(kinds))
    G = draw(st.integers(min_size, max_size))
    batch = draw(st.sampled_from(batch_shapes))
    return make_kernel(kind, G, np.random.default_rng(draw(seeds)), batch)


@st.composite
def embeddings(
    draw,
    min_size: int = 1,
    max_size: int = 32,
    max_dim: int = 32,
    batch_shapes: tuple[tuple[int, ...], ...] = ((),),
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Embeddings (*batch, G, d): Gaussian rows with random norms, some rows repeated or negated."""
    G = draw(st.integers(min_size, max_size))
    d = draw(st.integers(1, max_dim))
    batch = draw(st.sampled_from(batch_shapes))
    rng = np.random.default_rng(draw(seeds))
    e = rng.standard_normal((*batch, G, d)) * 10.0 ** rng.uniform(-3, 3, size=(*batch, G, 1))
    if G >= 2 and draw(st.booleans()):
        e[..., 1, :] = e[..., 0, :] * rng.uniform(0.1, 10.0)  # same direction as row 0
    if G >= 3 and draw(st.booleans()):
        e[..., 2, :] = -e[..., 0, :]  # opposite direction: cosine -1
    return torch.from_numpy(e).to(dtype)


@st.composite
def distributions(draw, min_size: int = 2, max_size: int = 12, allow_zero: bool = True) -> torch.Tensor:
    """Weights p over N support points (float64, sum 1); with `allow_zero`, possibly a zero-weight point."""
    N = draw(st.integers(min_size, max_size))
    rng = np.random.default_rng(draw(seeds))
    p = rng.dirichlet(np.full(N, float(draw(st.sampled_from([0.3, 1.0, 5.0])))))
    if allow_zero and draw(st.booleans()):
        tau = int(rng.integers(N))
        if p[tau] < 0.5:  # keep the rest of the mass well away from zero before renormalising
            p[tau] = 0.0
    return torch.from_numpy(p / p.sum())
