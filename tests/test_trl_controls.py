"""SetPOTrainer controls on a tiny CPU model: the cross-group placebo, lambda set from a target shaping ratio, lambda
warm-up, and lambda raised from 0 during training (the embedder built at the first step that needs it)."""

from __future__ import annotations

import math

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from transformers import TrainerCallback
from trl_tiny import ROWS, CharHistogram, G, dataset, distinct_chars, tiny_model
from trl_tiny import RUN as TINY_RUN

from setpo.core import cosine_kernel, loo_credits
from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.tiny import load_tiny

RUN = {**TINY_RUN, "max_steps": 1}  # the trainer tests' tiny CPU run, one step


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory)


class Recording(SetPOTrainer):
    """Keeps, per generation: the advantages returned, TRL's A_bar, the completions and the method's terms."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records: list[dict] = []

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        n = out["advantages"].shape[0]
        self.records.append(
            {
                "advantages": out["advantages"].double().clone(),
                "A_bar": torch.tensor(list(self._logs["advantages"])[-n:], dtype=torch.float64),
                "completions": list(self._logs["completion"])[-n:],
                "credits": self.method_last["term"] if self.method_last else None,  # SetPO: u = s, after the placebo
                "own_credits": self.method_last["own_term"] if self.method_last else None,
                "lambda": self.method_last["lambda"] if self.method_last else None,
            }
        )
        return out


def train(model_dir, args, callbacks=None, embedder=None, **kwargs) -> Recording:
    model, tok = load_tiny(model_dir)
    trainer = Recording(
        model,
        [distinct_chars],
        args,
        dataset(),
        processing_class=tok,
        embedder=CharHistogram() if embedder is None else embedder,
        callbacks=callbacks,
        **kwargs,
    )
    trainer.train()
    return trainer


def step_logs(trainer) -> list[dict]:
    return [h for h in trainer.state.log_history if "loss" in h]


def true_credits(texts) -> torch.Tensor:
    emb = CharHistogram()(texts).double().reshape(-1, G, 96)
    return loo_credits(cosine_kernel(emb)).reshape(-1)


# -- placebo ------------------------------------------------------------------------------------------------------


def test_placebo_gives_every_row_a_credit_from_another_group(tmp_path, model_dir):
    lam = 0.5
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=lam, setpo_placebo=True, **{**RUN, "max_steps": 2})
    trainer = train(model_dir, args)
    for rec in trainer.records:
        s = true_credits(rec["completions"])
        torch.testing.assert_close(rec["own_credits"], s, rtol=0, atol=1e-9)
        placebo = rec["credits"]
        assert float(s.abs().max()) > 1e-3
        # a permutation of the true credits ...
        own = rec["own_credits"]
        torch.testing.assert_close(placebo.sort().values, own.sort().values, rtol=0, atol=0)
        # ... in which no row keeps a credit of its own group: each value comes from a row of the other group
        group = torch.arange(ROWS) // G
        for i in range(ROWS):
            sources = [j for j in range(ROWS) if own[j] == placebo[i]]
            assert sources and all(group[j] != group[i] for j in sources), i
        torch.testing.assert_close(rec["advantages"], rec["A_bar"] + lam * placebo, rtol=0, atol=2e-5)
    assert not torch.equal(trainer.records[0]["credits"], trainer.records[0]["own_credits"])
    assert all(h["setpo/placebo"] == 1.0 for h in step_logs(trainer))


def test_placebo_refuses_a_batch_of_one_group(tmp_path, model_dir):
    args = SetPOConfig(
        output_dir=str(tmp_path), setpo_lambda=0.5, setpo_placebo=True, **{**RUN, "per_device_train_batch_size": G}
    )
    with pytest.raises(ValueError, match="setpo_placebo needs at least 2 groups in the gathered batch"):
        train(model_dir, args)


# -- lambda from a target ratio -----------------------------------------------------------------------------------


def test_target_ratio_sets_lambda_so_the_logged_ratio_hits_the_target(tmp_path, model_dir):
    target = 0.2
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.0, setpo_target_ratio=target, **RUN)
    trainer = train(model_dir, args)
    (h,) = step_logs(trainer)
    (rec,) = trainer.records
    assert h["setpo/shaping_ratio"] == pytest.approx(target, abs=1e-6)
    s, A = true_credits(rec["completions"]), rec["A_bar"]
    want_lambda = target * float(A.abs().mean()) / float(s.abs().mean())
    assert h["setpo/lambda"] == pytest.approx(want_lambda, rel=1e-6) and rec["lambda"] == h["setpo/lambda"]
    # measured on the advantages the loss used: mean |A_hat - A_bar| / mean |A_bar|
    achieved = float((rec["advantages"] - A).abs().mean() / A.abs().mean())
    assert achieved == pytest.approx(target, rel=1e-4)
    torch.testing.assert_close(rec["advantages"], A + want_lambda * s, rtol=0, atol=2e-5)


def test_controls_act_on_another_method_s_term(tmp_path, model_dir):
    # pass@k has no weight of its own: the target ratio scales its term u = A_passk - A_bar, the placebo moves it.
    target = 0.2
    args = SetPOConfig(
        output_dir=str(tmp_path), diversity_method="passk", diversity_method_kwargs={"k": 2},
        diversity_correct_threshold=3.0, setpo_target_ratio=target, setpo_placebo=True, **{**RUN, "max_steps": 2},
    )  # fmt: skip
    trainer = train(model_dir, args)
    for rec, h in zip(trainer.records, step_logs(trainer)):
        u, A = rec["credits"], rec["A_bar"]
        assert float(rec["own_credits"].abs().max()) > 0, "pass@k changed nothing: the test would test nothing"
        torch.testing.assert_close(u.sort().values, rec["own_credits"].sort().values, rtol=0, atol=0)
        lam = target * float(A.abs().mean()) / float(u.abs().mean())
        assert h["setpo/lambda"] == pytest.approx(lam, rel=1e-6)
        torch.testing.assert_close(rec["advantages"], A + lam * u, rtol=0, atol=2e-5)


def test_target_ratio_sets_no_lambda_from_rounding_noise(tmp_path, model_dir):
    """Every rollout embedded alike: the credits are 0 up to rounding, so the ratio gives no lambda (it gave ~1e14,
    which a later step with real credits and all-equal rewards reused: gradient norms of 1e12 on SmolLM2 runs)."""

    class Same:  # one-hot, as the answer embedder of an all-alike group; G = 6 gives credits of 4.4e-16, not 0
        def __call__(self, texts):
            return torch.nn.functional.one_hot(torch.full((len(texts),), 3), 8).double()

    run = {**RUN, "max_steps": 2, "num_generations": 6, "per_device_train_batch_size": 12}
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.0, setpo_target_ratio=0.3, **run)
    trainer = train(model_dir, args, embedder=Same())
    logs = step_logs(trainer)
    assert len(logs) == 2 and any(float(r["A_bar"].abs().sum()) > 0 for r in trainer.records)
    assert all(abs(float(r["credits"].abs().max())) < 1e-12 for r in trainer.records)
    assert [h["setpo/lambda"] for h in logs] == [0.0, 0.0]
    for rec in trainer.records:
        torch.testing.assert_close(rec["advantages"], rec["A_bar"].to(rec["advantages"].dtype), rtol=0, atol=1e-6)


def test_fixed_lambda_is_logged(tmp_path, model_dir):
    trainer = train(model_dir, SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.3, **RUN))
    assert step_logs(trainer)[0]["setpo/lambda"] == pytest.approx(0.3)
    assert step_logs(trainer)[0]["setpo/placebo"] == 0.0


# -- warm-up and lambda raised during training -------------------------------------------------------------------


def test_warmup_from_zero_follows_the_schedule(tmp_path, model_dir):
    lam, W = 0.5, 2
    args = SetPOConfig(
        output_dir=str(tmp_path), setpo_lambda=lam, setpo_lambda_warmup_steps=W, **{**RUN, "max_steps": 4}
    )
    trainer = train(model_dir, args)
    logged = [h["setpo/lambda"] for h in step_logs(trainer)]
    assert logged == pytest.approx([lam * min(1.0, t / W) for t in range(4)])  # 0, 0.25, 0.5, 0.5
    first = trainer.records[0]
    assert torch.equal(first["advantages"], first["A_bar"])  # lambda 0 at step 0: A_bar itself
    second = trainer.records[1]
    torch.testing.assert_close(
        second["advantages"], second["A_bar"] + 0.25 * true_credits(second["completions"]), rtol=0, atol=2e-5
    )
    assert all(math.isfinite(h["loss"]) for h in step_logs(trainer))


def test_warmup_scales_the_target_ratio(tmp_path, model_dir):
    args = SetPOConfig(
        output_dir=str(tmp_path),
        setpo_lambda=0.0,
        setpo_target_ratio=0.2,
        setpo_lambda_warmup_steps=4,
        **{**RUN, "max_steps": 3},
    )
    trainer = train(model_dir, args)
    ratios = [h.get("setpo/shaping_ratio", 0.0) for h in step_logs(trainer)]
    assert ratios == pytest.approx([0.0, 0.05, 0.1], abs=1e-6)


class RaiseLambda(TrainerCallback):
    """Sets trainer.args.setpo_lambda after the first optimizer step (a user's schedule)."""

    def __init__(self, value: float):
        self.value = value

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            args.setpo_lambda = self.value


def test_lambda_raised_from_zero_during_training_builds_the_embedder(tmp_path, model_dir):
    args = SetPOConfig(output_dir=str(tmp_path), setpo_lambda=0.0, setpo_embedder="hashed", **{**RUN, "max_steps": 2})
    model, tok = load_tiny(model_dir)
    trainer = Recording(model, [distinct_chars], args, dataset(), processing_class=tok, callbacks=[RaiseLambda(0.5)])
    assert trainer.setpo_embedder is None
    trainer.train()
    first, second = step_logs(trainer)
    assert "setpo/lambda" not in first and second["setpo/lambda"] == pytest.approx(0.5)
    assert trainer.setpo_embedder is not None
    rec = trainer.records[1]
    emb = trainer.setpo_embedder(rec["completions"]).double().reshape(-1, G, trainer.setpo_embedder.dim)
    s = loo_credits(cosine_kernel(emb)).reshape(-1)
    torch.testing.assert_close(rec["advantages"], rec["A_bar"] + 0.5 * s, rtol=0, atol=2e-5)
