"""SetPO's credits on a GroupBatch with a row mask (the rows the engines keep out of the kernel), checked against a
brute-force reference; plus the text and policy-hidden-state embedding helpers the trainer uses."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from references import masked_credits_reference  # noqa: E402

from setpo.core import cosine_kernel, loo_credits, set_diversity  # noqa: E402
from setpo.embedders import HashedNgramEmbedder, embed_texts  # noqa: E402
from setpo.integrations.trl import completion_text  # noqa: E402
from setpo.integrations.trl.embedding import policy_embeddings, texts_for_embedding  # noqa: E402
from setpo.methods import GroupBatch, get_method  # noqa: E402
from setpo.methods.advantage import setpo_credits  # noqa: E402


def single_group_credits(emb: torch.Tensor, G: int, clamp: bool = True, g: str = "neglog1p") -> torch.Tensor:
    K = cosine_kernel(emb.double().reshape(-1, G, emb.shape[-1]), clamp=clamp)
    return loo_credits(K, g).reshape(-1)


def batch_of(emb: torch.Tensor, G: int, mask: torch.Tensor | None = None) -> GroupBatch:
    return GroupBatch.from_rows(torch.zeros(emb.shape[0]), G, embeddings=emb, mask=mask)


@pytest.mark.parametrize(("N", "G"), [(12, 4), (12, 6), (10, 5), (12, 3), (24, 6)])
@pytest.mark.parametrize("clamp", [True, False])
@pytest.mark.parametrize("g", ["neglog1p", "linear", "inverse"])
def test_unmasked_credits_match_the_brute_force_reference(N, G, clamp, g):
    gen = torch.Generator().manual_seed(N * 10 + G)
    emb = torch.randn(N, 7, generator=gen)
    emb[-1] = 0.0  # an empty completion (zero vector) is isolated by the kernel in both paths
    emb[0] = emb[1]  # an exact duplicate pair
    s, D = setpo_credits(batch_of(emb, G), clamp=clamp, shaping=g)
    ref = masked_credits_reference(emb, G, clamp=clamp, shaping=g)
    torch.testing.assert_close(s.reshape(-1), ref, rtol=0, atol=1e-10)
    assert s.dtype == torch.float64 and D.shape == (N // G,)


@pytest.mark.parametrize(("N", "G"), [(12, 4), (12, 6), (10, 5), (12, 3), (24, 6)])
def test_rows_outside_the_mask_match_the_brute_force_reference(N, G):
    # Unscorable / masked-truncated rows: no credit, and the group's credits are those of its remaining rows.
    gen = torch.Generator().manual_seed(7 * N + G)
    emb = torch.randn(N, 6, generator=gen) + 0.3
    mask = torch.rand(N, generator=gen) > 0.3
    mask[:G] = True
    mask[0] = False  # group 0 keeps G - 1 rows
    s, D = setpo_credits(batch_of(emb, G, mask))
    s = s.reshape(-1)
    torch.testing.assert_close(s, masked_credits_reference(emb, G, mask), rtol=0, atol=1e-10)
    assert bool((s[~mask] == 0).all())
    counts = mask.reshape(-1, G).sum(1)
    assert torch.equal(batch_of(emb, G, mask).acting_rows(3).reshape(-1), mask & (counts >= 3).repeat_interleave(G))
    if G - 1 >= 3:  # group 0 by hand: the kernel of its G - 1 remaining rows
        torch.testing.assert_close(s[1:G], single_group_credits(emb[1:G], G - 1), rtol=0, atol=1e-12)
    assert torch.isnan(D[counts < 3]).all() and not torch.isnan(D[counts >= 3]).any()
    K = cosine_kernel(emb[1:G].double().unsqueeze(0))
    if G - 1 >= 3:
        torch.testing.assert_close(D[0], set_diversity(K)[0], rtol=0, atol=1e-12)


def test_the_registered_setpo_method_reads_the_mask():
    gen = torch.Generator().manual_seed(5)
    emb = torch.randn(8, 5, generator=gen)
    mask = torch.ones(8, dtype=torch.bool)
    mask[2] = False
    A = torch.randn(2, 4, generator=gen)
    out = get_method("setpo")(batch_of(emb, 4, mask), A, lam=0.5)
    want = A.reshape(-1) + 0.5 * masked_credits_reference(emb, 4, mask).float()
    torch.testing.assert_close(out.reshape(-1), want, rtol=0, atol=1e-6)


def test_mask_must_be_one_bool_per_row():
    with pytest.raises(ValueError, match=r"mask must be a bool tensor of shape \(B, G\) = \(1, 4\)"):
        GroupBatch(rewards=torch.zeros(1, 4), mask=torch.ones(1, 4))


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
    with pytest.raises(ValueError, match="lengths differ: 2 prompts, 1 completions"):
        texts_for_embedding(prompts, completions[:1], "completion")


def test_embed_texts_chunks_and_checks_shape():
    texts = [f"text number {i}" for i in range(7)]
    hashed = HashedNgramEmbedder(dim=64)
    torch.testing.assert_close(embed_texts(hashed, texts, batch_size=3), hashed(texts).float())
    with pytest.raises(ValueError, match=r"returned shape \(3,\) for 3 texts"):
        embed_texts(lambda t: torch.zeros(len(t)), texts[:3], batch_size=8)
    with pytest.raises(ValueError, match="floating"):
        embed_texts(lambda t: torch.zeros(len(t), 2, dtype=torch.long), texts[:3], batch_size=8)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
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
