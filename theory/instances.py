"""Seeded random instances for the numeric checks: kernels, weights, group sizes and shaping functions.

Every numeric check sweeps KERNELS x SHAPINGS x sizes with a batch of instances per cell, in float64.
The shaping functions come from the core registry; the extra ones below break one assumption each and
are used only by the counterexample searches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from setpo import Shaping, cosine_kernel, get_shaping

DTYPE = torch.float64

# Registered shapings that satisfy Assumption C.1 and the curvature condition of Thm C.5 on [0, 1].
SHAPINGS = ("neglog1p", "linear", "exp", "inverse")

# cosine: clamped cosine of Gaussian embeddings (many entries clamped to 0);
# clustered: clamped cosine of points around a few centres (near-duplicates, masses near 1);
# uniform: symmetric U(0,1) entries (a valid kernel for Assumption 4.1, not positive semi-definite);
# binary: symmetric {0,1} entries (exact duplicates and exact ties).
KERNELS = ("cosine", "clustered", "uniform", "binary")


def generator(seed: int) -> torch.Generator:
    """A seeded CPU generator."""
    return torch.Generator().manual_seed(seed)


def symmetrize_unit(a: torch.Tensor) -> torch.Tensor:
    """Mirror the strict upper triangle of (..., n, n) `a` and put ones on the diagonal."""
    upper = torch.triu(a, diagonal=1)
    out = upper + upper.mT
    out.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return out


def random_embeddings(kind: str, batch: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """(batch, n, d) embeddings: isotropic Gaussian ('cosine') or noisy copies of 2-3 centres ('clustered')."""
    if kind == "cosine":
        return torch.randn(batch, n, 5, generator=gen, dtype=DTYPE)
    if kind == "clustered":
        centres = torch.randn(batch, 3, 16, generator=gen, dtype=DTYPE)
        which = torch.randint(0, 3, (batch, n), generator=gen)
        base = torch.gather(centres, 1, which.unsqueeze(-1).expand(batch, n, 16))
        return base + 0.35 * torch.randn(batch, n, 16, generator=gen, dtype=DTYPE)
    raise ValueError(f"no embeddings for kernel kind {kind!r}; use 'cosine' or 'clustered'")


def random_kernel(kind: str, batch: int, n: int, gen: torch.Generator, clamp: bool = True) -> torch.Tensor:
    """A (batch, n, n) float64 kernel: symmetric, unit diagonal, values in [0, 1] (in [-1, 1] if clamp=False)."""
    if kind in ("cosine", "clustered"):
        return cosine_kernel(random_embeddings(kind, batch, n, gen), clamp=clamp)
    if kind == "uniform":
        return symmetrize_unit(torch.rand(batch, n, n, generator=gen, dtype=DTYPE))
    if kind == "binary":
        return symmetrize_unit(torch.randint(0, 2, (batch, n, n), generator=gen).to(DTYPE))
    raise ValueError(f"unknown kernel kind {kind!r}; available: {KERNELS}")


def random_weights(batch: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """(batch, n) probability vectors: flat Dirichlet weights, a quarter of the rows made sparse."""
    w = -torch.log(torch.rand(batch, n, generator=gen, dtype=DTYPE))
    sparse = torch.rand(batch, 1, generator=gen) < 0.25
    drop = (torch.rand(batch, n, generator=gen) < 0.4) & sparse
    drop[:, 0] = False  # keep at least one atom
    w = torch.where(drop, torch.zeros_like(w), w)
    return w / w.sum(-1, keepdim=True)


@dataclass(frozen=True)
class Cell:
    """One cell of a sweep: a kernel kind, a shaping, a size and how many instances to draw."""

    kernel: str
    shaping: Shaping
    size: int
    batch: int


def sweep(total: int, sizes: tuple[int, ...], shapings: tuple = SHAPINGS, kernels: tuple = KERNELS) -> list[Cell]:
    """Cells covering kernels x shapings x sizes with at least `total` instances overall."""
    if total < 1 or not sizes or not shapings or not kernels:
        raise ValueError("a sweep needs total >= 1 and at least one size, shaping and kernel kind")
    batch = -(-total // (len(kernels) * len(shapings) * len(sizes)))
    return [Cell(k, resolve(s), n, batch) for k in kernels for s in shapings for n in sizes]


def kernel_batches(
    total: int,
    sizes: tuple[int, ...],
    seed: int,
    shapings: tuple = SHAPINGS,
    kernels: tuple = KERNELS,
    clamp: bool = True,
) -> Iterator[tuple[Cell, torch.Tensor]]:
    """(cell, K) pairs over a sweep; K has shape (cell.batch, cell.size, cell.size)."""
    gen = generator(seed)
    for cell in sweep(total, sizes, shapings, kernels):
        yield cell, random_kernel(cell.kernel, cell.batch, cell.size, gen, clamp)


def population_batches(
    total: int,
    sizes: tuple[int, ...],
    seed: int,
    outside: int = 2,
    shapings: tuple = SHAPINGS,
    kernels: tuple = KERNELS,
    clamp: bool = True,
) -> Iterator[tuple[Cell, torch.Tensor, torch.Tensor]]:
    """(cell, K, p) over a sweep: P has `cell.size` atoms; `outside` extra points tau carry weight 0.

    K has shape (batch, N + outside, N + outside), p shape (batch, N + outside), so the core's
    population functions evaluate m_P and the influence at in-support and out-of-support tau alike.
    """
    gen = generator(seed)
    for cell in sweep(total, sizes, shapings, kernels):
        K = random_kernel(cell.kernel, cell.batch, cell.size + outside, gen, clamp)
        p = torch.cat([random_weights(cell.batch, cell.size, gen), torch.zeros(cell.batch, outside, dtype=DTYPE)], -1)
        yield cell, K, p


def resolve(name_or_shaping) -> Shaping:
    """A registered shaping by name, one of the EXTRA shapings by name, or a Shaping as is."""
    if isinstance(name_or_shaping, str) and name_or_shaping in EXTRA:
        return EXTRA[name_or_shaping]
    return get_shaping(name_or_shaping)


# Shapings that break one assumption each (not registered in the core: they exist for the searches only).
EXTRA: dict[str, Shaping] = {
    # increasing: g(x) = log(1+x) rewards redundancy.
    "increasing": Shaping(
        "increasing", lambda x: torch.log1p(x), lambda x: 1.0 / (1.0 + x), lambda x: -1.0 / (1.0 + x) ** 2
    ),
    # non-increasing but flat on [1/2, 1]: C^1, satisfies Assumption 4.1, not strictly decreasing.
    "flat": Shaping(
        "flat",
        lambda x: (0.5 - x).clamp(min=0.0) ** 2,
        lambda x: -2.0 * (0.5 - x).clamp(min=0.0),
        lambda x: 2.0 * (x < 0.5).to(x.dtype),
    ),
    # constant: g' = 0 everywhere, so M = 0.
    "constant": Shaping(
        "constant", lambda x: torch.zeros_like(x), lambda x: torch.zeros_like(x), lambda x: torch.zeros_like(x)
    ),
    # -3 log(1+x): the paper's g scaled, so M = max |g'| = 3 and L = max |g''| = 3 (every registered g has M = 1).
    "neglog1p_x3": Shaping(
        "neglog1p_x3", lambda x: -3.0 * torch.log1p(x), lambda x: -3.0 / (1.0 + x), lambda x: 3.0 / (1.0 + x) ** 2
    ),
    # increasing with M = 3: 3 log(1+x) (Thm C.8 needs only M > 0, so its bound must use this M, not 1).
    "increasing_x3": Shaping(
        "increasing_x3", lambda x: 3.0 * torch.log1p(x), lambda x: 3.0 / (1.0 + x), lambda x: -3.0 / (1.0 + x) ** 2
    ),
    # -(x - 1/2)^3: strictly decreasing, but g'(1/2) = 0 (Thm 4.4's sign needs g' < 0 at the two masses).
    "cubic": Shaping("cubic", lambda x: -((x - 0.5) ** 3), lambda x: -3.0 * (x - 0.5) ** 2, lambda x: -6.0 * (x - 0.5)),
    # steep exponential exp(-5x): strictly decreasing, violates m g'' < -2 g' for m > 2/5.
    "steep_exp": Shaping(
        "steep_exp",
        lambda x: torch.exp(-5.0 * x),
        lambda x: -5.0 * torch.exp(-5.0 * x),
        lambda x: 25.0 * torch.exp(-5.0 * x),
    ),
}


def without(K: torch.Tensor, i: int) -> torch.Tensor:
    """The (..., G-1, G-1) kernel of Omega minus o_i."""
    keep = torch.tensor([j for j in range(K.shape[-1]) if j != i])
    return K.index_select(-2, keep).index_select(-1, keep)


def drop_entry(v: torch.Tensor, i: int) -> torch.Tensor:
    """v with its last-dim entry i removed: (..., G) -> (..., G-1), aligned with `without`."""
    keep = torch.tensor([j for j in range(v.shape[-1]) if j != i])
    return v.index_select(-1, keep)


def shaping_names(shapings: tuple) -> list[str]:
    """The names of shapings given by name or as Shaping objects (for the check labels)."""
    return [s if isinstance(s, str) else s.name for s in shapings]
