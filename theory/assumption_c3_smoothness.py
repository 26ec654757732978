"""Assumption C.3 (local smoothness at a kernel threshold).

Statement: for eta in (0, 1) and B_{tau,eta} = {y : k(y, tau) >= eta}, there is delta(tau, eta) >= 0 with
sup_{y in B_{tau,eta}} |m_P(y) - m_P(tau)| <= delta(tau, eta). (Any kernel in [0,1] has delta <= 1; the
assumption is useful when delta is small.)
Checked here (an observation of this project, not a claim of the paper): for the paper's kernel, the
clamped cosine of embeddings, it holds with delta(tau, eta) = sqrt(2 (1 - eta)) for every P, because
|k(y,z) - k(tau,z)| <= |<u_y - u_tau, u_z>| <= ||u_y - u_tau|| = sqrt(2 - 2 cos(y, tau)) (clamping is
1-Lipschitz). Kernels that do not come from embeddings enjoy no such bound.
"""

from __future__ import annotations

import math

import torch

from theory.instances import DTYPE, population_batches
from theory.proxy import remainder, smoothness_delta
from theory.records import CheckRecord, record, search_record

RESULT = "Assumption C.3"
NO_GENERAL_PROOF = "an assumption, not an identity: its bound for cosine kernels checked numerically"
ETAS = tuple(i / 20 for i in range(1, 20))


BOUND = tuple(math.sqrt(2 * (1 - e)) for e in ETAS)  # sqrt(2 (1 - eta)), the bound for cosine kernels


def deltas(p: torch.Tensor, K: torch.Tensor, m: torch.Tensor, etas=ETAS) -> torch.Tensor:
    """Smallest delta(tau, eta) over the support, B = {k >= eta}, for every tau and eta: (B, n_tau, len(etas))."""
    below = torch.nextafter(torch.tensor(etas, dtype=DTYPE), torch.tensor(-1.0, dtype=DTYPE))  # k > below == k >= eta
    return smoothness_delta(p, K, m, below.expand(*m.shape, len(etas)))


def delta_batches(total: int, sizes: tuple[int, ...], seed: int, kernels: tuple, clamp: bool = True):
    """(instances, delta(tau, eta) for every tau and eta in ETAS) per cell of a population sweep."""
    for cell, K, p in population_batches(total, sizes, seed, shapings=("linear",), kernels=kernels, clamp=clamp):
        m, _, _ = remainder(p, K, "linear")
        yield cell.batch, deltas(p, K, m)


def check_cosine_bound(total: int = 10_000, seed: int = 30, clamp: bool = True) -> CheckRecord:
    """delta(tau, eta) <= sqrt(2(1-eta)) for cosine kernels, every tau (support and outside) and eta on a grid."""
    bound = torch.tensor(BOUND, dtype=DTYPE)
    worst, ratio, monotone_bad, n = float("inf"), 0.0, 0, 0
    for batch, d in delta_batches(total, (2, 3, 5, 8), seed, ("cosine", "clustered"), clamp):
        worst = min(worst, float((bound - d).min()))
        ratio = max(ratio, float((d / bound).max()))
        monotone_bad += int((d[..., 1:] > d[..., :-1]).sum())  # B shrinks as eta grows
        n += batch
    return record(
        RESULT,
        f"delta(tau,eta) <= sqrt(2(1-eta)), {'clamped' if clamp else 'raw'} cosine kernels, "
        f"eta in {ETAS[0]}..{ETAS[-1]}",
        "numeric",
        n,
        "min slack",
        worst,
        worst >= -1e-12 and monotone_bad == 0,
        f"largest delta / sqrt(2(1-eta)) = {ratio:.2f}; delta non-increasing in eta ({monotone_bad} violations)",
    )


def check_other_kernels(total: int = 2_000, seed: int = 31) -> CheckRecord:
    """Kernels not built from embeddings (uniform, binary): the cosine bound fails, delta stays large near eta = 1."""
    bound = torch.tensor(BOUND, dtype=DTYPE)
    worst, big, n = float("inf"), 0.0, 0
    for batch, d in delta_batches(total, (3, 5, 8), seed, ("uniform", "binary")):
        worst = min(worst, float((bound - d).min()))
        big = max(big, float(d[..., -1].max()))
        n += batch
    return search_record(
        RESULT,
        "uniform / binary kernels: delta <= sqrt(2(1-eta))?",
        n,
        worst < 0,
        worst,
        f"largest delta at eta = {ETAS[-1]} is {big:.2f}: C.3 is a real smoothness assumption on k",
        expect_found=True,
        metric="min slack",
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All checks of Assumption C.3."""
    total = 1_000 if quick else 10_000
    return [
        check_cosine_bound(total),
        check_cosine_bound(total // 4, seed=32, clamp=False),
        check_other_kernels(500 if quick else 2_000),
    ]
