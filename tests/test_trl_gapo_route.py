"""GAPO has one TRL route, ``diversity_method="gapo"``: it gives exactly the rewards and advantages of GAPO's reward
taken as the task reward (GAPO eq. 3 via `setpo.rewards.gapo_rewards`, scored on the gathered group, then TRL's
group normalisation), the route the published gapo_lists and smollm2_lists runs used before; and a SetPO parameter
under it is refused naming both fields."""

from __future__ import annotations

import pytest
import torch
import trl  # noqa: F401  (required: a broken install must fail, not skip)
from trl_tiny import RUN as TINY_RUN
from trl_tiny import dataset, first_char, gapo_group_reward, tiny_model

from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.rewards import gapo_rewards
from setpo.tiny import load_tiny

RUN = {**TINY_RUN, "max_steps": 2}
VALID = "abcdefghijklm"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory)


def odd_first(completions, **kwargs) -> list[float]:
    """A task reward the method replaces (it must not leak into GAPO's advantages)."""
    return [float(bool(c) and ord(c[0]) % 2 == 1) for c in completions]


class Recording(SetPOTrainer):
    """Keeps each generation's completions, advantages and the rewards that were normalised."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: list[dict] = []

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        n = out["advantages"].shape[0]
        last = self.method_last
        rewards = last["rewards"] if last is not None else self._rewards_per_func[:, 0]
        self.steps.append(
            {
                "completions": list(self._logs["completion"])[-n:],
                "advantages": out["advantages"].detach().clone(),
                "rewards": rewards.detach().clone(),
            }
        )
        return out


def train(model_dir, tmp_path, reward_funcs, **config) -> Recording:
    args = SetPOConfig(output_dir=str(tmp_path), **config, **RUN)
    model, tok = load_tiny(model_dir)
    trainer = Recording(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset(valid=VALID),
                        processing_class=tok, answer_extractor=first_char)  # fmt: skip
    trainer.train()
    return trainer


@pytest.mark.parametrize(
    "options",
    [
        {"form": "published", "count": "inclusive", "invalid_reward": -1.0},
        {"form": "absolute", "count": "leave_one_out", "invalid_reward": -2.0},
    ],
)
def test_the_method_route_equals_gapo_as_the_task_reward_bit_for_bit(tmp_path, model_dir, options):
    # the reference: GAPO's R~ as the task reward (float64, then TRL's float32 column), normalised by TRL itself
    old = train(model_dir, tmp_path / "old", [gapo_group_reward(first_char, **options)], setpo_lambda=0.0)
    new = train(model_dir, tmp_path / "new", [odd_first], diversity_method="gapo", diversity_method_kwargs=options)
    assert len(old.steps) == len(new.steps) == RUN["max_steps"]
    for a, b in zip(old.steps, new.steps):
        assert a["completions"] == b["completions"]  # same start and seed: the same rollouts
        answers = [first_char(c) for c in a["completions"]]
        want = gapo_rewards(answers, [list(VALID)] * len(answers), TINY_RUN["num_generations"], **options)
        assert torch.equal(a["rewards"], want) and torch.equal(b["rewards"], want)
        assert torch.equal(a["advantages"], b["advantages"])
        assert (b["advantages"] != 0).any()  # the groups are not all tied: the comparison has something to compare
    for h_old, h_new in zip(old.state.log_history, new.state.log_history):
        if "reward" in h_old:  # the method's reward is logged as TRL logs the task reward
            for k in ("reward", "reward_std", "frac_reward_zero_std"):
                assert h_new[f"method/gapo/{k}"] == h_old[k]


def test_a_setpo_parameter_under_gapo_is_refused_naming_both_fields(tmp_path):
    for field, value in (("setpo_lambda", 0.5), ("setpo_lambda", 0.0), ("setpo_shaping", "linear")):
        with pytest.raises(ValueError, match=rf"{field}=.* is a parameter of diversity_method='setpo', which "
                                             r"diversity_method='gapo' does not run"):  # fmt: skip
            SetPOConfig(output_dir=str(tmp_path), diversity_method="gapo", use_cpu=True, bf16=False, **{field: value})
