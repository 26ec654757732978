"""Tiny models and the character tokenizer: exact round-trips, save/load, determinism, no silent overwrite."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import transformers  # noqa: F401
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast  # noqa: E402

from setpo.tiny import DEFAULT_ALPHABET, build_char_tokenizer, build_tiny_model, load_tiny  # noqa: E402
from setpo.tiny.__main__ import main as cli_main  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SMALL = dict(hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=128)


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


@pytest.fixture(scope="module")
def saved_tok(tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(path)
    return PreTrainedTokenizerFast.from_pretrained(path)


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", family="qwen2", seed=3, **SMALL)


TRICKY = ["", " ", "  two  spaces  ", "line one\nline two\n\n", "\ttab\tand trailing ", "x=1+2; y = [3, 4]\n"]


@pytest.mark.parametrize("text", TRICKY)
def test_round_trip_keeps_spaces_and_newlines(tok, saved_tok, text):
    for t in (tok, saved_tok):
        ids = t(text)["input_ids"]
        assert len(ids) == len(text)  # one token per character, nothing added
        assert t.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=DEFAULT_ALPHABET, max_size=60))
def test_round_trip_any_text_over_the_alphabet(tok, text):
    assert tok.decode(tok(text)["input_ids"]) == text


def test_special_tokens_and_unknown_characters(tok):
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert len(tok) == 4 + len(DEFAULT_ALPHABET)
    ids = tok("aé")["input_ids"]
    assert ids == [tok.convert_tokens_to_ids("a"), tok.unk_token_id]
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == "a"
    assert tok.padding_side == "left"


def test_extra_tokens_are_single_ids(tmp_path):
    t = build_char_tokenizer(alphabet="abthin <>/\n", extra_tokens=["<think>", "</think>"])
    t.save_pretrained(tmp_path)
    loaded = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    text = " <think> a\n b </think>  ab"
    assert loaded.decode(loaded(text)["input_ids"]) == text
    assert len(loaded(text)["input_ids"]) == len(text) - len("<think></think>") + 2
    ids = t("<think>ab</think>")["input_ids"]
    assert len(ids) == 4
    assert t.decode(ids) == "<think>ab</think>"
    assert t.decode(ids, skip_special_tokens=True) == "<think>ab</think>"  # ordinary tokens, not special ones
    assert t.decode(t("<thin")["input_ids"]) == "<thin"  # a partial match falls back to characters


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(alphabet=""),
        dict(extra_tokens="<x>"),
        dict(extra_tokens=["x"]),
        dict(extra_tokens=["<s>"]),
        dict(extra_tokens=["<a>", "<a>"]),
        dict(padding_side="middle"),
    ],
)
def test_bad_tokenizer_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        build_char_tokenizer(**kwargs)


def test_chat_template(tok):
    text = tok.apply_chat_template([{"role": "user", "content": "2 + 2 ?"}], tokenize=False, add_generation_prompt=True)
    assert text == "user: 2 + 2 ?\nassistant: "


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_save_load_and_generate(family, tmp_path):
    path = build_tiny_model(tmp_path / family, family=family, seed=1, **SMALL)
    model, t = load_tiny(path)
    assert model.config.model_type == family
    assert model.config.vocab_size == len(t) and model.config.hidden_size == 32
    # Plain from_pretrained on the folder loads the same weights and tokenizer.
    model2 = AutoModelForCausalLM.from_pretrained(path)
    t2 = PreTrainedTokenizerFast.from_pretrained(path)
    enc = t2(["1 + 1 = ", "hi"], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(model(**enc).logits, model2(**enc).logits)
    out = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert out.shape == (2, enc["input_ids"].shape[1] + 4)
    assert (out[:, -4:] < len(t)).all()
    assert t.decode(out[0, : enc["input_ids"].shape[1]], skip_special_tokens=True) == "1 + 1 = "


def test_same_seed_same_weights_other_seed_different(qwen_dir, tmp_path):
    rng_before = torch.get_rng_state()
    again = build_tiny_model(tmp_path / "again", family="qwen2", seed=3, **SMALL)
    assert torch.equal(torch.get_rng_state(), rng_before)  # global RNG untouched
    other = build_tiny_model(tmp_path / "other", family="qwen2", seed=4, **SMALL)
    a, b, c = (load_tiny(p)[0].state_dict() for p in (qwen_dir, again, other))
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_refuses_to_overwrite(qwen_dir, tmp_path):
    before = (qwen_dir / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        build_tiny_model(qwen_dir, seed=9, **SMALL)
    assert (qwen_dir / "model.safetensors").read_bytes() == before
    # overwrite=True replaces an earlier build's files and keeps everything else in the folder
    own = build_tiny_model(tmp_path / "own", seed=1, **SMALL)
    first = (own / "model.safetensors").read_bytes()
    (own / "notes.txt").write_text("mine")
    build_tiny_model(own, seed=9, overwrite=True, **SMALL)
    assert (own / "model.safetensors").read_bytes() != first
    assert (own / "notes.txt").read_text() == "mine"
    # a folder no build wrote is never emptied, even with overwrite=True (issue 15, item 16)
    target = tmp_path / "t"
    target.mkdir()
    (target / "stale.txt").write_text("old")
    with pytest.raises(FileExistsError, match="holds no model built by setpo.tiny"):
        build_tiny_model(target, seed=9, overwrite=True, **SMALL)
    assert (target / "stale.txt").read_text() == "old" and sorted(os.listdir(target)) == ["stale.txt"]
    # An existing empty folder is fine without overwrite.
    (tmp_path / "empty").mkdir()
    build_tiny_model(tmp_path / "empty", **SMALL)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(family="gpt2"),
        dict(hidden_size=30, num_heads=4),
        dict(num_layers=0),
        dict(seed=-1),
        dict(num_heads=4, num_kv_heads=3),
    ],
)
def test_bad_model_arguments_raise_before_writing(kwargs, tmp_path):
    args = {**SMALL, **kwargs}
    with pytest.raises(ValueError):
        build_tiny_model(tmp_path / "m", **args)
    assert not (tmp_path / "m").exists()


def test_load_tiny_rejects_a_folder_without_a_model(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        load_tiny(tmp_path)


def test_cli_in_process(tmp_path, capsys):
    out = tmp_path / "cli"
    assert (
        cli_main([str(out), "--family", "llama", "--hidden-size", "32", "--num-heads", "2", "--num-layers", "1"]) == 0
    )
    assert capsys.readouterr().out.strip() == str(out)
    model, _ = load_tiny(out)
    assert model.config.model_type == "llama" and model.config.num_hidden_layers == 1
    with pytest.raises(SystemExit) as exc:
        cli_main([str(out)])
    assert exc.value.code == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.slow  # a fresh interpreter importing transformers: ~5-15 s on a busy 2-core machine
def test_cli_as_module(tmp_path):
    out = tmp_path / "mod"
    res = subprocess.run(
        [sys.executable, "-m", "setpo.tiny", str(out), "--hidden-size", "16", "--num-heads", "2", "--num-layers", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_custom_tokenizer_sets_the_vocabulary(tmp_path):
    digits = build_char_tokenizer(alphabet="0123456789+= ")
    path = build_tiny_model(tmp_path / "digits", tokenizer=digits, **SMALL)
    model, t = load_tiny(path)
    assert model.config.vocab_size == len(t) == 4 + 13
    assert t.decode(t("12 + 3 = 15")["input_ids"]) == "12 + 3 = 15"
    with pytest.raises(ValueError, match="PreTrainedTokenizerFast"):
        build_tiny_model(tmp_path / "bad", tokenizer="not a tokenizer", **SMALL)


def test_cli_refuses_an_empty_out_dir_and_foreign_folders(tmp_path, monkeypatch, capsys):
    """`python -m setpo.tiny '' --overwrite` once emptied the current folder (issue 15, item 16)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    for argv in ([""], ["", "--overwrite"], [".", "--overwrite"], [str(tmp_path), "--overwrite"]):
        with pytest.raises(SystemExit) as exc:
            cli_main([*argv, "--hidden-size", "16", "--num-heads", "2", "--num-layers", "1"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "error:" in err
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
    assert (tmp_path / "model.safetensors").read_bytes() == b"weights"


def test_interrupted_build_is_replaced_with_overwrite(tmp_path):
    """A build interrupted after its marker counts as the build's: --overwrite replaces it, other files stay."""
    from setpo.tiny.model import FILES_MARKER

    out = tmp_path / "m"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    (out / FILES_MARKER).write_text('{"builder": "setpo.tiny", "before": ["keep.txt"]}')
    (out / "config.json").write_text('{"trunc')  # the half-written file of the interrupted build
    with pytest.raises(FileExistsError, match="overwrite"):
        build_tiny_model(out, **SMALL)
    build_tiny_model(out, overwrite=True, **SMALL)
    assert load_tiny(out)[0].config.hidden_size == SMALL["hidden_size"]
    assert (out / "keep.txt").read_text() == "x"
