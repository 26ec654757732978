"""Credits for one process's rows (gather / group / slice), checked on every split against the single-process result
and a brute-force reference; plus the text and policy-hidden-state embedding helpers the trainer uses."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from references import credits_for_local_rows_reference  # noqa: E402

from setpo.core import cosine_kernel, loo_credits, set_diversity  # noqa: E402
from setpo.embedders import HashedNgramEmbedder, embed_texts  # noqa: E402
from setpo.integrations.trl import completion_text, credits_for_local_rows  # noqa: E402
from setpo.integrations.trl.embedding import policy_embeddings, texts_for_embedding  # noqa: E402


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


PROMPT_IDS = torch.tensor([[0, 0, 5, 6], [0, 7, 8, 9], [10, 11, 12, 13]])  # left padded (pad id 0)
COMPLETION_IDS = torch.tensor([[20, 21, 22], [23, 0, 0], [0, 0, 0]])  # right padded; last row empty
COMPLETION_MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    ("batch_size", "max_tokens", "chunk_tokens"), [(1, None, None), (2, None, None), (8, 2, None), (8, None, 7)]
)
def test_policy_embeddings_match_a_row_by_row_forward(tiny, batch_size, max_tokens, chunk_tokens):
    model, tok = tiny
    prompt_ids, completion_ids, completion_mask = PROMPT_IDS, COMPLETION_IDS, COMPLETION_MASK
    prompt_mask = (prompt_ids != 0).long()
    got = policy_embeddings(
        model,
        prompt_ids,
        prompt_mask,
        completion_ids,
        completion_mask,
        batch_size=batch_size,
        max_tokens=max_tokens,
        chunk_tokens=chunk_tokens,
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


@pytest.mark.parametrize(("P", "B", "G"), [(2, 6, 4), (3, 4, 6), (1, 10, 5), (4, 3, 3)])
def test_rows_kept_out_of_the_kernel_match_the_brute_force_reference(P, B, G):
    # Unscorable / masked-truncated rows: no credit, and the group's credits are those of its remaining rows.
    gen = torch.Generator().manual_seed(7 * P + B + G)
    emb = torch.randn(P * B, 6, generator=gen) + 0.3
    kernel_rows = torch.rand(P * B, generator=gen) > 0.3
    kernel_rows[:G] = True
    kernel_rows[0] = False  # group 0 keeps G - 1 rows
    parts = list(emb.split(B))
    for p in range(P):
        got = credits_for_local_rows(parts, p, G, kernel_rows=kernel_rows)
        ref = credits_for_local_rows_reference(parts, p, G, kernel_rows=kernel_rows)
        torch.testing.assert_close(got.local, ref, rtol=0, atol=1e-10)
    got = credits_for_local_rows(parts, 0, G, kernel_rows=kernel_rows)
    assert got.all[0] == 0 and bool((got.all[~kernel_rows] == 0).all())
    counts = kernel_rows.reshape(-1, G).sum(1)
    assert torch.equal(got.defined_rows, kernel_rows & (counts >= 3).repeat_interleave(G))
    if G - 1 >= 3:  # group 0 by hand: the kernel of its G - 1 remaining rows
        torch.testing.assert_close(got.all[1:G], single_process_credits(emb[1:G], G - 1), rtol=0, atol=1e-12)
    assert torch.isnan(got.diversity[counts < 3]).all() and not torch.isnan(got.diversity[counts >= 3]).any()


def test_kernel_rows_must_be_one_bool_per_row():
    parts = [torch.rand(4, 3)]
    with pytest.raises(ValueError, match=r"kernel_rows must be a bool tensor of shape \(4,\)"):
        credits_for_local_rows(parts, 0, 4, kernel_rows=torch.ones(4))


def test_policy_embeddings_keep_only_the_last_layer_and_size_passes_by_tokens(tiny):
    # Every pass: no per-layer hidden states requested, and rows x length within the token budget.
    model, _ = tiny
    calls: list[tuple[tuple[int, ...], object]] = []
    hook = model.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append((tuple(kwargs["input_ids"].shape), kwargs.get("output_hidden_states"))),
        with_kwargs=True,
    )
    prompt_mask = (PROMPT_IDS != 0).long()
    try:
        got = policy_embeddings(model, PROMPT_IDS, prompt_mask, COMPLETION_IDS, COMPLETION_MASK, chunk_tokens=12)
    finally:
        hook.remove()
    ref = policy_embeddings(model, PROMPT_IDS, prompt_mask, COMPLETION_IDS, COMPLETION_MASK, batch_size=1)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    assert calls and all(not want_all for _, want_all in calls)
    assert all(rows * width <= 12 for (rows, width), _ in calls)
    assert sum(rows for (rows, _), _ in calls) == 3 and len(calls) == 2  # widths 4, 5, 7: [4, 5] then [7]


def token_chunks_reference(lengths: list[int], budget: int) -> list[list[int]]:
    """Brute force: greedy over rows sorted by length, a pass closes when one more row would exceed the budget."""
    rows = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out: list[list[int]] = [[]]
    for i in rows:
        trial = out[-1] + [i]
        if out[-1] and len(trial) * max(max(lengths[j] for j in trial), 1) > budget:
            out.append([i])
        else:
            out[-1] = trial
    return [c for c in out if c]


def test_token_chunks_match_the_reference():
    from setpo.integrations.trl.embedding import token_chunks

    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        lengths = torch.randint(0, 40, (int(torch.randint(1, 20, (1,), generator=gen)),), generator=gen).tolist()
        budget = int(torch.randint(1, 120, (1,), generator=gen))
        chunks = token_chunks(lengths, budget)
        assert chunks == token_chunks_reference(lengths, budget)
        assert sorted(i for c in chunks for i in c) == list(range(len(lengths)))


def test_policy_embeddings_run_without_dropout_and_restore_the_mode(tmp_path):
    # LoRA dropout 0.5 on a model in train mode: the same batch must embed the same way twice.
    from peft import LoraConfig, get_peft_model

    from setpo.tiny import build_tiny_model, load_tiny

    model, _ = load_tiny(build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1))
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(model, lora)
    model.train()
    prompt_mask = (PROMPT_IDS != 0).long()
    a = policy_embeddings(model, PROMPT_IDS, prompt_mask, COMPLETION_IDS, COMPLETION_MASK, batch_size=8)
    b = policy_embeddings(model, PROMPT_IDS, prompt_mask, COMPLETION_IDS, COMPLETION_MASK, batch_size=8)
    assert model.training and all(m.training for m in model.modules())
    assert float(a.abs().max()) > 0
    torch.testing.assert_close(a, b, rtol=0, atol=0)
