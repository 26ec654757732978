"""Output-diversity metrics of GAPO's evaluation (Anschel et al., arXiv 2511.12596).

* `js_to_uniform`: Jensen-Shannon divergence of the empirical item distribution to uniform over the list;
* `validity_rate`, `unique_at_n`: share of valid answers, number of distinct answers among the first N;
* `mean_pairwise_distance`: mean of 1 - cos(e_i, e_j) over pairs of embeddings (of texts, via an Embedder);
* `self_bleu`: mean BLEU-4 of each sample against all the others as references (report 1 - Self-BLEU).

Every argument that is a sequence of texts refuses a bare string (which would be read as one-letter texts).

Each fast path has a plain-loop reference in tests/references.py; the tests compare them.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np
import torch

from setpo._validate import check_choice, check_embeddings, check_int, check_len, check_real, check_shape, check_strings
from setpo.core._checks import as_float_tensor
from setpo.core.kernels import cosine_kernel
from setpo.embedders.base import Embedder
from setpo.rewards.gapo import normalize_answer


def check_not_bare_string(texts, name: str) -> None:
    """Refuse a bare string where a sequence of texts is expected (it would count as one-letter texts)."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of texts, got a bare string {texts[:40]!r}; wrap it in a list")


# ---------------------------------------------------------------------------------------------------------------
# Jensen-Shannon divergence


def _as_distribution(p, name: str) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must hold finite non-negative probabilities")
    if abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1, sums to {a.sum()!r}")
    return a


def _as_distributions(p, q, base: float) -> tuple[np.ndarray, np.ndarray, float]:
    """p and q as probability vectors on one support, and the log base (> 1: 2 for bits, math.e for nats)."""
    p, q = _as_distribution(p, "p"), _as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same support, got sizes {p.size} and {q.size}")
    return p, q, check_real(base, "log base", minimum=1, strict=True, kind=numbers.Real)


def kl_divergence(p, q, base: float = 2.0) -> float:
    """KL(p || q) = sum_x p(x) log(p(x) / q(x)), 0 log 0 = 0; inf when p puts mass where q has none."""
    p, q, base = _as_distributions(p, q, base)
    m = p > 0
    if np.any(q[m] == 0):
        return math.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])) / math.log(base))


def js_divergence(p, q, base: float = 2.0) -> float:
    """JS(p, q) = KL(p || M)/2 + KL(q || M)/2, M = (p + q)/2 (Lin 1991); in [0, 1] for base 2, [0, ln 2] for e.

    This is the divergence, not scipy's ``jensenshannon``, which returns its square root (the JS distance).
    """
    p, q, base = _as_distributions(p, q, base)
    m = 0.5 * (p + q)
    return max(0.0, 0.5 * kl_divergence(p, m, base) + 0.5 * kl_divergence(q, m, base))


InvalidPolicy = Literal["drop", "bucket"]


def item_distribution(
    answers: Sequence[str | None],
    items: Sequence[str],
    invalid: InvalidPolicy = "drop",
    normalize: Callable[[str | None], str] = normalize_answer,
) -> np.ndarray:
    """Empirical distribution of the answers over the listed items (normalised exact match).

    ``invalid="drop"``: over valid answers only (length L; ValueError if none is valid).
    ``invalid="bucket"``: invalid answers form an extra outcome at the end (length L + 1).
    """
    check_not_bare_string(answers, "answers")
    check_not_bare_string(items, "items")
    check_choice(invalid, "invalid policy", ("drop", "bucket"))
    check_len(answers, "answers")
    keys = [normalize(v) for v in items]
    if len(set(keys)) != len(keys) or "" in keys:
        raise ValueError(f"items must be distinct and non-empty after normalisation, got {list(items)}")
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys) + 1, dtype=np.float64)
    for a in answers:
        counts[index.get(normalize(a), len(keys))] += 1
    if invalid == "drop":
        counts = counts[:-1]
        if counts.sum() == 0:
            raise ValueError(f"none of the {len(answers)} answers is a listed item; use invalid='bucket'")
    return counts / counts.sum()


