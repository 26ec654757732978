"""Brute-force oracles for setpo.methods: plain Python loops over each method's definition, float64.

Every function takes nested lists / tensors and returns nested lists of floats, shaped (B, G) like the methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch

from setpo.metrics.diversity import sentence_bleu, tokenize
from setpo.rewards import normalize_answer


def _vec(x) -> list[float]:
    return [float(v) for v in (x.tolist() if isinstance(x, torch.Tensor) else x)]


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    """cos(u, v) by sums; a zero vector is similar (1) only to another zero vector."""
    nu = math.sqrt(sum(a * a for a in u))
    nv = math.sqrt(sum(b * b for b in v))
    if nu == 0 or nv == 0:
        return 1.0 if nu == nv == 0 else 0.0
    return min(max(sum(a * b for a, b in zip(u, v)) / (nu * nv), -1.0), 1.0)


def group_kernel(vectors: Sequence[Sequence[float]], clamp: bool) -> list[list[float]]:
    """Cosine kernel entry by entry, unit diagonal, clamped to [0, 1] if `clamp`."""
    G = len(vectors)
    return [
        [
            1.0 if i == j else (max(cosine(vectors[i], vectors[j]), 0.0) if clamp else cosine(vectors[i], vectors[j]))
            for j in range(G)
        ]
        for i in range(G)
    ]


def _set_diversity(K: list[list[float]], members: list[int]) -> float:
    """D(S) = mean_{j in S} -log(1 + m_j), m_j = mean_{k in S, k != j} K[j][k] (SetPO eq. 3-4)."""
    total = 0.0
    for j in members:
        others = [K[j][k] for k in members if k != j]
        total += -math.log1p(sum(others) / len(others))
    return total / len(members)


def setpo_reference(advantages, embeddings, lam: float, clamp: bool = True) -> list[list[float]]:
    """A_i + lam * (D(Omega) - D(Omega \\ {i})), D recomputed from scratch for every i (Algorithm 1)."""
    out = []
    for A, E in zip(advantages.tolist(), embeddings.tolist()):
        K = group_kernel(E, clamp)
        G = len(E)
        full = _set_diversity(K, list(range(G)))
        out.append([A[i] + lam * (full - _set_diversity(K, [j for j in range(G) if j != i])) for i in range(G)])
    return out


def gapo_reference(
    answers,
    valid_sets,
    group_size: int,
    form: str = "published",
    count: str = "inclusive",
    invalid_reward: float = -1.0,
) -> list[list[float]]:
    """1 - (f - 1/L) (or 1 - |f - 1/L|) for a valid answer, f its share of the group's valid answers; else -1."""
    out = []
    for b, V in enumerate(valid_sets):
        Vn = {normalize_answer(v) for v in V} - {""}
        norm = [normalize_answer(a) for a in answers[b * group_size : (b + 1) * group_size]]
        valid = [a for a in norm if a in Vn]
        row = []
        for a in norm:
            if a not in Vn:
                row.append(invalid_reward)
                continue
            same = sum(1 for x in valid if x == a)
            if count == "inclusive":
                f = same / len(valid)
            else:
                f = (same - 1) / (len(valid) - 1) if len(valid) > 1 else 0.0
            gap = f - 1 / len(Vn)
            row.append(1 - (abs(gap) if form == "absolute" else gap))
        out.append(row)
    return out


def dra_grpo_reference(rewards, embeddings, scope: str = "group", clamp: bool = False) -> list[list[float]]:
    """R_i / (1 + sum_{j != i, j in group} sim) (paper), or R_i / (sum_{j in batch} sim + 1e-6) (public code)."""
    R, E = rewards.tolist(), embeddings.tolist()
    B, G = len(R), len(R[0])

    def sim(u, v, same: bool) -> float:
        if same:
            return 1.0
        c = cosine(u, v)
        return max(c, 0.0) if clamp else c

    out = []
    for b in range(B):
        row = []
        for i in range(G):
            if scope == "group":
                denom = 1.0 + sum(sim(E[b][i], E[b][j], False) for j in range(G) if j != i)
            else:
                denom = 1e-6 + sum(sim(E[b][i], E[c][j], (c, j) == (b, i)) for c in range(B) for j in range(G))
            row.append(R[b][i] / denom)
        out.append(row)
    return out


def union_find_labels(G: int, same: Callable[[int, int], bool]) -> list[int]:
    """Classes of the transitive closure of `same` over pairs, labelled by their first member."""
    parent = list(range(G))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for i in range(G):
        for j in range(i + 1, G):
            if same(i, j):
                parent[find(j)] = find(i)
    roots = [find(i) for i in range(G)]
    return [min(k for k in range(G) if roots[k] == roots[i]) for i in range(G)]


def darling_reference(rewards, labels_per_group: Sequence[Sequence[int]], floor: float = 0.1) -> list[list[float]]:
    """R_i * max((n - |class(i)|) / (n - 1), floor), class sizes counted one by one."""
    out = []
    for R, lab in zip(rewards.tolist(), labels_per_group):
        n = len(lab)
        out.append([R[i] * max((n - sum(1 for x in lab if x == lab[i])) / (n - 1), floor) for i in range(n)])
    return out


