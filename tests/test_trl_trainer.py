"""SetPOTrainer on a tiny CPU model: short runs for GRPO / GSPO / DAPO / Dr.GRPO / KL / LoRA, and the advantages the
trainer uses recomputed independently (A_bar from the rewards, credits from the logged completions with the core)."""

from __future__ import annotations

import math
import string

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_tiny import ROWS, RUN, CharHistogram, G, dataset, distinct_chars, first_char, gapo_group_reward, tiny_model  # noqa: E402

from setpo.core import cosine_kernel, group_advantages, loo_credits, set_diversity  # noqa: E402
from setpo.embedders import build_embedder  # noqa: E402
from setpo.integrations.trl import SetPOConfig, SetPOTrainer  # noqa: E402
from setpo.rewards import gapo_rewards  # noqa: E402
from setpo.tiny import load_tiny  # noqa: E402

LAM = 0.5
SETPO_METRICS = ("credit_mean", "credit_std", "shaping_ratio", "diversity", "embed_time_s", "credit_time_s")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory)


def capturing(cls):
    """A trainer class that records, per generation, the advantages it returns and the logged batch."""

    class Capturing(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.captured: list[dict] = []

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            n = out["advantages"].shape[0]
            self.captured.append(
                {
                    "advantages": out["advantages"].clone(),
                    "prompts": list(self._logs["prompt"])[-n:],
                    "completions": list(self._logs["completion"])[-n:],
                    "rewards": {k: list(v)[-n:] for k, v in self._logs["rewards"].items()},
                    "out": out,
                }
            )
            return out

    return Capturing


def expected_advantages(rewards, texts, embedder, lam, clamp=True, shaping="neglog1p", scale="group"):
    """A_bar (TRL's group z-score, eps 1e-4) + lambda * s, s from the core on the embedded texts (float64)."""
    A = group_advantages(torch.tensor(rewards, dtype=torch.float64), G, scale=scale, eps=1e-4)
    emb = torch.as_tensor(embedder(list(texts))).double()
    s = loo_credits(cosine_kernel(emb.reshape(-1, G, emb.shape[-1]), clamp=clamp), shaping).reshape(-1)
    return A + lam * s, A, s


def run(trainer_cls, model_dir, args, reward_funcs=(distinct_chars,), ds=None, **kwargs):
    model, tok = load_tiny(model_dir)
    trainer = capturing(trainer_cls)(
        model=model,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=ds if ds is not None else dataset(),
        processing_class=tok,
        **kwargs,
    )
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    return trainer, before


def step_logs(trainer) -> list[dict]:
    return [h for h in trainer.state.log_history if "loss" in h]


SETTINGS = {
    "grpo": dict(loss_type="grpo"),
    "grpo_kl": dict(loss_type="grpo", beta=0.1),
    "gspo": dict(loss_type="grpo", importance_sampling_level="sequence", epsilon=3e-4, epsilon_high=4e-4),
    "dapo": dict(loss_type="dapo", epsilon_high=0.28),
    "dr_grpo": dict(loss_type="dr_grpo", scale_rewards="none"),
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_short_run_trains_and_uses_A_bar_plus_lambda_s(tmp_path, model_dir, setting):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, **SETTINGS[setting], **RUN)
    embedder = CharHistogram()
    trainer, before = run(SetPOTrainer, model_dir, args, embedder=embedder)

    logs = step_logs(trainer)
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    for h in logs:
        for name in SETPO_METRICS:
            assert math.isfinite(h[f"setpo/{name}"]), name
        assert h["setpo/embed_time_s"] >= 0 and h["setpo/credit_time_s"] >= 0
    if setting == "grpo_kl":
        assert all("kl" in h for h in logs)
    changed = [k for k, v in trainer.model.named_parameters() if not torch.equal(v, before[k])]
    assert changed, "no parameter moved"

    scale = "none" if setting == "dr_grpo" else "group"
    assert len(trainer.captured) == 2
    for cap in trainer.captured:
        want, A, s = expected_advantages(
            distinct_chars(cap["completions"]), cap["completions"], embedder, LAM, scale=scale
        )
        assert float(s.abs().max()) > 1e-3, "credits are all ~0: the comparison would not test anything"
        torch.testing.assert_close(cap["advantages"].double(), want, rtol=0, atol=2e-5)
        # The credit actually moved the advantages away from plain GRPO's.
        assert not torch.allclose(cap["advantages"].double(), A, atol=1e-4)


def test_logged_metrics_match_their_definitions(tmp_path, model_dir):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, **{**RUN, "max_steps": 1})
    embedder = CharHistogram()
    trainer, _ = run(SetPOTrainer, model_dir, args, embedder=embedder)
    (h,) = step_logs(trainer)
    cap = trainer.captured[0]
    _, A, s = expected_advantages(distinct_chars(cap["completions"]), cap["completions"], embedder, LAM)
    K = cosine_kernel(embedder(cap["completions"]).double().reshape(-1, G, 96))
    assert h["setpo/credit_mean"] == pytest.approx(float(s.mean()), abs=1e-9)
    assert h["setpo/credit_std"] == pytest.approx(float(s.std()), abs=1e-9)
    assert h["setpo/shaping_ratio"] == pytest.approx(float(LAM * s.abs().mean() / A.abs().mean()), rel=1e-4)
    assert h["setpo/diversity"] == pytest.approx(float(set_diversity(K).mean()), abs=1e-9)
    # the completions table carries each row's term u (SetPO: the credit)
    torch.testing.assert_close(torch.tensor(list(trainer._logs["extra"]["method_term"])[-ROWS:], dtype=s.dtype), s)


