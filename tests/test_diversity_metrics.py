"""Diversity metrics against hand-computed values and their plain-loop references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from references import mean_pairwise_distance_reference, self_bleu_reference
from scipy.spatial.distance import jensenshannon

from setpo.metrics import (
    item_distribution,
    js_divergence,
    js_to_uniform,
    kl_divergence,
    mean_pairwise_distance,
    mean_pairwise_embedding_distance,
    pass_at_k,
    self_bleu,
    sentence_bleu,
    unique_at_n,
    validity_rate,
)

ITEMS8 = ["a", "b", "c", "d", "e", "f", "g", "h"]


# --- Jensen-Shannon ---------------------------------------------------------------------------------------------


def test_js_point_mass_vs_uniform_over_8_by_hand():
    # p = delta_a, q = 1/8: M = (9/16, 1/16 x7). KL(p||M) = log(16/9); KL(q||M) = 1/8 log(2/9) + 7/8 log 2.
    kl_p = math.log2(16 / 9)
    kl_q = (1 / 8) * math.log2(2 / 9) + (7 / 8) * math.log2(2)
    expected_bits = 0.5 * (kl_p + kl_q)
    assert expected_bits == pytest.approx(0.716917, abs=1e-6)
    assert js_to_uniform(["a"] * 100, ITEMS8) == pytest.approx(expected_bits, rel=1e-12)
    assert js_to_uniform(["a"] * 100, ITEMS8, base=math.e) == pytest.approx(expected_bits * math.log(2), rel=1e-12)


def test_js_two_of_four_by_hand():
    # p = (1/2, 1/2, 0, 0), q = 1/4: M = (3/8, 3/8, 1/8, 1/8).
    # KL(p||M) = log(4/3); KL(q||M) = 1/2 log(2/3) + 1/2 log 2 = 1/2 log(4/3).  JS = 3/4 log(4/3).
    answers = ["x", "y"] * 10
    assert js_to_uniform(answers, ["x", "y", "z", "w"]) == pytest.approx(0.75 * math.log2(4 / 3), rel=1e-12)


def test_js_uniform_answers_is_zero_and_bounds():
    assert js_to_uniform(ITEMS8 * 5, ITEMS8) == pytest.approx(0.0, abs=1e-15)
    # disjoint supports reach the maximum: 1 bit, ln 2 nats
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert js_divergence([1, 0], [0, 1], base=math.e) == pytest.approx(math.log(2))


@given(
    st.lists(st.floats(0.0, 10.0), min_size=2, max_size=12).filter(lambda v: sum(v) > 1e-3),
    st.integers(0, 2**31),
)
def test_js_matches_scipy_distance_squared(weights, seed):
    p = np.asarray(weights) / np.sum(weights)
    q = np.random.default_rng(seed).dirichlet(np.ones(len(p)))
    assert js_divergence(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-10)
    assert js_divergence(p, q, base=math.e) == pytest.approx(jensenshannon(p, q) ** 2, abs=1e-10)
    assert js_divergence(p, q) == pytest.approx(js_divergence(q, p), abs=1e-12)


def test_kl_inf_when_support_missing():
    assert kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert kl_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(1.0)


def test_item_distribution_normalises_and_handles_invalid():
    answers = ["Apple", " apple.", "PEAR", "rock", None, ""]
    np.testing.assert_allclose(item_distribution(answers, ["apple", "pear", "fig"]), [2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(
        item_distribution(answers, ["apple", "pear", "fig"], invalid="bucket"), [2 / 6, 1 / 6, 0, 3 / 6]
    )
    # bucket: invalid mass against target 0.  p = (1/2, 0, 1/2), q = (1/2, 1/2, 0):
    # M = (1/2, 1/4, 1/4); KL(p||M) = 1/2 log 2 = KL(q||M); JS = 1/2 bit.
    assert js_to_uniform(["x", "junk"], ["x", "y"], invalid="bucket") == pytest.approx(0.5)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: js_to_uniform(["rock"], ["a", "b"]), "none of the 1 answers"),
        (lambda: js_to_uniform([], ["a", "b"]), "answers must hold at least 1 item"),
        (lambda: js_to_uniform(["a"], ["a", "A"]), "distinct"),
        (lambda: js_to_uniform(["a"], ["a", "b"], invalid="keep"), "invalid policy"),
        (lambda: js_to_uniform(["a"], ["a", "b"], base=1.0), "log base"),
        (lambda: js_divergence([0.5, 0.6], [0.5, 0.5]), "sum to 1"),
        (lambda: js_divergence([1.0], [0.5, 0.5]), "same support"),
        (lambda: js_divergence([-0.5, 1.5], [0.5, 0.5]), "non-negative"),
        (lambda: js_divergence([[1.0]], [[1.0]]), "1-D"),
    ],
)
def test_js_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- validity and Unique@N ---------------------------------------------------------------------------------------


def test_validity_rate_by_hand():
    assert validity_rate(["Fig", "fig!", "kiwi", None, "", "pear"], ["fig", "pear"]) == pytest.approx(3 / 6)
    with pytest.raises(ValueError, match="answers must hold at least 1 item"):
        validity_rate([], ["a"])
    with pytest.raises(ValueError, match=r"valid set \(normalised, empty answers dropped\) must hold at least 1 item"):
        validity_rate(["a"], [""])


def test_unique_at_n_by_hand():
    answers = ["Paris", "paris", "Rome", "rome.", "oslo", None, "", "lima", "Atlantis"]
    assert unique_at_n(answers) == 5  # paris, rome, oslo, lima, atlantis
    assert unique_at_n(answers, n=4) == 2
    assert unique_at_n(answers, valid=["paris", "rome", "oslo", "lima"]) == 4
    assert unique_at_n(answers, n=5, valid=["oslo"]) == 1
    with pytest.raises(ValueError, match="at least 10 answers"):
        unique_at_n(answers, n=10)
    with pytest.raises(ValueError, match="N must be an integer >= 1, got 0"):
        unique_at_n(answers, n=0)


# --- mean pairwise embedding distance ----------------------------------------------------------------------------


def test_mean_pairwise_distance_by_hand():
    # e1=(1,0), e2=(0,1), e3=(1,1): cos12 = 0, cos13 = cos23 = 1/sqrt2 -> mean(1, 1-1/sqrt2, 1-1/sqrt2)
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    expected = (1 + 2 * (1 - 1 / math.sqrt(2))) / 3
    assert mean_pairwise_distance(e) == pytest.approx(expected, rel=1e-12)
    # opposite vectors: unclamped cosine -1 -> distance 2
    assert mean_pairwise_distance(torch.tensor([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(2.0)
    assert mean_pairwise_distance(torch.ones(4, 3)) == pytest.approx(0.0, abs=1e-12)


def test_mean_pairwise_distance_matches_reference(rng):
    e = rng.normal(size=(17, 5))
    assert mean_pairwise_distance(torch.from_numpy(e)) == pytest.approx(mean_pairwise_distance_reference(e), rel=1e-12)


def test_mean_pairwise_embedding_distance_uses_embedder():
    table = {"cat": [1.0, 0.0], "dog": [0.0, 1.0], "cow": [1.0, 1.0]}
    calls = []

    def embedder(texts):
        calls.append(list(texts))
        return torch.tensor([table[t] for t in texts])

    got = mean_pairwise_embedding_distance(["cat", "dog", "cow"], embedder)
    assert calls == [["cat", "dog", "cow"]]
    assert got == pytest.approx((1 + 2 * (1 - 1 / math.sqrt(2))) / 3)
    with pytest.raises(ValueError, match="returned shape"):
        mean_pairwise_embedding_distance(["cat", "dog"], lambda t: torch.ones(3, 2))


@pytest.mark.parametrize(
    "x, match",
    [(torch.ones(1, 3), "at least 2"), (torch.ones(3), r"\(N, d\)"), (torch.ones(3, 2, dtype=torch.int64), "floating")],
)
def test_mean_pairwise_distance_bad_input(x, match):
    with pytest.raises(ValueError, match=match):
        mean_pairwise_distance(x)


# --- BLEU / Self-BLEU --------------------------------------------------------------------------------------------


def test_sentence_bleu_by_hand():
    hyp = "the cat sat on the mat".split()
    ref = "the cat is on the mat".split()
    # clipped precisions: 1-gram 5/6, 2-gram 3/5 (the cat, on the, the mat), 3-gram 1/4 (on the mat),
    # 4-gram 0/3 -> epsilon 0.1/3; equal lengths -> BP = 1.
    expected = (5 / 6 * 3 / 5 * 1 / 4 * 0.1 / 3) ** 0.25
    assert sentence_bleu(hyp, [ref]) == pytest.approx(expected, rel=1e-12)
    assert sentence_bleu(hyp, [ref], smoothing="none") == 0.0
    # add-one for n >= 2: (5/6 * 4/6 * 2/5 * 1/4) ** (1/4)
    assert sentence_bleu(hyp, [ref], smoothing="add_one") == pytest.approx((5 / 6 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25)


def test_sentence_bleu_brevity_and_multi_reference_by_hand():
    hyp = "a b".split()
    # refs of length 3 and 5: closest is 3 -> BP = exp(1 - 3/2). Unigrams 2/2, bigram "a b" in ref 2: 1/1.
    refs = ["a x y".split(), "q a b z w".split()]
    assert sentence_bleu(hyp, refs, max_n=2) == pytest.approx(math.exp(1 - 3 / 2))
    # clipping: hyp "a a a" vs refs with at most two a's -> 2/3 unigram precision
    assert sentence_bleu(["a", "a", "a"], [["a", "a", "b"], ["a", "c", "d"]], max_n=1) == pytest.approx(2 / 3)
    assert sentence_bleu(["z"], [["a"]]) == 0.0
    assert sentence_bleu([], [["a"]]) == 0.0


def test_self_bleu_by_hand():
    texts = ["a b", "a b", "c d"]
    # texts 1 and 2 are each other's exact copy: BLEU 1 (max_n=2, same length). Text 3 shares nothing: 0.
    assert self_bleu(texts, max_n=2) == pytest.approx(2 / 3)
    assert self_bleu_reference(texts, max_n=2) == pytest.approx(2 / 3)
    assert self_bleu(["x y z"] * 4, max_n=3) == pytest.approx(1.0)
    # BLEU-4 of a 3-token copy: no 4-gram at all, so p_4 = epsilon / 1 and BLEU = 0.1 ** (1/4)
    assert self_bleu(["x y z"] * 4) == pytest.approx(0.1**0.25)


@given(
    st.lists(st.lists(st.sampled_from("abcde"), min_size=0, max_size=9).map(" ".join), min_size=2, max_size=9),
    st.sampled_from(["epsilon", "add_one", "none"]),
    st.sampled_from(["word", "char"]),
)
def test_self_bleu_fast_matches_reference(texts, smoothing, tokenization):
    fast = self_bleu(texts, smoothing=smoothing, tokenization=tokenization)
    ref = self_bleu_reference(texts, smoothing=smoothing, tokenization=tokenization)
    assert fast == pytest.approx(ref, abs=1e-12)
    assert 0.0 <= fast <= 1.0


def test_self_bleu_char_tokens():
    # char tokens of "ab", "ab ": identical after dropping spaces
    assert self_bleu(["ab", "a b"], max_n=2, tokenization="char") == pytest.approx(1.0)
    assert self_bleu(["ab", "a b"], max_n=2, tokenization="word") == pytest.approx(0.0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: self_bleu(["a"]), "at least 2"),
        (lambda: self_bleu(["a", "b"], max_n=0), "max_n"),
        (lambda: self_bleu(["a", "b"], smoothing="floor"), "smoothing"),
        (lambda: self_bleu(["a", "b"], tokenization="bpe"), "tokenisation"),
        (lambda: sentence_bleu(["a"], []), "reference"),
        (lambda: sentence_bleu(["a"], [["a"]], epsilon=0.0), "epsilon"),
    ],
)
def test_bleu_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_pass_at_k_still_exported():
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
