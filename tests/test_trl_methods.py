"""SetPOTrainer with every diversity method of setpo.methods selected by ``diversity_method``: the advantages the
trainer uses equal the method's brute-force reference (tests/method_references.py) applied to the logged rewards and
completions, normalised as TRL does; config-time refusals of bad method settings."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from method_references import (
    answer_labels_reference,
    darling_reference,
    diver_reference,
    dqo_reference,
    dra_grpo_reference,
    entropy_bonus_reference,
    gapo_reference,
    passk_reference,
    setpo_reference,
)
from trl_tiny import RUN as TINY_RUN
from trl_tiny import CharHistogram, G, dataset, first_char, tiny_model

from setpo.core import group_advantages
from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.tiny import load_tiny

RUN = {**TINY_RUN, "max_steps": 1}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory)


def odd_first(completions, **kwargs) -> list[float]:
    """1 when the completion's first character has an odd code: about half the rollouts are 'correct'."""
    return [float(bool(c) and ord(c[0]) % 2 == 1) for c in completions]


def distinct_chars(completions, **kwargs) -> list[float]:
    """A quarter of the number of distinct characters: rewards of the size of odd_first's."""
    return [0.25 * len(set(c)) for c in completions]


class Capturing(SetPOTrainer):
    """Records the advantages each generation returns, with the logged completions and rewards."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.captured: list[dict] = []

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        n = out["advantages"].shape[0]
        self.captured.append(
            {
                "advantages": out["advantages"].detach().clone().double(),
                "completions": list(self._logs["completion"])[-n:],
                "rewards": {k: list(v)[-n:] for k, v in self._logs["rewards"].items()},
                "out": out,
            }
        )
        return out


def run(model_dir, tmp_path, method, kwargs=None, reward_funcs=(odd_first, distinct_chars), **config):
    args = SetPOConfig(
        output_dir=str(tmp_path), diversity_method=method, diversity_method_kwargs=kwargs or {}, **config, **RUN
    )
    model, tok = load_tiny(model_dir)
    trainer = Capturing(
        model=model,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=dataset(("ab", "cd"), valid="abcdefghijklm"),
        processing_class=tok,
        embedder=CharHistogram(),
        answer_extractor=first_char,
    )
    trainer.train()
    assert trainer.captured, "no generation ran"
    return trainer, trainer.captured[0]


def logged(step) -> tuple[torch.Tensor, list[str], torch.Tensor]:
    """(B, G) summed rewards, completion texts, (B, G, 96) embeddings of one captured generation (float64)."""
    R = torch.tensor([sum(v) for v in zip(*step["rewards"].values())], dtype=torch.float64).reshape(-1, G)
    texts = step["completions"]
    E = CharHistogram()(texts).double().reshape(-1, G, 96)
    return R, texts, E


def advantages_of(rewards: list[list[float]], scale: str = "group") -> torch.Tensor:
    """TRL's group normalisation (eps 1e-4) of the (B, G) rewards, flattened."""
    return group_advantages(torch.tensor(rewards, dtype=torch.float64).reshape(-1), G, scale=scale, eps=1e-4)


def check(step, want: torch.Tensor, atol: float = 1e-5) -> None:
    want = torch.as_tensor(want, dtype=torch.float64).reshape(-1)
    torch.testing.assert_close(step["advantages"], want, rtol=0, atol=atol)


def test_default_is_setpo_and_setpo_by_name_adds_lambda_s(tmp_path, model_dir):
    assert SetPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False).diversity_method == "setpo"
    trainer, step = run(model_dir, tmp_path, "setpo", setpo_lambda=0.5)
    R, _, E = logged(step)
    A = advantages_of(R.tolist())
    want = torch.tensor(setpo_reference(A.reshape(-1, G), E, lam=0.5), dtype=torch.float64)
    assert not torch.allclose(want.reshape(-1), A), "the credit must change something"
    check(step, want)
    assert trainer.method_last["batch"].embeddings is not None  # SetPO ran through the registry like any method


def test_gapo_replaces_the_reward(tmp_path, model_dir):
    trainer, step = run(model_dir, tmp_path, "gapo")
    answers = [first_char(t) or "" for t in step["completions"]]
    ref = gapo_reference(answers, [list("abcdefghijklm")] * 2, G)
    check(step, advantages_of(ref))
    assert "method/gapo/reward_delta" in trainer.state.log_history[0]


@pytest.mark.parametrize("scope", ["group", "batch"])
def test_dra_grpo_reweights_the_reward(tmp_path, model_dir, scope):
    _, step = run(model_dir, tmp_path, "dra_grpo", {"scope": scope})
    R, _, E = logged(step)
    check(step, advantages_of(dra_grpo_reference(R, E, scope=scope)))


def test_darling_multiplies_and_only_centres(tmp_path, model_dir):
    trainer, step = run(model_dir, tmp_path, "darling", {"partition": "answer"})
    R, texts, _ = logged(step)
    ref = darling_reference(R, answer_labels_reference([first_char(t) for t in texts], G))
    check(step, advantages_of(ref, scale="none"))
    assert not torch.allclose(advantages_of(ref, scale="group"), advantages_of(ref, scale="none"))
    logs = trainer.state.log_history[0]
    delta = (torch.tensor(ref).reshape(-1) - R.reshape(-1)).abs().mean().item()
    assert logs["method/darling/reward_delta"] == pytest.approx(delta, abs=1e-5)