def answer_labels_reference(answers, group_size: int) -> list[list[int]]:
    """Equal normalised answers are one class; a missing or empty answer is its own class."""
    out = []
    for b in range(len(answers) // group_size):
        norm = [normalize_answer(a) if a is not None else "" for a in answers[b * group_size : (b + 1) * group_size]]
        out.append(union_find_labels(group_size, lambda i, j, norm=norm: norm[i] != "" and norm[i] == norm[j]))
    return out


def embedding_labels_reference(embeddings, threshold: float) -> list[list[int]]:
    """Connected components of cos >= threshold within each group, by union-find."""
    out = []
    for E in embeddings.tolist():
        out.append(union_find_labels(len(E), lambda i, j, E=E: cosine(E[i], E[j]) >= threshold))
    return out


def diver_reference(
    rewards,
    texts,
    correct,
    group_size: int,
    lam: float,
    correct_only: bool = True,
    max_n: int = 4,
    smoothing: str = "epsilon",
    epsilon: float = 0.1,
    tokenization: str = "word",
) -> list[list[float]]:
    """R_i + lam [correct_i] (1 - mean_{j != i} (BLEU(j | i) + BLEU(i | j)) / 2), BLEU from `sentence_bleu` per pair."""
    out = []
    R, C = rewards.tolist(), (correct.tolist() if correct is not None else None)
    for b in range(len(R)):
        toks = [tokenize(t, tokenization) for t in texts[b * group_size : (b + 1) * group_size]]
        row = []
        for i in range(group_size):
            s = 0.0
            for j in range(group_size):
                if j != i:
                    s += (
                        sentence_bleu(toks[j], [toks[i]], max_n, smoothing, epsilon)
                        + sentence_bleu(toks[i], [toks[j]], max_n, smoothing, epsilon)
                    ) / 2
            d = 1.0 - s / (group_size - 1)
            gate = (1.0 if C[b][i] else 0.0) if correct_only else 1.0
            row.append(R[b][i] + lam * gate * d)
        out.append(row)
    return out


def log_det(M: list[list[float]]) -> float:
    """log det M of a positive-definite matrix: sum of the log pivots of Gaussian elimination (no pivoting needed for
    positive-definite M, whose pivots are all > 0); 0 for the 0x0 matrix."""
    A = [row[:] for row in M]
    n, total = len(A), 0.0
    for c in range(n):
        if A[c][c] <= 0:
            raise ValueError("matrix is not positive definite")
        total += math.log(A[c][c])
        for r in range(c + 1, n):
            f = A[r][c] / A[c][c]
            for k in range(c, n):
                A[r][k] -= f * A[c][k]
    return total


def dqo_credits_reference(embeddings, ridge: float = 1.0, normalize: bool = True) -> list[list[float]]:
    """log det(L + ridge I) - log det(L_{-i} + ridge I), L the Gram matrix, each determinant computed afresh."""
    out = []
    for E in embeddings.tolist():
        if normalize:
            E = [[x / n for x in v] if (n := math.sqrt(sum(x * x for x in v))) > 0 else v for v in E]
        G = len(E)
        K = [[sum(a * b for a, b in zip(E[i], E[j])) + (ridge if i == j else 0.0) for j in range(G)] for i in range(G)]
        full = log_det(K)
        out.append(
            [full - log_det([[K[r][c] for c in range(G) if c != i] for r in range(G) if r != i]) for i in range(G)]
        )
    return out


def dqo_reference(rewards, embeddings, alpha: float, ridge: float = 1.0, normalize: bool = True) -> list[list[float]]:
    """R_i + alpha * (log det K - log det K_{-i})."""
    c = dqo_credits_reference(embeddings, ridge, normalize)
    return [[r + alpha * x for r, x in zip(R, C)] for R, C in zip(rewards.tolist(), c)]


def _comb_ratio(top: int, bottom: int, k: int) -> Fraction:
    """C(top, k) / C(bottom, k) exactly, C(top, k) = 0 for top < k (negative top included)."""
    if top < k or top < 0:
        return Fraction(0) if k > 0 else Fraction(1)
    return Fraction(math.comb(top, k), math.comb(bottom, k))


def passk_reference(correct, k: int, eps: float = 0.0) -> list[list[float]]:
    """(1 - rho)/sigma for a correct rollout, (1 - rho - C(n-c-1,k-1)/C(n-1,k-1))/sigma else; 0 where sigma = 0."""
    out = []
    for row in correct.tolist():
        n, c = len(row), sum(1 for x in row if x)
        rho = 1 - _comb_ratio(n - c, n, k)
        sigma = math.sqrt(float(rho * (1 - rho)))
        pos = float(1 - rho)
        neg = float(1 - rho - _comb_ratio(n - c - 1, n - 1, k - 1)) if c < n else 0.0
        if eps > 0:
            out.append([(pos if x else neg) / (sigma + eps) for x in row])
        else:
            out.append([((pos if x else neg) / sigma) if sigma > 0 else 0.0 for x in row])
    return out


def entropy_bonus_reference(entropies, mask, coef: float, aggregation: str = "token-mean") -> float:
    """-coef * (mean of the masked token entropies, over all tokens or per rollout then over rollouts)."""
    H = entropies.tolist()
    M = mask.tolist() if mask is not None else [[[True] * len(t) for t in g] for g in H]
    if aggregation == "token-mean":
        vals = [h for hg, mg in zip(H, M) for ht, mt in zip(hg, mg) for h, m in zip(ht, mt) if m]
        return -coef * sum(vals) / len(vals)
    per_seq = []
    for hg, mg in zip(H, M):
        for ht, mt in zip(hg, mg):
            vals = [h for h, m in zip(ht, mt) if m]
            if vals:
                per_seq.append(sum(vals) / len(vals))
    return -coef * sum(per_seq) / len(per_seq)