def test_named_embedder_spec_and_prompt_field(tmp_path, model_dir):
    # "hashed" built from the config spec; unclamped kernel, linear shaping, prompt + completion text.
    args = SetPOConfig(
        output_dir=str(tmp_path),
        setpo_lambda=LAM,
        setpo_embedder="hashed",
        setpo_kernel_clamp=False,
        setpo_shaping="linear",
        setpo_embed_field="prompt+completion",
        **{**RUN, "max_steps": 1},
    )
    trainer, _ = run(SetPOTrainer, model_dir, args)
    cap = trainer.captured[0]
    texts = [p + c for p, c in zip(cap["prompts"], cap["completions"])]
    want, _, s = expected_advantages(
        distinct_chars(cap["completions"]), texts, build_embedder("hashed"), LAM, clamp=False, shaping="linear"
    )
    assert float(s.abs().max()) > 1e-3
    torch.testing.assert_close(cap["advantages"].double(), want, rtol=0, atol=2e-5)


def test_minilm_embedder(tmp_path, model_dir):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, setpo_embedder="minilm", **{**RUN, "max_steps": 1})
    trainer, _ = run(SetPOTrainer, model_dir, args)
    cap = trainer.captured[0]
    want, _, s = expected_advantages(
        distinct_chars(cap["completions"]), cap["completions"], trainer.setpo_embedder, LAM
    )
    assert float(s.abs().max()) > 1e-3
    torch.testing.assert_close(cap["advantages"].double(), want, rtol=0, atol=2e-5)


def test_policy_hidden_state_embedder(tmp_path, model_dir):
    # Reference embeddings: each row run alone through the policy at generation time, last hidden states of its
    # generated tokens averaged by hand.
    refs: list[torch.Tensor] = []

    class Reference(SetPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            rows = []
            for b in range(out["prompt_ids"].shape[0]):
                n = int(out["completion_mask"][b].sum())
                ids = torch.cat([out["prompt_ids"][b : b + 1], out["completion_ids"][b : b + 1]], 1)
                mask = torch.cat([out["prompt_mask"][b : b + 1], out["completion_mask"][b : b + 1]], 1)
                with torch.no_grad():
                    h = self.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
                P = out["prompt_ids"].shape[1]
                rows.append(h[0, P : P + n].mean(0) if n else torch.zeros(h.shape[-1]))
            refs.append(torch.stack(rows))
            return out

    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, setpo_embedder="policy", **{**RUN, "max_steps": 1})
    trainer, _ = run(Reference, model_dir, args)
    cap = trainer.captured[0]
    want, _, s = expected_advantages(distinct_chars(cap["completions"]), range(ROWS), lambda idx: refs[0][idx], LAM)
    assert float(s.abs().max()) > 1e-3
    torch.testing.assert_close(cap["advantages"].double(), want, rtol=0, atol=1e-4)
    assert all(math.isfinite(step_logs(trainer)[0][f"setpo/{m}"]) for m in SETPO_METRICS)


def test_lambda_zero_is_plain_grpo_bit_for_bit(tmp_path, model_dir):
    plain, _ = run(GRPOTrainer, model_dir, GRPOConfig(output_dir=str(tmp_path / "grpo"), **RUN))
    setpo, _ = run(SetPOTrainer, model_dir, SetPOConfig(output_dir=str(tmp_path / "setpo"), setpo_lambda=0.0, **RUN))
    assert setpo.setpo_embedder is None and setpo.method_last is None  # no embedding or method work at all
    assert len(plain.captured) == len(setpo.captured) == 2
    for a, b in zip(plain.captured, setpo.captured):
        assert a["completions"] == b["completions"]
        assert torch.equal(a["advantages"], b["advantages"])
    assert not any(k.startswith("setpo/") for h in setpo.state.log_history for k in h)
    for (k, v), (k2, v2) in zip(plain.model.named_parameters(), setpo.model.named_parameters()):
        assert k == k2 and torch.equal(v, v2)