def js_to_uniform(
    answers: Sequence[str | None],
    items: Sequence[str],
    base: float = 2.0,
    invalid: InvalidPolicy = "drop",
    normalize: Callable[[str | None], str] = normalize_answer,
) -> float:
    """JS divergence between the empirical item distribution and uniform over the L listed items (GAPO, list selection).

    Base 2 by default (bits, in [0, 1]); pass ``base=math.e`` for nats. With ``invalid="bucket"`` the
    invalid outcome has target probability 0.
    """
    p = item_distribution(answers, items, invalid, normalize)
    q = np.full(p.size, 1.0 / len(items))
    if invalid == "bucket":
        q[-1] = 0.0
    return js_divergence(p, q, base)


# ---------------------------------------------------------------------------------------------------------------
# Validity and Unique@N


def validity_rate(
    answers: Sequence[str | None],
    valid: Iterable[str],
    normalize: Callable[[str | None], str] = normalize_answer,
) -> float:
    """Share of answers whose normalised form is in the normalised valid set (None / empty is invalid)."""
    check_not_bare_string(answers, "answers")
    check_not_bare_string(valid, "valid")
    check_len(answers, "answers")
    V = {normalize(v) for v in valid} - {""}
    check_len(V, "valid set (normalised, empty answers dropped)")
    return sum(normalize(a) in V for a in answers) / len(answers)


def unique_at_n(
    answers: Sequence[str | None],
    n: int | None = None,
    valid: Iterable[str] | None = None,
    normalize: Callable[[str | None], str] = normalize_answer,
) -> int:
    """Unique@N: number of distinct normalised non-empty answers among the first N (only valid ones if given)."""
    check_not_bare_string(answers, "answers")
    check_not_bare_string(valid, "valid")
    n = check_int(len(answers) if n is None else n, "N", minimum=1)
    if n > len(answers):
        raise ValueError(f"Unique@{n} needs at least {n} answers, got {len(answers)}")
    keys = {normalize(a) for a in answers[:n]} - {""}
    if valid is not None:
        keys &= {normalize(v) for v in valid}
    return len(keys)


# ---------------------------------------------------------------------------------------------------------------
# Mean pairwise embedding distance


def mean_pairwise_distance(embeddings: torch.Tensor) -> float:
    """Mean over pairs i < j of 1 - cos(e_i, e_j) (unclamped cosine, so in [0, 2]); zero rows: see cosine_kernel."""
    e = check_shape(as_float_tensor(embeddings, "embeddings"), "embeddings", ("N", "d"))
    n = len(check_len(e, "mean pairwise distance's embeddings", 2))
    cos = cosine_kernel(e.to(torch.float64), clamp=False)
    iu = torch.triu_indices(n, n, offset=1)
    return float((1.0 - cos[iu[0], iu[1]]).mean())


def mean_pairwise_embedding_distance(texts: Sequence[str], embedder: Embedder) -> float:
    """`mean_pairwise_distance` of the texts' embeddings (GAPO reports it for creative writing)."""
    texts = check_len(check_strings(texts, "texts"), "texts", 2)
    return mean_pairwise_distance(check_embeddings(torch.as_tensor(embedder(texts)), len(texts)))


# ---------------------------------------------------------------------------------------------------------------
# BLEU-4 and Self-BLEU

Smoothing = Literal["epsilon", "add_one", "none"]
Tokenize = Literal["word", "char"]


