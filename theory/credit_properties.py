"""Properties of the credits the paper does not state but relies on (listed as worth checking in Sec. 3).

* permutation equivariance: relabelling the group relabels the credits;
* exact duplicates (identical kernel rows, k = 1 between them) get equal credits;
* sign and scale of s_i next to the base advantage A_bar (the paper adds lambda s_i with lambda in 0.05..0.5,
  so the size of s_i decides how much the term can move the update); sum_i s_i is not 0 in general.
"""

from __future__ import annotations

import torch

from setpo import group_advantages, loo_credits
from theory.instances import DTYPE, KERNELS, generator, kernel_batches, random_kernel
from theory.records import CheckRecord, Verdict, error_record

RESULT = "Credit properties"
NO_GENERAL_PROOF = "properties not stated in the paper, checked numerically"
TOL = 1e-12


def check_permutation(total: int = 10_000, seed: int = 100, sizes: tuple[int, ...] = (3, 4, 6, 8)) -> CheckRecord:
    """loo_credits(K[pi, pi]) = loo_credits(K)[pi] for a random permutation pi per cell."""
    worst, n = 0.0, 0
    gen = generator(seed + 1000)
    for cell, K in kernel_batches(total, sizes, seed):
        pi = torch.randperm(cell.size, generator=gen)
        permuted = loo_credits(K[:, pi][:, :, pi], cell.shaping)
        worst = max(worst, float((permuted - loo_credits(K, cell.shaping)[:, pi]).abs().max()))
        n += cell.batch
    return error_record(
        RESULT, f"permutation equivariance, kernels {KERNELS}, G={list(sizes)}", "numeric", n, [worst], TOL
    )


def check_duplicates(total: int = 10_000, seed: int = 101, sizes: tuple[int, ...] = (3, 4, 6, 8)) -> CheckRecord:
    """Make o_1 an exact copy of o_0 (same kernel row, k(o_0, o_1) = 1): s_0 = s_1."""
    worst, n = 0.0, 0
    for cell, K in kernel_batches(total, sizes, seed):
        K = K.clone()
        K[:, 1, :], K[:, :, 1] = K[:, 0, :], K[:, 0, :]
        K[:, 0, 1] = K[:, 1, 0] = K[:, 1, 1] = 1.0
        s = loo_credits(K, cell.shaping)
        worst = max(worst, float((s[:, 0] - s[:, 1]).abs().max()))
        n += cell.batch
    return error_record(RESULT, "exact duplicates get equal credits", "numeric", n, [worst], TOL)


def check_scale(groups: int = 20_000, seed: int = 102, G: int = 6) -> CheckRecord:
    """Size of s_i (g = -log(1+x), G = 6) on cosine kernels next to GRPO advantages of binary rewards."""
    gen = generator(seed)
    parts = []
    for kind in ("cosine", "clustered"):
        s = loo_credits(random_kernel(kind, groups, G, gen), "neglog1p")
        parts.append((kind, s))
    rewards = (torch.rand(groups, G, generator=gen) < 0.5).to(DTYPE)
    A = group_advantages(rewards.reshape(-1), G).reshape(groups, G)
    A_mixed = A[rewards.std(-1) > 0].abs()
    lines = []
    for kind, s in parts:
        q = torch.quantile(s.abs().flatten()[:100_000], torch.tensor([0.5, 0.99], dtype=DTYPE))
        negative = float((s < 0).to(DTYPE).mean())
        lines.append(
            f"{kind}: median |s| {float(q[0]):.3f}, 99% {float(q[1]):.3f}, negative {negative:.0%}, "
            f"mean sum_i s_i {float(s.sum(-1).mean()):+.3f}"
        )
    lines.append(f"|A_bar| (binary rewards, mixed groups) median {float(A_mixed.median()):.2f}")
    return CheckRecord(
        RESULT,
        f"scale of s_i vs A_bar, G={G}, g=-log(1+x)",
        "numeric",
        groups * 2,
        "median |s|",
        float(parts[0][1].abs().median()),
        Verdict.INFO,
        detail="; ".join(lines),
    )


def run(quick: bool = False) -> list[CheckRecord]:
    """All credit property checks."""
    total = 1_000 if quick else 10_000
    return [check_permutation(total), check_duplicates(total), check_scale(2_000 if quick else 20_000)]