def test_lora_run_moves_only_the_adapter(tmp_path, model_dir):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, beta=0.05, **RUN)  # beta: reference = adapter off
    trainer, before = run(SetPOTrainer, model_dir, args, embedder=CharHistogram(), peft_config=lora)
    changed = {k for k, v in trainer.model.named_parameters() if not torch.equal(v, before[k])}
    assert changed and all("lora_" in k for k in changed)
    logs = step_logs(trainer)
    assert all(math.isfinite(h["loss"]) and math.isfinite(h["setpo/credit_std"]) and "kl" in h for h in logs)


def test_group_reward_is_scored_on_the_whole_batch(tmp_path, model_dir):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, **{**RUN, "max_steps": 1})
    embedder = CharHistogram()
    gapo = gapo_group_reward(first_char, valid_set_key="valid_answers")
    funcs = (distinct_chars, gapo)
    trainer, _ = run(
        SetPOTrainer,
        model_dir,
        args,
        reward_funcs=funcs,
        ds=dataset(valid=string.ascii_lowercase),
        embedder=embedder,
    )
    cap = trainer.captured[0]
    answers = [first_char(c) for c in cap["completions"]]
    want_gapo = gapo_rewards(answers, [list("abcdefghijklmnopqrstuvwxyz")] * ROWS, G)
    torch.testing.assert_close(torch.tensor(cap["rewards"]["gapo"]), want_gapo)
    total = [a + b for a, b in zip(distinct_chars(cap["completions"]), want_gapo.tolist())]
    want, _, _ = expected_advantages(total, cap["completions"], embedder, LAM)
    torch.testing.assert_close(cap["advantages"].double(), want, rtol=0, atol=2e-5)


def test_group_reward_in_plain_grpo_fails_loudly(tmp_path, model_dir):
    model, tok = load_tiny(model_dir)
    gapo = gapo_group_reward(first_char)
    args = GRPOConfig(output_dir=str(tmp_path), **{**RUN, "max_steps": 1})
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[gapo],
        args=args,
        train_dataset=dataset(valid=string.ascii_lowercase),
        processing_class=tok,
    )
    with pytest.raises(TypeError, match="pass it to SetPOTrainer"):
        trainer.train()


def test_construction_refuses_bad_setups(tmp_path, model_dir):
    model, tok = load_tiny(model_dir)
    common = dict(model=model, reward_funcs=[distinct_chars], train_dataset=dataset(), processing_class=tok)
    with pytest.raises(ValueError, match="SetPOTrainer needs a SetPOConfig, got GRPOConfig"):
        SetPOTrainer(args=GRPOConfig(output_dir=str(tmp_path), **RUN), **common)
    args = SetPOConfig(output_dir=str(tmp_path), **RUN)
    args.num_generations = 2  # changed after the config was validated
    with pytest.raises(ValueError, match=r"num_generations=2: diversity_method='setpo' acts on groups of at least 3"):
        SetPOTrainer(args=args, **common)
    with pytest.raises(ValueError, match=r"embedder must be None or callable \(the Embedder protocol"):
        SetPOTrainer(args=SetPOConfig(output_dir=str(tmp_path), **RUN), embedder=3, **common)


def test_evaluation_uses_num_generations_eval(tmp_path, model_dir):
    args = SetPOConfig(
        output_dir=str(tmp_path),
        setpo_lambda=LAM,
        num_generations_eval=3,
        per_device_eval_batch_size=6,
        eval_strategy="steps",
        eval_steps=1,
        **{**RUN, "max_steps": 1},
    )
    model, tok = load_tiny(model_dir)
    trainer = capturing(SetPOTrainer)(
        model=model,
        reward_funcs=[distinct_chars],
        args=args,
        train_dataset=dataset(),
        eval_dataset=dataset().select(range(2)),
        processing_class=tok,
        embedder=CharHistogram(),
    )
    trainer.train()
    train_cap, eval_cap = trainer.captured  # one training generation, then one evaluation batch (2 prompts x 3)
    assert len(train_cap["completions"]) == ROWS and len(eval_cap["completions"]) == 6
    G_eval = 3
    A = group_advantages(torch.tensor(distinct_chars(eval_cap["completions"]), dtype=torch.float64), G_eval, eps=1e-4)
    emb = CharHistogram()(eval_cap["completions"]).double().reshape(-1, G_eval, 96)
    want = A + LAM * loo_credits(cosine_kernel(emb)).reshape(-1)
    torch.testing.assert_close(eval_cap["advantages"].double(), want, rtol=0, atol=2e-5)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert evals and math.isfinite(evals[0]["eval_setpo/credit_mean"])