def tokenize(text: str, how: Tokenize = "word") -> list[str]:
    """Lower-cased whitespace words, or the characters of the lower-cased text with spaces removed.

    Lower-casing comes first, so "The" and "the" are one token in every BLEU score here.
    """
    check_choice(how, "tokenisation", ("word", "char"))
    if how == "word":
        return text.lower().split()
    return [c for c in text.lower() if not c.isspace()]


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """Counts of the n-grams (tuples) of a token sequence."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _check_bleu_args(max_n: int, smoothing: str, epsilon: float) -> None:
    check_int(max_n, "max_n", minimum=1)
    check_choice(smoothing, "smoothing", ("epsilon", "add_one", "none"))
    check_real(epsilon, "epsilon", minimum=0, strict=True, kind=numbers.Real)


def _bleu_from_counts(
    matches: Sequence[float], totals: Sequence[float], hyp_len: int, ref_len: int, smoothing: str, epsilon: float
) -> float:
    """BLEU = BP * exp(mean_n log p_n) (Papineni et al. 2002, eq. 1-2); 0 without a unigram match."""
    if hyp_len == 0 or matches[0] == 0:
        return 0.0
    log_p = 0.0
    for n, (m, t) in enumerate(zip(matches, totals), start=1):
        t = max(t, 1)
        if smoothing == "add_one" and n > 1:
            m, t = m + 1, t + 1
        elif m == 0:
            if smoothing == "none":
                return 0.0
            m = epsilon
        log_p += math.log(m / t) / len(matches)
    bp = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return bp * math.exp(log_p)


def _closest_ref_len(hyp_len: int, ref_lens: Iterable[int]) -> int:
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


def sentence_bleu(
    hypothesis: Sequence[str],
    references: Sequence[Sequence[str]],
    max_n: int = 4,
    smoothing: Smoothing = "epsilon",
    epsilon: float = 0.1,
) -> float:
    """Sentence BLEU-``max_n`` of a token list against reference token lists, uniform weights.

    Clipped n-gram precision (count clipped to the maximum over references); brevity penalty from the
    reference length closest to the hypothesis length (ties: the shorter). A zero n-gram match count is
    replaced by ``epsilon`` ("epsilon", Chen & Cherry 2014 method 1, as NLTK's ``method1`` used by Texygen's
    Self-BLEU); "add_one" adds 1 to numerator and denominator for n >= 2 (Lin & Och 2004); "none" gives 0.
    """
    _check_bleu_args(max_n, smoothing, epsilon)
    check_len(references, "BLEU's references")
    matches, totals = [], []
    for n in range(1, max_n + 1):
        hyp = ngrams(hypothesis, n)
        best: Counter = Counter()
        for ref in references:
            best |= ngrams(ref, n)  # element-wise max
        matches.append(sum(min(c, best[g]) for g, c in hyp.items()))
        totals.append(sum(hyp.values()))
    ref_len = _closest_ref_len(len(hypothesis), (len(r) for r in references))
    return _bleu_from_counts(matches, totals, len(hypothesis), ref_len, smoothing, epsilon)


def self_bleu(
    texts: Sequence[str],
    max_n: int = 4,
    smoothing: Smoothing = "epsilon",
    epsilon: float = 0.1,
    tokenization: Tokenize = "word",
) -> float:
    """Self-BLEU: the mean of `sentence_bleu`(text_i, all other texts) (Zhu et al. 2018) in O(N * len).

    For each n-gram only the two largest per-text counts are kept: the clipping count against "all texts
    but i" is the largest unless text i holds it, then the second largest. Texts are lower-cased before they are
    split into tokens (see `tokenize`), so Self-BLEU is case-insensitive.
    """
    check_not_bare_string(texts, "texts")
    _check_bleu_args(max_n, smoothing, epsilon)
    check_len(texts, "Self-BLEU's texts", 2)
    toks = [tokenize(t, tokenization) for t in texts]
    grams = [[ngrams(t, n) for n in range(1, max_n + 1)] for t in toks]
    top: list[dict[tuple, list[int]]] = [{} for _ in range(max_n)]  # n-gram -> [largest, second largest]
    for per_text in grams:
        for n_idx, counts in enumerate(per_text):
            for g, c in counts.items():
                t = top[n_idx].setdefault(g, [0, 0])
                if c > t[0]:
                    t[0], t[1] = c, t[0]
                elif c > t[1]:
                    t[1] = c
    lens = np.array([len(t) for t in toks])
    scores = []
    for i, per_text in enumerate(grams):
        matches, totals = [], []
        for n_idx, counts in enumerate(per_text):
            m = 0
            for g, c in counts.items():
                first, second = top[n_idx][g]
                m += min(c, second if c == first else first)
            matches.append(m)
            totals.append(sum(counts.values()))
        others = np.delete(lens, i)
        scores.append(
            _bleu_from_counts(
                matches, totals, len(toks[i]), _closest_ref_len(len(toks[i]), others.tolist()), smoothing, epsilon
            )
        )
    return float(np.mean(scores))
