"""The shared-prefix path (`setpo.integrations.trl.fast_generation`, `fast_path`) against brute-force references:
transformers `generate`, a full forward per row, transformers' warpers; the published path left as it was."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from setpo.eval.generate import HFGenerator, SamplingConfig, stop_token_ids
from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.integrations.trl.fast_generation import (
    distinct_rows,
    left_pad,
    shared_prefix_generate,
    shared_prefix_logps,
    warp,
)
from setpo.integrations.trl.fast_path import SharedPrefixSetPOTrainer
from setpo.tiny import load_tiny
from tests.trl_tiny import RUN, dataset, distinct_chars, tiny_model

PROMPTS = ["ab", "hello there", "xyz q", "ab"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model, tok = load_tiny(tiny_model(tmp_path_factory, num_layers=2))
    return model.eval(), tok


def ids_of(tok, texts):
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_greedy_generation_equals_transformers_generate(tiny):
    model, tok = tiny
    rows = ids_of(tok, PROMPTS)
    distinct, index = distinct_rows(rows)
    assert len(distinct) == 3 and index.tolist() == [0, 1, 2, 0]
    stops = stop_token_ids(tok)
    fast = shared_prefix_generate(model, distinct, index, max_new_tokens=7, stop_ids=stops, pad_id=tok.pad_token_id,
                                  temperature=0)  # fmt: skip
    for row, got in zip(rows, fast):
        out = model.generate(
            torch.tensor([row]),
            attention_mask=torch.ones(1, len(row), dtype=torch.long),
            do_sample=False,
            max_new_tokens=7,
            eos_token_id=stops,
            pad_token_id=tok.pad_token_id,
        )
        want = out[0, len(row) :].tolist()  # fmt: skip
        cut = next((j + 1 for j, t in enumerate(want) if t in stops), len(want))
        assert got == want[:cut]


def brute_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask, temperature=1.0):
    """One full forward per row over prompt + completion (TRL's reference computation)."""
    ids = torch.cat([prompt_ids, completion_ids], 1)
    mask = torch.cat([prompt_mask, completion_mask], 1)
    P = prompt_ids.shape[1]
    logits = model(input_ids=ids, attention_mask=mask).logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return logp.gather(-1, completion_ids[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)


def test_logps_entropies_and_gradients_equal_a_full_forward(tiny):
    model, tok = tiny
    prompt_ids, prompt_mask = left_pad(ids_of(tok, PROMPTS + ["hello there"]), tok.pad_token_id)
    g = torch.Generator().manual_seed(0)
    completion_ids = torch.randint(3, len(tok) - 1, (len(PROMPTS) + 1, 5), generator=g)
    completion_mask = torch.tensor([[1] * 5, [1, 1, 1, 0, 0], [1] * 5, [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    weight = model.get_input_embeddings().weight
    grads = []
    for fn in (shared_prefix_logps, brute_logps):
        model.zero_grad()
        kw = {"entropy": True} if fn is shared_prefix_logps else {}
        logps, ent = fn(model, prompt_ids, prompt_mask, completion_ids, completion_mask, temperature=0.7, **kw)
        (logps * completion_mask).sum().backward()
        grads.append((logps.detach() * completion_mask, ent.detach() * completion_mask, weight.grad.clone()))
    (fast_lp, fast_ent, fast_g), (ref_lp, ref_ent, ref_g) = grads
    torch.testing.assert_close(fast_lp, ref_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast_ent, ref_ent, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast_g, ref_g, atol=1e-5, rtol=1e-4)
    assert fast_g.abs().sum() > 0


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.5, 0, 0.9), (1.3, 5, 0.7), (0.8, 3, 1.0)])
def test_warp_equals_transformers_warpers(temperature, top_k, top_p):
    logits = torch.randn(6, 40, generator=torch.Generator().manual_seed(1))
    want = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k:
        want = TopKLogitsWarper(top_k)(None, want)
    if top_p < 1:
        want = TopPLogitsWarper(top_p)(None, want)
    got = warp(logits, temperature, top_k, top_p)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[~torch.isinf(got)], want[~torch.isinf(want)])


def test_sampled_first_tokens_follow_the_model_distribution(tiny):
    model, tok = tiny
    row = ids_of(tok, ["hello"])[0]
    probs = torch.softmax(model(torch.tensor([row])).logits[0, -1].float() / 1.0, -1)
    torch.manual_seed(0)
    n = 4000
    out = shared_prefix_generate(model, [row], torch.zeros(n, dtype=torch.long), max_new_tokens=1,
                                 stop_ids=stop_token_ids(tok), pad_id=tok.pad_token_id)  # fmt: skip
    freq = torch.bincount(torch.tensor([c[0] for c in out]), minlength=probs.numel()).double() / n
    # every token's frequency within 5 binomial standard deviations of its probability
    sd = (probs.double() * (1 - probs.double()) / n).sqrt()
    assert bool(((freq - probs.double()).abs() <= 5 * sd + 1e-3).all())


def test_legacy_generator_is_transformers_generate_as_before(tiny):
    """shared_prefix=False keeps the published sampling: per chunk, seed * 1_000_003 + c, then one `generate`."""
    model, tok = tiny
    cfg = SamplingConfig(n=3, temperature=0.9, top_p=0.95, max_new_tokens=5, batch_size=4, seed=2,
                         use_chat_template=False)  # fmt: skip
    got = HFGenerator(model, tok, cfg, progress=False)(PROMPTS[:2])
    flat = [p for p in PROMPTS[:2] for _ in range(3)]
    stops, want = stop_token_ids(tok), [[], []]
    tok.padding_side = "left"
    for c, start in enumerate(range(0, len(flat), 4)):
        enc = tok(flat[start : start + 4], return_tensors="pt", padding=True, add_special_tokens=False)
        torch.manual_seed(2 * 1_000_003 + c)
        gen = model.generate(**enc, do_sample=True, temperature=0.9, top_p=0.95, top_k=0, max_new_tokens=5,
                             pad_token_id=tok.pad_token_id, eos_token_id=stops)  # fmt: skip
        for j, row in enumerate(gen[:, enc["input_ids"].shape[1] :].tolist()):
            cut = next((k for k, t in enumerate(row) if t in stops), len(row))
            want[(start + j) // 3].append(tok.decode(row[:cut], skip_special_tokens=True))
    assert got == want


def test_shared_prefix_generator_greedy_equals_legacy(tiny):
    model, tok = tiny
    cfg = SamplingConfig(n=2, temperature=0, max_new_tokens=6, batch_size=4, use_chat_template=False)
    legacy = HFGenerator(model, tok, cfg, progress=False)(PROMPTS)
    assert HFGenerator(model, tok, cfg, progress=False, shared_prefix=True)(PROMPTS) == legacy


def trainer(cls, model_dir, tmp_path, **fields):
    model, tok = load_tiny(model_dir)
    args = SetPOConfig(output_dir=str(tmp_path / cls.__name__), **{**RUN, **fields}, setpo_lambda=0.0)
    return cls(model=model, reward_funcs=[distinct_chars], args=args, train_dataset=dataset(), processing_class=tok)


def test_fast_trainer_scores_the_loss_log_probs_of_trl(tmp_path_factory, tmp_path):
    model_dir = tiny_model(tmp_path_factory, num_layers=2)
    legacy, fast = (trainer(c, model_dir, tmp_path) for c in (SetPOTrainer, SharedPrefixSetPOTrainer))
    tok = legacy.processing_class
    prompt_ids, prompt_mask = left_pad(ids_of(tok, ["ab", "ab", "cd", "cd"]), tok.pad_token_id)
    completion_ids = torch.randint(3, 30, (4, 6), generator=torch.Generator().manual_seed(3))
    completion_mask = torch.tensor([[1] * 6, [1, 1, 0, 0, 0, 0], [1] * 6, [1, 1, 1, 1, 0, 0]])
    ids, mask = torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1)
    want, want_ent, _ = legacy._get_per_token_logps_and_entropies(legacy.model, ids, mask, 6, compute_entropy=True)
    got, got_ent, _ = fast._get_per_token_logps_and_entropies(fast.model, ids, mask, 6, compute_entropy=True)
    torch.testing.assert_close(got * completion_mask, want * completion_mask, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_ent * completion_mask, want_ent * completion_mask, atol=1e-5, rtol=1e-5)
    fast.train()
    logs = [h for h in fast.state.log_history if "reward" in h]
    assert len(logs) == RUN["max_steps"] and all(h["completions/mean_length"] > 0 for h in logs)


def test_fast_trainer_refuses_settings_it_does_not_reproduce(tmp_path_factory, tmp_path):
    model_dir = tiny_model(tmp_path_factory)
    with pytest.raises(ValueError, match="repetition_penalty"):
        trainer(SharedPrefixSetPOTrainer, model_dir, tmp_path, repetition_penalty=1.2)
