"""DIVER (Hu, Zhang et al., arXiv 2509.26209): a pairwise-BLEU diversity bonus added to the reward.

Two BLEU presets. ``"default"`` (the one every published DIVER row of this project used): `setpo.metrics`'s
BLEU-4, uniform weights, epsilon smoothing (0.1), lower-cased whitespace words, whole texts. ``"authors"``: the
public code's (NJU-RL/DIVER, ``calculate_belu_matrix``): NLTK ``sentence_bleu`` with 5-gram weights
(0.02, 0.1, 0.15, 0.25, 0.38) and no smoothing (a zero n-gram match count becomes ``sys.float_info.min``, NLTK's
``method0``; no unigram match gives 0), case kept, ``text[:1000].split()``.

``correct_only`` uses the batch's ``correct`` flags; the trainers set them as score > ``correct_threshold``,
whose default 0.0 counts any positive score as correct. On Countdown a format-only answer scores 0.1, so the
Countdown comparison (reproduce/methods_comparison.py) sets the threshold to 0.5.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import torch

from setpo._validate import check_bool, check_choice, check_int
from setpo.methods.batch import GroupBatch, check_real
from setpo.methods.registry import register_method
from setpo.metrics.diversity import Smoothing, Tokenize, _bleu_from_counts, _check_bleu_args, ngrams, tokenize


def _pairwise_clipped_matches(counts: Sequence[Counter]) -> torch.Tensor:
    """(G, G) table of sum_g min(c_i(g), c_j(g)) over the n-grams g of G count tables, one dense pass per row."""
    ids: dict[tuple, int] = {}
    rows, cols, vals = [], [], []
    for i, c in enumerate(counts):
        for g, k in c.items():
            rows.append(i)
            cols.append(ids.setdefault(g, len(ids)))
            vals.append(k)
    dense = torch.zeros(len(counts), max(len(ids), 1), dtype=torch.float64)
    dense[rows, cols] = torch.tensor(vals, dtype=torch.float64)
    return torch.stack([torch.minimum(row, dense).sum(-1) for row in dense])


Preset = Literal["default", "authors"]
#: The public code's BLEU weights for 1- to 5-grams and the characters of each text it compares.
AUTHORS_WEIGHTS = (0.02, 0.1, 0.15, 0.25, 0.38)
AUTHORS_CHARS = 1000


def authors_bleu(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """NLTK sentence_bleu([reference], hypothesis, weights=AUTHORS_WEIGHTS), no smoothing (Papineni et al., eq. 1-2).

    p_n = clipped n-gram matches / hypothesis n-grams (denominator at least 1); a p_n with no match is replaced by
    sys.float_info.min (NLTK's method0), and no unigram match gives 0. BP = exp(1 - r/c) when c <= r, else 1.
    """
    c, r = len(hypothesis), len(reference)
    if c == 0:
        return 0.0
    log_sum = []
    for n, w in enumerate(AUTHORS_WEIGHTS, start=1):
        hyp, ref = ngrams(hypothesis, n), ngrams(reference, n)
        match = sum(min(k, ref[g]) for g, k in hyp.items())
        if match == 0 and n == 1:
            return 0.0
        p = match / max(1, sum(hyp.values())) if match else sys.float_info.min
        log_sum.append(w * math.log(p))
    bp = 1.0 if c > r else math.exp(1.0 - r / c)
    return bp * math.exp(math.fsum(log_sum))


def authors_bleu_diversity(texts: Sequence[str], group_size: int) -> torch.Tensor:
    """d_i = 1 - sum_{j != i} (BLEU(o_j | o_i) + BLEU(o_i | o_j)) / 2 / (G - 1) with `authors_bleu` (DIVER's code)."""
    B = len(texts) // group_size
    out = torch.empty(B, group_size, dtype=torch.float64)
    for b in range(B):
        toks = [t[:AUTHORS_CHARS].split() for t in texts[b * group_size : (b + 1) * group_size]]
        sim = torch.zeros(group_size, group_size, dtype=torch.float64)
        for i in range(group_size):
            for j in range(i + 1, group_size):
                sim[i, j] = sim[j, i] = (authors_bleu(toks[j], toks[i]) + authors_bleu(toks[i], toks[j])) / 2
        out[b] = 1.0 - sim.sum(-1) / (group_size - 1)
    return out


def pairwise_bleu_diversity(
    texts: Sequence[str],
    group_size: int,
    max_n: int = 4,
    smoothing: Smoothing = "epsilon",
    epsilon: float = 0.1,
    tokenization: Tokenize = "word",
    preset: Preset = "default",
) -> torch.Tensor:
    """d_i = 1 - mean_{j != i} (BLEU(o_j | o_i) + BLEU(o_i | o_j)) / 2 within the group (DIVER, Self-BLEU diversity).

    ``texts``: B * G texts, G = `group_size` consecutive per prompt; returns (B, G) float64. BLEU is
    `setpo.metrics.sentence_bleu` with one reference; the clipped matches of all pairs come from one dense n-gram
    count table per group. The symmetric pair similarity is the public code's (NJU-RL/DIVER, diversity_metric.py).
    ``preset="authors"`` uses that code's own BLEU instead (`authors_bleu`; max_n, smoothing, epsilon and
    tokenization are then ignored).
    """
    _check_bleu_args(max_n, smoothing, epsilon)
    check_choice(preset, "preset", ("default", "authors"))
    check_int(group_size, "group size G (the pairwise BLEU diversity needs 2)", minimum=2)
    if len(texts) % group_size:
        raise ValueError(f"{len(texts)} texts are not a multiple of the group size {group_size}")
    if preset == "authors":
        return authors_bleu_diversity(texts, group_size)
    B = len(texts) // group_size
    out = torch.empty(B, group_size, dtype=torch.float64)
    for b in range(B):
        toks = [tokenize(t, tokenization) for t in texts[b * group_size : (b + 1) * group_size]]
        # matches[n][i, j] = sum_g min(count_i(g), count_j(g)): BLEU's clipped n-gram matches of hypothesis j against
        # the single reference i. The min makes it symmetric, so one table serves both directions.
        table = torch.stack([_pairwise_clipped_matches([ngrams(t, n) for t in toks]) for n in range(1, max_n + 1)], -1)
        matches = table.tolist()  # matches[i][j] = the max_n clipped match counts
        totals = [[max(len(t) - n + 1, 0) for n in range(1, max_n + 1)] for t in toks]
        sim = [[0.0] * group_size for _ in range(group_size)]
        for i in range(group_size):
            for j in range(group_size):
                if i != j:  # BLEU of hypothesis j against the single reference i
                    sim[i][j] = _bleu_from_counts(
                        matches[i][j], totals[j], len(toks[j]), len(toks[i]), smoothing, epsilon
                    )
        sim_t = torch.tensor(sim, dtype=torch.float64)
        out[b] = 1.0 - ((sim_t + sim_t.T) / 2).sum(-1) / (group_size - 1)
    return out


@register_method(
    "diver",
    entry="reward",
    needs=("rewards", "texts"),
    citation="Hu, Zhang et al., Diversity-Incentivized Exploration for Versatile Reasoning, arXiv 2509.26209",
    group_scale="group",
    needs_for=lambda p: ("correct",) if p["correct_only"] else (),
)
def diver_method(
    batch: GroupBatch,
    lam: float = 0.1,
    correct_only: bool = True,
    max_n: int = 4,
    smoothing: Smoothing = "epsilon",
    epsilon: float = 0.1,
    tokenization: Tokenize = "word",
    preset: Preset = "default",
) -> torch.Tensor:
    """R~_i = R_i + lam * 1[correct_i] * d_i, d_i the pairwise-BLEU diversity (DIVER, diversity reward shaping).

    The bonus goes to correct rollouts only unless ``correct_only=False``; d_i compares rollout i with every
    other rollout of its group. See `pairwise_bleu_diversity` for the BLEU options; ``preset="authors"`` is the
    public code's BLEU, the default (used by every published DIVER row here) is this project's BLEU-4.
    """
    lam = check_real(lam, "lam", minimum=0.0)
    check_bool(correct_only, "correct_only")
    d = pairwise_bleu_diversity(batch.texts, batch.group_size, max_n, smoothing, epsilon, tokenization, preset)
    d = d.to(batch.rewards.device)
    if correct_only:
        d = d * batch.correct.to(torch.float64)
    return (batch.rewards.to(torch.float64) + lam * d).to(batch.rewards.dtype)