# -- rows kept out of the kernel, small groups, drop-in construction, ZeRO-3 ---------------------------------------


def base_advantages(trainer, n: int) -> torch.Tensor:
    """TRL's A_bar of the last n gathered rows, as it logged them."""
    return torch.tensor(list(trainer._logs["advantages"])[-n:], dtype=torch.float64)


def credits_over(texts, keep, embedder, G=G) -> torch.Tensor:
    """Credits with each group's kernel built from its kept rows only (0 elsewhere and for groups under 3 rows)."""
    s = torch.zeros(len(texts), dtype=torch.float64)
    for start in range(0, len(texts), G):
        rows = [i for i in range(start, start + G) if keep[i]]
        if len(rows) >= 3:
            emb = torch.as_tensor(embedder([texts[i] for i in rows])).double()
            s[rows] = loo_credits(cosine_kernel(emb.unsqueeze(0))).squeeze(0)
    return s


def test_unscorable_rows_get_no_credit_and_stay_out_of_the_kernel(tmp_path, model_dir):
    unscorable = {0, 5}  # one row of each group: the kernels hold the other 3 rows

    def sometimes_none(completions, **kwargs):
        return [None if i in unscorable else float(len(set(c))) for i, c in enumerate(completions)]

    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, **{**RUN, "max_steps": 1})
    embedder = CharHistogram()
    trainer, _ = run(SetPOTrainer, model_dir, args, reward_funcs=(sometimes_none,), embedder=embedder)
    cap = trainer.captured[0]
    A = base_advantages(trainer, ROWS)
    assert A[0] == 0 and A[5] == 0  # TRL zeroes them
    assert cap["advantages"][0] == 0 and cap["advantages"][5] == 0  # and SetPO adds nothing
    keep = [i not in unscorable for i in range(ROWS)]
    s = credits_over(cap["completions"], keep, embedder)
    assert float(s.abs().max()) > 1e-3
    torch.testing.assert_close(cap["advantages"].double(), A + LAM * s, rtol=0, atol=2e-5)
    (h,) = step_logs(trainer)
    assert h["setpo/kernel_row_frac"] == pytest.approx(6 / 8)


def test_a_step_where_the_method_acts_on_no_row_is_reported_once(tmp_path, model_dir, caplog):
    # Two scorable rows per group: no group keeps the 3 rows SetPO needs, so the method acts on no row.
    def two_per_group(completions, **kwargs):
        return [float(len(set(c))) if i % G < 2 else None for i, c in enumerate(completions)]

    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, **RUN)
    with caplog.at_level("WARNING", logger="setpo.integrations.trl.trainer"):
        trainer, _ = run(SetPOTrainer, model_dir, args, reward_funcs=(two_per_group,), embedder=CharHistogram())
    warned = [r for r in caplog.records if "acts on no row" in r.getMessage()]
    assert len(warned) == 1 and len(trainer.captured) == 2  # two steps, one report
    A = base_advantages(trainer, ROWS)  # the last step's A_bar
    torch.testing.assert_close(trainer.captured[-1]["advantages"].double(), A, rtol=0, atol=0)
    assert not bool(trainer.method_last["acting"].any())


def test_masked_truncated_completions_stay_out_of_the_kernel(tmp_path, model_dir):
    # Extra stop characters make some completions end early; the others are truncated and, with
    # mask_truncated_completions, out of the loss: they must not shift their group's credits either.
    model, tok = load_tiny(model_dir)
    model.generation_config.eos_token_id = [tok.eos_token_id, *tok.convert_tokens_to_ids(list("aeiou"))]
    args = SetPOConfig(
        output_dir=str(tmp_path), setpo_lambda=LAM, mask_truncated_completions=True, **{**RUN, "max_steps": 1}
    )
    embedder = CharHistogram()
    trainer = capturing(SetPOTrainer)(
        model=model,
        reward_funcs=[distinct_chars],
        args=args,
        train_dataset=dataset(),
        processing_class=tok,
        embedder=embedder,
    )
    trainer.train()
    cap = trainer.captured[0]
    keep = (cap["out"]["completion_mask"].sum(1) > 0).tolist()  # TRL zeroes the mask of truncated rows
    assert 0 < sum(keep) < ROWS and any(sum(keep[g : g + G]) >= 3 for g in range(0, ROWS, G))
    s = credits_over(cap["completions"], keep, embedder)
    assert float(s.abs().max()) > 1e-3
    A = base_advantages(trainer, ROWS)
    torch.testing.assert_close(cap["advantages"].double(), A + LAM * s, rtol=0, atol=2e-5)
    assert torch.equal(trainer.method_last["acting"].cpu(), torch.tensor(keep) & (s != 0))


