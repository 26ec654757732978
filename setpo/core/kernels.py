"""Semantic kernels over a group of rollout embeddings."""

from __future__ import annotations

from typing import Literal

import torch

from setpo._validate import as_float_tensor, check_bool, check_choice, check_finite
from setpo.core._checks import compute_dtype

ZeroNormPolicy = Literal["isolate", "raise"]


def cosine_kernel(
    embeddings: torch.Tensor,
    clamp: bool = True,
    on_zero_norm: ZeroNormPolicy = "isolate",
) -> torch.Tensor:
    """k(o_i, o_j) = clamp(cos(e_i, e_j), 0, 1) (paper Sec. 3, kernel choice); (..., G, d) -> (..., G, G).

    The result is exactly symmetric with an exact unit diagonal. With ``clamp=False`` the raw cosine is
    returned (rounding kept inside [-1, 1]).

    A zero-norm embedding (for instance an empty completion embedded as the zero vector) has no
    direction. With ``on_zero_norm="isolate"`` (default) it gets similarity 0 to every non-zero
    embedding and 1 to every other zero-norm embedding (identical empty outputs are duplicates of each
    other). A lone empty output therefore looks novel to the kernel; the task reward is what should
    penalise it. ``on_zero_norm="raise"`` refuses such input instead.

    The kernel is computed and returned in at least float32: float16/bfloat16 embeddings give a float32 kernel
    (their values convert to float32 exactly), other dtypes are computed and returned as given. A 16-bit kernel
    would round every entry to 2^-8 (bfloat16): on a group of similar rollouts (mean cosine 0.96, G = 6) that
    makes the largest credit 81% wrong, so the kernel is never rounded back to the embeddings' dtype. Through
    `group_credits`, bf16/fp16 embeddings give credits within 1% of the group's largest float64 credit plus 1e-6
    (the float32 floor) on clustered and near-duplicate groups at G = 6 and 64
    (tests/test_kernel_symmetry_and_precision.py).
    """
    e = as_float_tensor(embeddings, "embeddings")
    if e.dim() < 2:
        raise ValueError(f"embeddings must have shape (..., G, d), got {tuple(e.shape)}")
    if e.shape[-1] == 0:
        raise ValueError("embeddings have dimension d=0")
    check_bool(clamp, "clamp")
    check_choice(on_zero_norm, "on_zero_norm option", ("isolate", "raise"))
    check_finite(e, "embeddings")
    e = e.to(compute_dtype(e.dtype))

    # Rows are first divided by their largest |entry| so the norm neither overflows nor underflows.
    scale = e.abs().amax(dim=-1, keepdim=True)
    zero = scale == 0
    if bool(zero.any()) and on_zero_norm == "raise":
        raise ValueError(f"embeddings contain {int(zero.sum())} zero-norm row(s) (empty completions?)")
    e = e / torch.where(zero, torch.ones_like(scale), scale)
    norms = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
    unit = e / torch.where(zero, torch.ones_like(norms), norms)
    sim = unit @ unit.mT
    sim = 0.5 * (sim + sim.mT)  # exact symmetry: float addition commutes
    if bool(zero.any()):
        both_zero = zero & zero.mT
        sim = torch.where(both_zero, torch.ones_like(sim), sim)
    sim = sim.clamp(0.0, 1.0) if clamp else sim.clamp(-1.0, 1.0)
    eye = torch.eye(sim.shape[-1], dtype=torch.bool, device=sim.device)
    return torch.where(eye, torch.ones_like(sim), sim)
