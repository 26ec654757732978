"""Embedders: hashed n-grams, sentence-transformers (offline MiniLM), policy hidden states, cache, registry."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from references import mean_pool_hidden_states_reference

from setpo import cosine_kernel
from setpo.embedders import (
    POLICY_EMBEDDER,
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    HashedNgramEmbedder,
    PolicyHiddenStateEmbedder,
    SentenceTransformerEmbedder,
    available_embedders,
    build_embedder,
    check_embedder_spec,
    default_offline_model_path,
    embedder_accepts,
    is_policy_embedder,
    mean_pool_hidden_states,
    register_embedder,
)
from setpo.embedders.hashed import text_features

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "The answer is 42 because six times seven is 42.",
    "The answer is 42, because 6 times 7 is 42.",
    "Photosynthesis converts light into chemical energy in plants.",
    "",
]


# ---------------------------------------------------------------- hashed n-grams


def hashed_reference(text: str, dim: int, char_ngrams, word_ngrams, seed: int) -> np.ndarray:
    """Independent restatement of the documented scheme: keyed blake2b, bucket = h % dim, sign = top bit."""
    vec = [0.0] * dim
    feats = []
    for n in sorted(set(char_ngrams)):
        feats += ["c" + str(n) + ":" + text[i : i + n] for i in range(len(text) - n + 1)]
    words = text.split()
    for n in sorted(set(word_ngrams)):
        feats += ["w" + str(n) + ":" + " ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    for f in feats:
        digest = hashlib.blake2b(f.encode(), digest_size=8, key=seed.to_bytes(8, "little")).digest()
        h = int.from_bytes(digest, "little")
        vec[h % dim] += 1.0 if h >> 63 else -1.0
    norm = sum(v * v for v in vec) ** 0.5
    return np.array([v / norm for v in vec] if norm else vec)


def test_hashed_matches_reference_and_is_unit_norm():
    emb = HashedNgramEmbedder(dim=64, char_ngrams=(2, 3), word_ngrams=(1,), seed=7)
    out = emb(TEXTS)
    assert out.shape == (4, 64) and out.dtype == torch.float32 and out.device.type == "cpu"
    for row, text in zip(out, TEXTS):
        ref = hashed_reference(text, 64, (2, 3), (1,), 7)
        np.testing.assert_allclose(row.numpy(), ref, atol=1e-7)
    norms = torch.linalg.vector_norm(out, dim=-1)
    torch.testing.assert_close(norms[:3], torch.ones(3))
    assert torch.equal(out[3], torch.zeros(64))  # empty text -> zero vector


def test_text_features():
    assert text_features("ab c", (2,), (1, 2), lowercase=False) == [
        "c2:ab",
        "c2:b ",
        "c2: c",
        "w1:ab",
        "w1:c",
        "w2:ab c",
    ]
    assert text_features("AB", (2,), (), lowercase=True) == ["c2:ab"]
    assert text_features("", (2, 3), (1,), lowercase=False) == []


def test_hashed_is_deterministic_across_processes_and_seeds():
    emb = HashedNgramEmbedder()
    here = emb(TEXTS)
    assert torch.equal(here, HashedNgramEmbedder()(TEXTS))
    assert not torch.equal(here[:3], HashedNgramEmbedder(seed=1)(TEXTS)[:3])
    code = (
        "import json, sys; from setpo.embedders import HashedNgramEmbedder; "
        "print(json.dumps([hash('probe'), HashedNgramEmbedder()(json.loads(sys.argv[1])).tolist()]))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    child_hash, child_vectors = json.loads(res.stdout)
    assert child_hash != hash("probe")  # the child really salts str hashes differently
    assert torch.equal(torch.tensor(child_vectors), here)


def test_hashed_near_duplicates_closer_than_unrelated():
    K = cosine_kernel(HashedNgramEmbedder()(TEXTS[:3]).double())
    assert K[0, 1] > 0.5
    assert K[0, 1] > 3 * max(K[0, 2], K[1, 2])


def test_hashed_lowercase_and_empty_batch():
    emb = HashedNgramEmbedder(lowercase=True)
    assert torch.equal(emb(["Hello World"]), emb(["hello world"]))
    assert not torch.equal(HashedNgramEmbedder()(["Hello World"]), HashedNgramEmbedder()(["hello world"]))
    assert emb([]).shape == (0, 512)


@pytest.mark.parametrize(
    "kwargs",
    [dict(dim=0), dict(dim=2.5), dict(char_ngrams=(0,)), dict(char_ngrams=(), word_ngrams=()), dict(seed=-1)],
)
def test_hashed_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        HashedNgramEmbedder(**kwargs)


@pytest.mark.parametrize(
    "texts, match", [("one string", "bare string"), (["ok", 3], r"texts\[1\]"), (None, "sequence")]
)
def test_bad_texts_raise(texts, match):
    with pytest.raises(ValueError, match=match):
        HashedNgramEmbedder()(texts)


# ---------------------------------------------------------------- cache


def test_embedding_cache_is_bounded_lru():
    cache = EmbeddingCache(max_size=2)
    cache.put("a", torch.tensor([1.0]))
    cache.put("b", torch.tensor([2.0]))
    assert cache.get("a") is not None  # "a" is now most recent
    cache.put("c", torch.tensor([3.0]))
    assert "b" not in cache and "a" in cache and "c" in cache and len(cache) == 2
    assert (cache.hits, cache.misses) == (1, 0)
    assert cache.get("b") is None and cache.misses == 1
    off = EmbeddingCache(max_size=0)
    off.put("a", torch.tensor([1.0]))
    assert len(off) == 0
    with pytest.raises(ValueError):
        EmbeddingCache(max_size=-1)


class CountingEmbedder:
    def __init__(self):
        self.inner = HashedNgramEmbedder(dim=16)
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return self.inner(texts)


def test_cached_embedder_encodes_each_distinct_text_once():
    counting = CountingEmbedder()
    cached = CachedEmbedder(counting, max_size=10)
    first = cached(["x y", "z", "x y"])
    assert counting.calls == [["x y", "z"]]
    assert torch.equal(first, counting.inner(["x y", "z", "x y"]))
    again = cached(["z", "new", "x y"])
    assert counting.calls[-1] == ["new"]
    assert torch.equal(again, counting.inner(["z", "new", "x y"]))


def test_nan_output_raises():
    cached = CachedEmbedder(lambda texts: torch.full((len(texts), 3), float("nan")))
    with pytest.raises(ValueError, match="NaN"):
        cached(["a"])
    wrong_shape = CachedEmbedder(lambda texts: torch.zeros(len(texts) + 1, 3))
    with pytest.raises(ValueError, match="shape"):
        wrong_shape(["a"])


# ---------------------------------------------------------------- sentence-transformers (offline MiniLM)

PARAPHRASES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The central bank raised interest rates by half a percent.",
    "Interest rates were increased by the central bank by 0.5%.",
]


@pytest.fixture(scope="module")
def minilm():
    import sentence_transformers  # noqa: F401

    return build_embedder("minilm")


def test_offline_model_path():
    path = default_offline_model_path()
    assert (path / "modules.json").is_file() and (path / "model.safetensors").is_file()


def test_minilm_shape_and_paraphrases(minilm):
    out = minilm(PARAPHRASES)
    assert out.shape == (4, 384) and out.dtype == torch.float32 and out.device.type == "cpu"
    torch.testing.assert_close(torch.linalg.vector_norm(out, dim=-1), torch.ones(4))
    K = cosine_kernel(out.double())
    assert min(K[0, 1], K[2, 3]) > 0.5
    assert min(K[0, 1], K[2, 3]) > 2 * max(K[0, 2], K[0, 3], K[1, 2], K[1, 3])
    assert minilm([]).shape == (0, 384)


def test_minilm_cache_hit_skips_the_model(minilm, monkeypatch):
    calls: list[list[str]] = []
    real_encode = minilm.model.encode

    def counting_encode(texts, **kwargs):
        calls.append(list(texts))
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(minilm.model, "encode", counting_encode)
    minilm.cache.clear()
    first = minilm(["cache me", "and me", "cache me"])
    assert calls == [["cache me", "and me"]]
    second = minilm(["and me", "cache me"])
    assert len(calls) == 1  # served from the cache
    assert torch.equal(second, first[[1, 0]])
    third = minilm(["cache me", "something new"])
    assert calls[-1] == ["something new"]
    assert torch.equal(third[0], first[0])
    assert minilm.cache.hits == 3 and minilm.cache.misses == 3  # repeats within a call are merged first


def test_minilm_by_local_path_with_truncation(minilm, tmp_path):
    minilm.model.save(str(tmp_path / "minilm"))
    short = SentenceTransformerEmbedder(str(tmp_path / "minilm"), max_length=8, cache_size=0, device="cpu")
    assert short.model.max_seq_length == 8
    brief = ["two words"]  # fewer than 8 tokens: truncation changes nothing, same weights as the packaged copy
    torch.testing.assert_close(short(brief), minilm(brief), atol=1e-5, rtol=0)
    head = "one two three four five six seven eight nine ten"
    a, b = head + " and the rest is about cooking", head + " but the ending is about astronomy"
    assert torch.equal(short([a]), short([b]))  # only the first 8 tokens are seen
    assert not torch.allclose(minilm([a]), minilm([b]), atol=1e-3)


class FakeSentenceTransformer:
    """Records how it was built; encodes to a fixed vector per text length (no download, no model)."""

    built: list[tuple[str, dict]] = []
    output = None

    def __init__(self, name, **kwargs):
        FakeSentenceTransformer.built.append((name, kwargs))
        self.max_seq_length = 512
        self.device = torch.device("cpu")
        self.encode_kwargs: dict = {}

    def get_embedding_dimension(self):
        return 3

    def encode(self, texts, **kwargs):
        self.encode_kwargs = kwargs
        if FakeSentenceTransformer.output is not None:
            return FakeSentenceTransformer.output(texts)
        return torch.tensor([[len(t), 1.0, 0.0] for t in texts], dtype=torch.float64)


@pytest.fixture
def fake_st(monkeypatch):
    import sentence_transformers as st

    FakeSentenceTransformer.built = []
    FakeSentenceTransformer.output = None
    monkeypatch.setattr(st, "SentenceTransformer", FakeSentenceTransformer)
    return FakeSentenceTransformer


def test_hub_name_goes_through_the_same_constructor(fake_st):
    emb = build_embedder("Qwen/Qwen3-Embedding-0.6B", batch_size=4, max_length=256, normalize=False)
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert fake_st.built == [
        ("Qwen/Qwen3-Embedding-0.6B", dict(device=None, model_kwargs=None, trust_remote_code=False))
    ]
    assert emb.model.max_seq_length == 256
    out = emb(["ab", "abcd"])
    assert out.dtype == torch.float32 and out.tolist() == [[2.0, 1.0, 0.0], [4.0, 1.0, 0.0]]
    assert emb.model.encode_kwargs["batch_size"] == 4 and emb.model.encode_kwargs["normalize_embeddings"] is False
    # The offline names resolve to the shipped folder through the same class.
    build_embedder("offline", device="cpu")
    assert fake_st.built[-1][0] == str(default_offline_model_path())
    assert fake_st.built[-1][1]["device"] == "cpu"


def test_sentence_transformer_errors(fake_st, monkeypatch):
    fake_st.output = lambda texts: torch.full((len(texts), 3), float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        SentenceTransformerEmbedder("org/model")(["x"])
    for bad in ("", "not a model name!", "/no/such/folder", "./missing"):
        with pytest.raises(ValueError):
            SentenceTransformerEmbedder(bad)
    for kwargs in (dict(batch_size=0), dict(max_length=0), dict(cache_size=-1)):
        with pytest.raises(ValueError):
            SentenceTransformerEmbedder("org/model", **kwargs)

    def unreachable(name, **kwargs):
        raise OSError("We couldn't connect to the Hub")

    monkeypatch.setattr(sys.modules["sentence_transformers"], "SentenceTransformer", unreachable)
    with pytest.raises(ValueError, match="could not load"):
        SentenceTransformerEmbedder("org/model")


# ---------------------------------------------------------------- policy hidden states


def test_mean_pool_hand_computed():
    hidden = torch.tensor(
        [[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]], [[5.0, 6.0], [float("nan"), 0.0], [7.0, 10.0]], [[9.0] * 2] * 3]
    )
    mask = torch.tensor([[1, 1, 0], [1, 0, 1], [0, 0, 0]])
    expected = torch.tensor([[2.0, 3.0], [6.0, 8.0], [0.0, 0.0]])
    assert torch.equal(mean_pool_hidden_states(hidden, mask), expected)
    assert torch.equal(mean_pool_hidden_states(hidden, mask.bool()), expected)
    assert torch.equal(mean_pool_hidden_states_reference(hidden, mask), expected)


def test_mean_pool_matches_reference():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(6, 9, 5, generator=gen, dtype=torch.float64)
    mask = torch.rand(6, 9, generator=gen) > 0.4
    mask[2] = False
    fast = mean_pool_hidden_states(hidden, mask)
    assert fast.dtype == torch.float64
    torch.testing.assert_close(fast, mean_pool_hidden_states_reference(hidden, mask), rtol=0, atol=1e-12)
    assert mean_pool_hidden_states(hidden.to(torch.bfloat16), mask).dtype == torch.float32


@pytest.mark.parametrize(
    "hidden, mask, match",
    [
        (torch.zeros(2, 3), torch.ones(2, 3), "hidden"),
        (torch.zeros(2, 3, 4), torch.ones(2, 4), r"mask must have shape \(B, T\) of hidden = \(2, 3\), got \(2, 4\)"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 2), "0/1"),
        (torch.zeros(2, 3, 4, dtype=torch.long), torch.ones(2, 3), "floating"),
        (torch.full((1, 2, 4), float("inf")), torch.ones(1, 2), "NaN/inf"),
    ],
)
def test_mean_pool_bad_input(hidden, mask, match):
    with pytest.raises(ValueError, match=match):
        mean_pool_hidden_states(hidden, mask)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import transformers  # noqa: F401

    from setpo.tiny import build_tiny_model, load_tiny

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", hidden_size=32, num_layers=2, num_heads=2)
    return load_tiny(path)


def test_policy_embedder_pools_each_text_alone(tiny):
    model, tok = tiny
    texts = ["2 + 2 = 4", "a much longer completion with several words", "", "x"]
    model.train()
    out = PolicyHiddenStateEmbedder(model, tok, batch_size=3)(texts)
    assert model.training  # mode restored
    assert out.shape == (4, 32) and out.dtype == torch.float32
    assert torch.equal(out[2], torch.zeros(32))
    model.eval()
    for i in (0, 1, 3):
        ids = torch.tensor([tok(texts[i], add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
        torch.testing.assert_close(out[i], h.mean(0), atol=1e-5, rtol=1e-5)
    one_by_one = PolicyHiddenStateEmbedder(model, tok, batch_size=1)(texts)
    torch.testing.assert_close(out, one_by_one, atol=1e-5, rtol=1e-5)


def test_policy_embedder_layer_and_truncation(tiny):
    model, tok = tiny
    emb0 = PolicyHiddenStateEmbedder(model, tok, layer=0)(["abc"])
    table = model.get_input_embeddings().weight.detach()
    ids = tok("abc", add_special_tokens=False)["input_ids"]
    torch.testing.assert_close(emb0[0], table[ids].mean(0))  # layer 0 = the token embeddings
    trunc = PolicyHiddenStateEmbedder(model, tok, max_length=3)
    assert torch.equal(trunc(["abcdef"]), trunc(["abc"]))
    for kwargs in (dict(layer=3), dict(layer=-4), dict(batch_size=0), dict(max_length=0)):
        with pytest.raises(ValueError):
            PolicyHiddenStateEmbedder(model, tok, **kwargs)


# ---------------------------------------------------------------- registry


def test_build_embedder_dispatch():
    emb = build_embedder("hashed", dim=32)
    assert isinstance(emb, HashedNgramEmbedder) and emb.dim == 32
    assert isinstance(build_embedder(" Hashed "), HashedNgramEmbedder)
    assert build_embedder(emb) is emb
    fn = lambda texts: torch.zeros(len(texts), 2)  # noqa: E731
    assert isinstance(fn, Embedder) and build_embedder(fn) is fn
    assert {"hashed", "minilm", "offline"} <= set(available_embedders())


@pytest.mark.parametrize("spec", [None, 3, "", "   ", "no such model!", "/no/such/folder", HashedNgramEmbedder])
def test_build_embedder_bad_spec(spec):
    with pytest.raises(ValueError):
        build_embedder(spec)


def test_build_embedder_typo_lists_the_registered_names(tmp_path):
    # "hashd" is neither registered, nor a folder, nor an "org/name" Hub id: refused before any model load.
    with pytest.raises(ValueError, match=r"unknown embedder 'hashd'.*\['hashed', 'minilm', 'offline'"):
        build_embedder("hashd")
    assert check_embedder_spec("org/model") == "org/model"
    assert check_embedder_spec(f" {tmp_path} ") == str(tmp_path)
    assert check_embedder_spec("policy", extra_names=("policy",)) == "policy"
    with pytest.raises(ValueError, match="unknown embedder 'policy'"):
        check_embedder_spec("policy")


def test_policy_spec_and_which_embedders_take_model_arguments():
    assert is_policy_embedder(" Policy ") and is_policy_embedder(POLICY_EMBEDDER) and not is_policy_embedder("hashed")
    model_args = ("device", "batch_size", "max_length")
    assert embedder_accepts("minilm", model_args) and embedder_accepts("org/model", model_args)
    assert not embedder_accepts("hashed", model_args) and embedder_accepts("hashed", ("device", "dim"))


def test_build_embedder_kwargs_on_an_object_raise():
    with pytest.raises(ValueError, match="keyword"):
        build_embedder(HashedNgramEmbedder(), dim=3)


def test_register_embedder():
    try:

        @register_embedder("tiny-hash")
        def tiny_hash(**kwargs):
            return HashedNgramEmbedder(dim=8, **kwargs)

        assert build_embedder("tiny-hash", seed=2)(["a b"]).shape == (1, 8)
        with pytest.raises(ValueError, match="already registered"):
            register_embedder("tiny-hash", lambda: None)
        register_embedder("tiny-hash", lambda: HashedNgramEmbedder(dim=4), overwrite=True)
        assert build_embedder("tiny-hash")(["a"]).shape == (1, 4)
        for bad in ("", 5):
            with pytest.raises(ValueError):
                register_embedder(bad, tiny_hash)
        with pytest.raises(ValueError, match="callable"):
            register_embedder("x-not-callable", 3)
    finally:
        from setpo.embedders import registry

        registry._EMBEDDERS.pop("tiny-hash", None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_models_on_cuda_return_cpu_float32(tiny):
    model, tok = tiny
    texts = ["2 + 2 = 4", "", "x"]
    cpu = PolicyHiddenStateEmbedder(model, tok)(texts)
    gpu = PolicyHiddenStateEmbedder(model.to("cuda"), tok)(texts)
    model.to("cpu")
    assert gpu.device.type == "cpu" and gpu.dtype == torch.float32
    torch.testing.assert_close(gpu, cpu, atol=1e-4, rtol=1e-4)
    st_gpu = build_embedder("minilm", device="cuda", cache_size=0)
    assert st_gpu.model.device.type == "cuda"
    st_cpu = build_embedder("minilm", device="cpu", cache_size=0)
    torch.testing.assert_close(st_gpu(PARAPHRASES), st_cpu(PARAPHRASES), atol=1e-4, rtol=1e-4)
    mask = torch.tensor([[1, 0], [1, 1]], device="cuda")
    pooled = mean_pool_hidden_states(torch.ones(2, 2, 3, device="cuda"), mask)
    assert pooled.device.type == "cuda" and torch.equal(pooled.cpu(), torch.ones(2, 3))


def test_embed_texts_embeds_each_distinct_text_once():
    from setpo.embedders import HashedNgramEmbedder, embed_texts

    hashed = HashedNgramEmbedder()
    seen: list[str] = []

    def counting(texts):
        seen.extend(texts)
        return hashed(texts)

    texts = ["a+b", "b+a", "a+b", "a+b", "c", "b+a", "c"]
    out = embed_texts(counting, texts, batch_size=2)
    assert sorted(seen) == ["a+b", "b+a", "c"]  # a collapsed group costs one call per distinct text
    torch.testing.assert_close(out, torch.stack([hashed([t])[0] for t in texts]).float(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="bare string"):
        embed_texts(counting, "abc")
    with pytest.raises(ValueError, match="NaN"):
        embed_texts(lambda t: torch.full((len(t), 2), float("nan")), ["x"])