def test_diver_adds_the_bleu_bonus_to_correct_rollouts(tmp_path, model_dir):
    _, step = run(
        model_dir, tmp_path, "diver", {"lam": 0.5}, reward_funcs=(odd_first,), diversity_correct_threshold=0.5
    )
    R, texts, _ = logged(step)
    correct = R > 0.5
    assert correct.any() and not correct.all(), "the test needs both correct and wrong rollouts"
    check(step, advantages_of(diver_reference(R, texts, correct, G, lam=0.5)), atol=1e-5)


def test_dqo_adds_the_log_det_gain(tmp_path, model_dir):
    _, step = run(model_dir, tmp_path, "dqo", {"alpha": 0.5})
    R, _, E = logged(step)
    check(step, advantages_of(dqo_reference(R, E, alpha=0.5)))


def test_passk_replaces_the_advantage(tmp_path, model_dir):
    trainer, step = run(model_dir, tmp_path, "passk", {"k": 2}, reward_funcs=(odd_first,))
    R, _, _ = logged(step)
    correct = R > 0
    assert correct.any() and not correct.all()
    check(step, torch.tensor(passk_reference(correct, k=2)))
    A_bar = advantages_of(R.tolist())
    delta = (torch.tensor(passk_reference(correct, k=2)).reshape(-1) - A_bar).abs().mean().item()
    assert trainer.state.log_history[0]["method/passk/advantage_delta"] == pytest.approx(delta, abs=1e-5)
    assert 0 < trainer.state.log_history[0]["method/passk/time_s"] < trainer.state.log_history[0]["step_time"]


def test_entropy_bonus_is_trls_entropy_coef(tmp_path, model_dir):
    """The loss with the bonus minus the loss without it is the reference term on the same batch's entropies."""
    trainer, step = run(model_dir, tmp_path, "entropy_bonus", {"coef": 0.3})
    assert trainer.entropy_coef == 0.3 and trainer.args.entropy_coef == 0.3
    out = step["out"]
    trainer.model.eval()  # no dropout: the two losses see the same forward
    mask = out["completion_mask"]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attn = torch.cat([out["prompt_mask"], mask], dim=1)
    with torch.no_grad():
        _, H, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, attn, mask.shape[1], compute_entropy=True
        )
        with_bonus = trainer._compute_loss(trainer.model, out).item()
        trainer.entropy_coef, trainer._entropy_bonus_enabled = 0.0, False
        without = trainer._compute_loss(trainer.model, out).item()
    ref = entropy_bonus_reference(H.unsqueeze(0).double(), mask.bool().unsqueeze(0), coef=0.3)
    assert ref < 0
    assert with_bonus - without == pytest.approx(ref / trainer.current_gradient_accumulation_steps, abs=1e-5)


def test_normalisation_matches_trl_when_the_reward_is_unchanged(tmp_path, model_dir):
    """With DQO's alpha = 0 the reward is R itself: the trainer's normalisation must give TRL's A_bar exactly."""
    trainer, step = run(model_dir, tmp_path, "dqo", {"alpha": 0.0})
    torch.testing.assert_close(step["advantages"], trainer.method_last["base"].double(), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(diversity_method="nope"), "unknown diversity_method 'nope'"),
        (dict(diversity_method="passk", diversity_method_kwargs={"kk": 2}), r"unknown method 'passk' parameter\(s\)"),
        (
            dict(diversity_method="passk", diversity_method_kwargs={"k": 9}),
            r"diversity_method_kwargs k \(at most num_generations\) must be an integer in \[1, [0-9]+\], got 9",
        ),
        (dict(diversity_method="darling", diversity_method_kwargs={"partition": "x"}), "unknown partition"),
        (
            dict(diversity_method="setpo", setpo_lambda=0.1, diversity_method_kwargs={"lam": 1.0}),
            "give the same parameter",
        ),
        (dict(diversity_method="dqo", setpo_lambda=0.5), "setpo_lambda=0.5 is a parameter of diversity_method='setpo'"),
        (dict(diversity_method="dqo", diversity_method_kwargs="{bad"), "not valid JSON"),
        (dict(diversity_method="dqo", diversity_answer_extractor="x"), "unknown diversity_answer_extractor"),
        (
            dict(diversity_method="dqo", multi_objective_aggregation="normalize_then_sum"),
            "sum_then_normalize",
        ),
        (
            dict(diversity_method="entropy_bonus", diversity_method_kwargs={"aggregation": "seq-mean-token-mean"}),
            "token mean",
        ),
        (
            dict(diversity_method="entropy_bonus", diversity_method_kwargs={"coef": 0.1}, entropy_coef=0.2),
            "disagree",
        ),
    ],
)
def test_config_refuses_bad_method_settings(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        SetPOConfig(output_dir=str(tmp_path), **{**RUN, **fields})


def test_kwargs_as_json_string_and_non_setpo_needs_no_three_rollouts(tmp_path):
    args = SetPOConfig(
        output_dir=str(tmp_path),
        diversity_method="passk",
        diversity_method_kwargs='{"k": 2}',
        **{**RUN, "num_generations": 2, "per_device_train_batch_size": 4},
    )
    assert args.method_params == {"k": 2, "eps": 0.0} and args.method_enabled
