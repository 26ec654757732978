"""Every fast path of setpo.methods against its plain-loop float64 oracle in method_references.py, on random
inputs and on the edge cases: ties and duplicates, G = 1 and 2 where defined, all-correct and all-wrong groups,
zero embeddings."""

from __future__ import annotations

import pytest
import torch
from method_references import (
    answer_labels_reference,
    darling_reference,
    diver_reference,
    dqo_credits_reference,
    dqo_reference,
    dra_grpo_reference,
    embedding_labels_reference,
    entropy_bonus_reference,
    gapo_reference,
    passk_reference,
    setpo_reference,
)

from setpo.methods import GroupBatch, get_method
from setpo.methods.reward import answer_partition, embedding_partition

SEEDS = range(6)
WORDS = "the cat sat on a mat dog ran far x y".split()


def close(actual: torch.Tensor, expected, atol: float = 1e-10) -> None:
    torch.testing.assert_close(actual.to(torch.float64), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=atol)


def embeddings_with_ties(gen: torch.Generator, B: int, G: int, d: int = 4) -> torch.Tensor:
    """Rows drawn from a pool of 3 vectors per group (so duplicates are common), some rows zero, some negated."""
    pool = torch.randn(B, 3, d, generator=gen, dtype=torch.float64)
    pick = torch.randint(0, 4, (B, G), generator=gen)
    e = torch.randn(B, G, d, generator=gen, dtype=torch.float64)
    for b in range(B):
        for g in range(G):
            if pick[b, g] < 3:
                e[b, g] = pool[b, pick[b, g]] * (1 + pick[b, g])  # a scaled duplicate: cosine exactly 1 in theory
    e[0, 0] = 0.0
    if G > 1:
        e[-1, -1] = 0.0
    return e


def texts(gen: torch.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        length = int(torch.randint(0, 7, (1,), generator=gen))
        out.append(" ".join(WORDS[int(i)] for i in torch.randint(0, len(WORDS), (length,), generator=gen)))
    out[0] = out[-1]  # an exact duplicate
    return out


def rewards(gen: torch.Generator, B: int, G: int) -> torch.Tensor:
    return torch.randint(0, 3, (B, G), generator=gen).to(torch.float64) / 2  # ties in {0, 0.5, 1}


# ---------------------------------------------------------------------------------------------------------------
# setpo


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [3, 5])
def test_setpo_matches_algorithm_1_by_loops(seed, G):
    gen = torch.Generator().manual_seed(seed)
    E = embeddings_with_ties(gen, 4, G)
    A = torch.randn(4, G, generator=gen, dtype=torch.float64)
    batch = GroupBatch(rewards(gen, 4, G), embeddings=E)
    out = get_method("setpo")(batch, A, lam=0.3)
    close(out, setpo_reference(A, E, 0.3))


# ---------------------------------------------------------------------------------------------------------------
# gapo


@pytest.mark.parametrize("form", ["published", "absolute"])
@pytest.mark.parametrize("count", ["inclusive", "leave_one_out"])
@pytest.mark.parametrize("seed", SEEDS)
def test_gapo_matches_loops(form, count, seed):
    gen = torch.Generator().manual_seed(seed)
    B, G = 3, 5
    pool = ["Red", "green", "blue", "purple", None, " red."]
    answers = [pool[int(i)] for i in torch.randint(0, len(pool), (B * G,), generator=gen)]
    valid = [{"red", "green", "blue"}] * B
    batch = GroupBatch(torch.zeros(B, G, dtype=torch.float64), answers=answers, valid_sets=valid)
    out = get_method("gapo")(batch, form=form, count=count)
    close(out, gapo_reference(answers, valid, G, form, count))


# ---------------------------------------------------------------------------------------------------------------
# dra_grpo


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [1, 2, 5])
@pytest.mark.parametrize("scope", ["group", "batch"])
def test_dra_grpo_matches_loops_with_clamp(seed, G, scope):
    gen = torch.Generator().manual_seed(seed)
    E = embeddings_with_ties(gen, 3, G)
    R = rewards(gen, 3, G)
    out = get_method("dra_grpo")(GroupBatch(R, embeddings=E), scope=scope, clamp=True)
    close(out, dra_grpo_reference(R, E, scope, clamp=True))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scope", ["group", "batch"])
def test_dra_grpo_matches_loops_raw_cosine(seed, scope):
    # Non-negative embeddings keep every raw cosine >= 0, so the denominators stay positive.
    gen = torch.Generator().manual_seed(seed)
    E = embeddings_with_ties(gen, 3, 4).abs()
    R = rewards(gen, 3, 4)
    out = get_method("dra_grpo")(GroupBatch(R, embeddings=E), scope=scope)
    close(out, dra_grpo_reference(R, E, scope, clamp=False))


# ---------------------------------------------------------------------------------------------------------------
# darling


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [2, 6])
@pytest.mark.parametrize("floor", [0.0, 0.1])
def test_darling_answer_partition_matches_loops(seed, G, floor):
    gen = torch.Generator().manual_seed(seed)
    pool = ["12", " 12.", "7", None, "", "x"]
    answers = [pool[int(i)] for i in torch.randint(0, len(pool), (3 * G,), generator=gen)]
    R = rewards(gen, 3, G)
    labels = answer_labels_reference(answers, G)
    assert answer_partition(answers, G).tolist() == labels
    out = get_method("darling")(GroupBatch(R, answers=answers), partition="answer", floor=floor)
    close(out, darling_reference(R, labels, floor))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [2, 7])
