"""Credits for one process's rows (gather / group / slice), checked on every split against the single-process result
and a brute-force reference; plus the text and policy-hidden-state embedding helpers the trainer uses."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)

from setpo.core import cosine_kernel, loo_credits, set_diversity  # noqa: E402
from setpo.embedders import HashedNgramEmbedder  # noqa: E402
from setpo.integrations.trl import (  # noqa: E402
    completion_text,
    credits_for_local_rows,
    credits_for_local_rows_reference,
)
from setpo.integrations.trl.embedding import embed_texts, policy_embeddings, texts_for_embedding  # noqa: E402


def single_process_credits(emb: torch.Tensor, G: int, clamp: bool = True, g: str = "neglog1p") -> torch.Tensor:
    K = cosine_kernel(emb.double().reshape(-1, G, emb.shape[-1]), clamp=clamp)
    return loo_credits(K, g).reshape(-1)


# Every (processes, rows per process, G) with N = P * B divisible by G and N <= 24, G in 3..6: includes groups
# straddling two processes (B % G != 0), groups spanning three or more (G > B), and aligned layouts.
SPLITS = [
    (P, B, G)
    for P in (1, 2, 3, 4)
    for B in range(1, 13)
    for G in (3, 4, 5, 6)
    if (P * B) % G == 0 and P * B <= 24 and P * B >= G
]


@pytest.mark.parametrize(("P", "B", "G"), SPLITS)
def test_every_split_gives_the_single_process_credits(P, B, G):
    gen = torch.Generator().manual_seed(1000 * P + 10 * B + G)
    emb = torch.randn(P * B, 5, generator=gen) + 0.5  # mostly positive cosines: the clamp leaves most untouched
    emb[0] = emb[1]  # an exact duplicate pair
    full = single_process_credits(emb, G)
    parts = list(emb.split(B))
    pieces = []
    for p in range(P):
        got = credits_for_local_rows(parts, p, G)
        torch.testing.assert_close(got.all, full, rtol=0, atol=1e-12)
        torch.testing.assert_close(got.local, full[p * B : (p + 1) * B], rtol=0, atol=1e-12)
        pieces.append(got.local)
    torch.testing.assert_close(torch.cat(pieces), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("P", "B", "G"), [(2, 6, 4), (3, 2, 3), (4, 3, 6), (2, 5, 5), (1, 8, 4)])
@pytest.mark.parametrize("clamp", [True, False])
@pytest.mark.parametrize("g", ["neglog1p", "linear", "inverse"])
def test_fast_path_matches_the_brute_force_reference(P, B, G, clamp, g):
    gen = torch.Generator().manual_seed(P * 100 + B * 10 + G)
    emb = torch.randn(P * B, 7, generator=gen)
    emb[-1] = 0.0  # an empty completion (zero vector) is isolated by the kernel in both paths
    parts = list(emb.split(B))
    for p in range(P):
        fast = credits_for_local_rows(parts, p, G, clamp=clamp, shaping=g).local
        ref = credits_for_local_rows_reference(parts, p, G, clamp=clamp, shaping=g)
        torch.testing.assert_close(fast, ref, rtol=0, atol=1e-10)


def test_a_straddling_group_needs_the_whole_group():
    # 2 processes x 6 rows, G = 4: rows 4..7 form a group split 2 + 2. Credits from each process's half alone
    # would be different (and undefined for 2 rows): the gathered computation is what makes them right.
    gen = torch.Generator().manual_seed(3)
    emb = torch.rand(12, 6, generator=gen)
    parts = list(emb.split(6))
    c0, c1 = credits_for_local_rows(parts, 0, 4), credits_for_local_rows(parts, 1, 4)
    straddling = torch.cat([c0.local[4:], c1.local[:2]])
    torch.testing.assert_close(straddling, single_process_credits(emb[4:8], 4), rtol=0, atol=1e-12)
    wrong = single_process_credits(torch.cat([emb[4:6], emb[4:6]]), 4)  # e.g. padding a half-group with itself
    assert not torch.allclose(straddling, wrong)


def test_diversity_is_D_of_every_group():
    emb = torch.rand(12, 4, generator=torch.Generator().manual_seed(0))
    got = credits_for_local_rows(list(emb.split(3)), 1, 6)
    K = cosine_kernel(emb.double().reshape(2, 6, 4))
    torch.testing.assert_close(got.diversity, set_diversity(K), rtol=0, atol=1e-12)
    assert got.local.dtype == torch.float64


def test_layout_errors_are_clear():
    e = torch.rand(4, 3)
    with pytest.raises(ValueError, match="not divisible by the group size 3"):
        credits_for_local_rows([e, e], 0, 3)
    with pytest.raises(ValueError, match="group_size must be an integer >= 3"):
        credits_for_local_rows([e, e], 0, 2)
    with pytest.raises(ValueError, match="process_index 2 is outside 0..1"):
        credits_for_local_rows([e, e], 2, 4)
    with pytest.raises(ValueError, match="different numbers of rows"):
        credits_for_local_rows([e, torch.rand(2, 3)], 0, 3)
    with pytest.raises(ValueError, match=r"shape \(B_local, d\)"):
        credits_for_local_rows([torch.rand(4)], 0, 4)
    with pytest.raises(ValueError, match="at least one process"):
        credits_for_local_rows([], 0, 4)
    with pytest.raises(ValueError, match="NaN"):
        credits_for_local_rows([torch.full((4, 3), float("nan"))], 0, 4)


# -- text extraction and embedding -----------------------------------------------------------------------------


def test_completion_text_reads_strings_and_chat_messages():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "assistant", "content": "x = 1"}]) == "x = 1"
    blocks = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(blocks) == "ab"
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) == "q\na"
    with pytest.raises(ValueError, match="cannot read text from a completion of type int"):
        completion_text(3)


def test_texts_for_embedding_fields():
    prompts = ["1+1=", [{"role": "user", "content": "hi"}]]
    completions = ["2", [{"role": "assistant", "content": "yo"}]]
    assert texts_for_embedding(prompts, completions, "completion") == ["2", "yo"]
    assert texts_for_embedding(prompts, completions, "prompt+completion") == ["1+1=2", "hiyo"]
    with pytest.raises(ValueError, match="unknown embed field"):
        texts_for_embedding(prompts, completions, "prompt")
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        texts_for_embedding(prompts, completions[:1], "completion")


def test_embed_texts_chunks_and_checks_shape():
    texts = [f"text number {i}" for i in range(7)]
    hashed = HashedNgramEmbedder(dim=64)
    torch.testing.assert_close(embed_texts(hashed, texts, batch_size=3), hashed(texts).float())
    with pytest.raises(ValueError, match=r"returned shape \(3,\) for 3 texts"):
        embed_texts(lambda t: torch.zeros(len(t)), texts[:3], batch_size=8)
    with pytest.raises(ValueError, match="floating"):
        embed_texts(lambda t: torch.zeros(len(t), 2, dtype=torch.long), texts[:3], batch_size=8)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        embed_texts(hashed, texts, batch_size=0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from setpo.tiny import build_tiny_model, load_tiny

    model, tok = load_tiny(build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=32, num_layers=1))
    return model, tok


@pytest.mark.parametrize(("batch_size", "max_tokens"), [(1, None), (2, None), (8, 2)])
def test_policy_embeddings_match_a_row_by_row_forward(tiny, batch_size, max_tokens):
    model, tok = tiny
    prompt_ids = torch.tensor([[0, 0, 5, 6], [0, 7, 8, 9], [10, 11, 12, 13]])  # left padded (pad id 0)
    prompt_mask = (prompt_ids != 0).long()
    completion_ids = torch.tensor([[20, 21, 22], [23, 0, 0], [0, 0, 0]])  # right padded; last row empty
    completion_mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    got = policy_embeddings(
        model, prompt_ids, prompt_mask, completion_ids, completion_mask, batch_size=batch_size, max_tokens=max_tokens
    )
    for b in range(3):
        with torch.no_grad():
            out = model(
                input_ids=torch.cat([prompt_ids[b : b + 1], completion_ids[b : b + 1]], 1),
                attention_mask=torch.cat([prompt_mask[b : b + 1], completion_mask[b : b + 1]], 1),
                output_hidden_states=True,
            )
        n = int(completion_mask[b].sum()) if max_tokens is None else min(int(completion_mask[b].sum()), max_tokens)
        last = out.hidden_states[-1][0, prompt_ids.shape[1] :]
        expected = last[:n].mean(0) if n else torch.zeros(last.shape[-1])
        torch.testing.assert_close(got[b], expected, rtol=1e-4, atol=1e-5)
    assert got.shape == (3, 32) and bool((got[2] == 0).all())