def test_evaluation_with_one_or_two_generations_keeps_A_bar(tmp_path, model_dir):
    args = SetPOConfig(
        output_dir=str(tmp_path),
        setpo_lambda=LAM,
        num_generations_eval=2,
        per_device_eval_batch_size=4,
        eval_strategy="steps",
        eval_steps=1,
        **{**RUN, "max_steps": 1},
    )
    model, tok = load_tiny(model_dir)
    trainer = capturing(SetPOTrainer)(
        model=model,
        reward_funcs=[distinct_chars],
        args=args,
        train_dataset=dataset(),
        eval_dataset=dataset().select(range(2)),
        processing_class=tok,
        embedder=CharHistogram(),
    )
    trainer.train()
    train_cap, eval_cap = trainer.captured
    A = group_advantages(torch.tensor(distinct_chars(eval_cap["completions"]), dtype=torch.float64), 2, eps=1e-4)
    torch.testing.assert_close(eval_cap["advantages"].double(), A, rtol=0, atol=1e-6)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert evals and not any(k.startswith("eval_setpo/") for k in evals[0])
    assert "setpo/credit_mean" in step_logs(trainer)[0]  # training (G = 4) still gets its credit


def test_two_generations_train_as_plain_grpo_when_lambda_is_zero(tmp_path, model_dir):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.0, **{**RUN, "num_generations": 2, "max_steps": 1})
    trainer, _ = run(SetPOTrainer, model_dir, args)
    assert len(step_logs(trainer)) == 1 and trainer.setpo_embedder is None


def test_positional_arguments_like_grpo_trainer(tmp_path, model_dir):
    model, tok = load_tiny(model_dir)
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=LAM, setpo_embedder="hashed", **{**RUN, "max_steps": 1})
    # GRPOTrainer(model, reward_funcs, args, train_dataset, eval_dataset, processing_class)
    trainer = SetPOTrainer(model, [distinct_chars], args, dataset(), None, tok)
    assert trainer.train_dataset is not None and trainer.processing_class is tok
    trainer.train()
    assert math.isfinite(step_logs(trainer)[0]["setpo/credit_mean"])


class _FakeZero3Config:
    def is_zero3(self) -> bool:
        return True


def test_text_embedder_is_built_outside_the_zero3_init_context(tmp_path, model_dir):
    from transformers.integrations.deepspeed import (
        is_deepspeed_zero3_enabled,
        set_hf_deepspeed_config,
        unset_hf_deepspeed_config,
    )

    from setpo.embedders import HashedNgramEmbedder, register_embedder
    from setpo.embedders.registry import _EMBEDDERS

    seen: list[bool] = []

    def probe(**kwargs):
        seen.append(is_deepspeed_zero3_enabled())  # what from_pretrained would see: zero.Init partitions if True
        return HashedNgramEmbedder()

    register_embedder("zero3-probe", probe, overwrite=True)
    fake = _FakeZero3Config()
    try:
        args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.0, setpo_embedder="zero3-probe", **RUN)
        model, tok = load_tiny(model_dir)
        trainer = SetPOTrainer(model, [distinct_chars], args, dataset(), processing_class=tok)
        set_hf_deepspeed_config(fake)
        assert is_deepspeed_zero3_enabled()
        trainer.args.setpo_lambda = LAM
        trainer._build_embedder()  # what the first step with the credit on does
        assert seen == [False] and isinstance(trainer.setpo_embedder, HashedNgramEmbedder)
        assert is_deepspeed_zero3_enabled()  # restored afterwards
    finally:
        unset_hf_deepspeed_config()
        _EMBEDDERS.pop("zero3-probe", None)


def test_zero3_context_uses_the_accelerate_plugin_switch():
    from contextlib import contextmanager
    from types import SimpleNamespace

    from setpo.integrations.trl.embedding import zero3_init_disabled

    entered: list[bool] = []

    @contextmanager
    def zero3_init_context_manager(enable: bool = False):
        entered.append(enable)
        yield

    accelerator = SimpleNamespace(
        state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero3_init_context_manager=zero3_init_context_manager))
    )
    with zero3_init_disabled(accelerator):
        assert entered == [False]
