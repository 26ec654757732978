"""DIVER's `authors` BLEU preset against an independent plain-Python transcription of the public code's BLEU
(NJU-RL/DIVER calculate_belu_matrix: NLTK sentence_bleu, 5-gram weights, no smoothing, case kept, first 1000
characters, whitespace split)."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from setpo.methods import GroupBatch
from setpo.methods.reward.diver import authors_bleu, diver_method, pairwise_bleu_diversity

WEIGHTS = [0.02, 0.1, 0.15, 0.25, 0.38]


def nltk_like_bleu(reference: list[str], candidate: list[str]) -> float:
    """NLTK 3.x sentence_bleu([reference], candidate, weights=WEIGHTS) with its default SmoothingFunction().method0."""
    precisions = []
    for n in range(1, 6):
        cand = [tuple(candidate[k : k + n]) for k in range(len(candidate) - n + 1)]
        ref = [tuple(reference[k : k + n]) for k in range(len(reference) - n + 1)]
        clipped = sum(min(cand.count(g), ref.count(g)) for g in set(cand))
        precisions.append((clipped, max(1, len(cand))))
    if precisions[0][0] == 0:
        return 0
    c, r = len(candidate), len(reference)
    bp = 1 if c > r else (0 if c == 0 else math.exp(1 - r / c))
    total = 0.0
    for w, (num, den) in zip(WEIGHTS, precisions):
        total += w * math.log(num / den if num else sys.float_info.min)
    return bp * math.exp(total)


def authors_matrix(texts: list[str]) -> list[float]:
    """1 - the public code's avg_similarities (np.sum(similarity_matrix, axis=1) / (n - 1))."""
    n = len(texts)
    sim = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            a, b = texts[i][:1000].split(), texts[j][:1000].split()
            sim[i][j] = sim[j][i] = (nltk_like_bleu(a, b) + nltk_like_bleu(b, a)) / 2
    return [1 - sum(row) / (n - 1) for row in sim]


SOLUTION = (
    "Let x be the number of apples. Then 3x + 5 = 20, so 3x = 15 and x = 5. The answer is 5. "
    "We check: 3 * 5 + 5 = 20, which is correct. "
)
GROUPS = [
    [  # math-style rollouts: a copy, a case change, a paraphrase, a different method
        SOLUTION,
        SOLUTION,
        SOLUTION.upper(),
        "Let x be the number of apples. Subtract 5 from 20 to get 15, then divide by 3: x = 5. The answer is 5.",
        "Guess and check: x = 4 gives 17, x = 5 gives 20. So the answer is 5.",
        "The answer is 5.",
    ],
    [  # long texts: only the first 1000 characters count
        SOLUTION * 12,
        SOLUTION * 8 + "A different ending that lies beyond character 1000 " * 20,
        "Completely unrelated text about the weather today and tomorrow " * 20,
        "(25 - 1) * 3 = 72 so the expression is (25 - 1) * 3",
    ],
    [  # short texts (fewer than 5 tokens: every 5-gram precision is replaced by the float minimum)
        "x = 5",
        "x = 5",
        "y = 5",
        "",
    ],
]


@pytest.mark.parametrize("texts", GROUPS, ids=["math", "long", "short"])
def test_authors_preset_matches_the_public_code_to_rounding(texts):
    got = pairwise_bleu_diversity(texts, len(texts), preset="authors")
    want = torch.tensor([authors_matrix(texts)], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def test_authors_bleu_keeps_case_and_cuts_at_1000_characters():
    a = "The Answer Is Five Indeed Yes".split()
    assert authors_bleu(a, a) == pytest.approx(1.0, abs=1e-15)
    assert authors_bleu([w.lower() for w in a], a) == 0.0  # case kept: no unigram matches
    long_a, long_b = "w " * 600 + "tail one", "w " * 600 + "tail two"  # differ only after character 1000
    d = pairwise_bleu_diversity([long_a, long_b], 2, preset="authors")
    assert float(d.max()) == pytest.approx(0.0, abs=1e-15)
    assert float(pairwise_bleu_diversity([long_a, long_b], 2).max()) > 0  # the default reads whole texts


def test_authors_preset_differs_from_the_default_and_the_default_is_unchanged():
    texts = GROUPS[0]
    default = pairwise_bleu_diversity(texts, len(texts))
    assert float((default - pairwise_bleu_diversity(texts, len(texts), preset="authors")).abs().max()) > 1e-3
    torch.testing.assert_close(
        default, pairwise_bleu_diversity(texts, len(texts), 4, "epsilon", 0.1, "word"), rtol=0, atol=0
    )


def test_diver_method_takes_the_preset():
    texts = GROUPS[0]
    batch = GroupBatch.from_rows(torch.ones(6, dtype=torch.float64), 6, texts=texts, correct=torch.ones(6, dtype=bool))
    out = diver_method(batch, lam=0.5, preset="authors")
    want = 1.0 + 0.5 * torch.tensor(authors_matrix(texts), dtype=torch.float64)
    torch.testing.assert_close(out.reshape(-1), want, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="preset"):
        diver_method(batch, preset="nltk")