@pytest.mark.parametrize("threshold", [0.3, 0.95])
def test_darling_embedding_partition_matches_union_find(seed, G, threshold):
    gen = torch.Generator().manual_seed(seed)
    E = embeddings_with_ties(gen, 4, G, d=3)
    R = rewards(gen, 4, G)
    labels = embedding_labels_reference(E, threshold)
    assert embedding_partition(E, threshold).tolist() == labels
    out = get_method("darling")(GroupBatch(R, embeddings=E), partition="embedding", threshold=threshold)
    close(out, darling_reference(R, labels, 0.1))


def test_darling_embedding_partition_at_threshold_one_merges_exact_copies():
    x = torch.randn(1, 4, 7, generator=torch.Generator().manual_seed(0))
    # float64 cosines of copies come out up to a few ulps below 1; the partition must still join them
    assert embedding_partition(torch.cat([x, x], 1), 1.0).tolist() == [[0, 1, 2, 3, 0, 1, 2, 3]]


def test_darling_embedding_partition_is_transitive():
    # a ~ b and b ~ c at 60 degrees each, a and c at 120 degrees: one class through b.
    E = torch.tensor([[[1.0, 0.0], [0.5, 3**0.5 / 2], [-0.5, 3**0.5 / 2], [0.0, -1.0]]], dtype=torch.float64)
    assert embedding_partition(E, 0.4).tolist() == [[0, 0, 0, 3]]
    assert embedding_labels_reference(E, 0.4) == [[0, 0, 0, 3]]


# ---------------------------------------------------------------------------------------------------------------
# diver


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [2, 5])
@pytest.mark.parametrize("correct_only", [True, False])
@pytest.mark.parametrize("smoothing", ["epsilon", "add_one"])
def test_diver_matches_pairwise_sentence_bleu(seed, G, correct_only, smoothing):
    gen = torch.Generator().manual_seed(seed)
    T = texts(gen, 3 * G)
    R = rewards(gen, 3, G)
    C = torch.rand(3, G, generator=gen) < 0.5
    C[0] = True  # an all-correct group
    C[1] = False  # an all-wrong group
    out = get_method("diver")(
        GroupBatch(R, texts=T, correct=C), lam=0.7, correct_only=correct_only, smoothing=smoothing
    )
    close(out, diver_reference(R, T, C, G, 0.7, correct_only, smoothing=smoothing))


# ---------------------------------------------------------------------------------------------------------------
# dqo


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("normalize", [True, False])
def test_dqo_matches_determinants_by_elimination(seed, G, normalize):
    gen = torch.Generator().manual_seed(seed)
    E = embeddings_with_ties(gen, 3, G)  # duplicates and zero rows: L is singular, L + I is not
    R = rewards(gen, 3, G)
    out = get_method("dqo")(GroupBatch(R, embeddings=E), alpha=0.5, normalize=normalize)
    close(out, dqo_reference(R, E, 0.5, 1.0, normalize), atol=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_dqo_without_ridge_on_independent_embeddings(seed):
    gen = torch.Generator().manual_seed(seed)
    E = torch.randn(2, 4, 6, generator=gen, dtype=torch.float64)  # G = 4 <= d = 6: full rank almost surely
    from setpo.methods.reward import dqo_credits

    close(dqo_credits(E, ridge=0.0), dqo_credits_reference(E, ridge=0.0), atol=1e-8)


# ---------------------------------------------------------------------------------------------------------------
# passk


@pytest.mark.parametrize("G", [1, 2, 3, 8])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_passk_every_count_and_k_matches_exact_fractions(G, eps):
    # Every correct count c = 0..G (so the all-wrong and all-correct groups too) and every k = 1..G.
    correct = torch.tensor([[g < c for g in range(G)] for c in range(G + 1)])
    for k in range(1, G + 1):
        out = get_method("passk")(
            GroupBatch(torch.zeros(G + 1, G), correct=correct), torch.zeros(G + 1, G, dtype=torch.float64), k=k, eps=eps
        )
        close(out, passk_reference(correct, k, eps), atol=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_passk_random_masks_large_group(seed):
    gen = torch.Generator().manual_seed(seed)
    correct = torch.rand(5, 64, generator=gen) < torch.rand(5, 1, generator=gen)
    for k in (1, 4, 16, 64):
        out = get_method("passk")(
            GroupBatch(torch.zeros(5, 64), correct=correct), torch.zeros(5, 64, dtype=torch.float64), k=k
        )
        close(out, passk_reference(correct, k), atol=1e-9)


# ---------------------------------------------------------------------------------------------------------------
# entropy_bonus


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("with_mask", [True, False])
def test_entropy_bonus_matches_loops(seed, aggregation, with_mask):
    gen = torch.Generator().manual_seed(seed)
    H = torch.rand(2, 3, 5, generator=gen, dtype=torch.float64) * 3
    M = torch.rand(2, 3, 5, generator=gen) < 0.6 if with_mask else None
    if M is not None:
        M[0, 0] = False  # a rollout without response tokens
        M[1, 2, 0] = True
    batch = GroupBatch(torch.zeros(2, 3), token_entropies=H, response_mask=M)
    out = get_method("entropy_bonus")(batch, coef=0.02, aggregation=aggregation)
    assert out.shape == ()
    assert abs(float(out) - entropy_bonus_reference(H, M, 0.02, aggregation)) < 1e-12
