"""The setpo.methods registry and GroupBatch: names, entry points and inputs as declared, hand-computed numbers for
every registered name, and clear errors for bad input."""

from __future__ import annotations

import math

import pytest
import torch

from setpo.core import group_credits, setpo_advantages
from setpo.methods import GroupBatch, Method, available_methods, get_method, register_method
from setpo.methods import registry as registry_module
from setpo.rewards import gapo_rewards

F64 = torch.float64
# e1 = e2 (a duplicate), e3 orthogonal to both: cosine kernel [[1, 1, 0], [1, 1, 0], [0, 0, 1]].
DUP3 = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]]], dtype=F64)

DECLARED = {
    # name: (entry, needs with default parameters, group_scale)
    "darling": ("reward", {"rewards", "answers"}, "none"),
    "diver": ("reward", {"rewards", "texts", "correct"}, "group"),
    "dqo": ("reward", {"rewards", "embeddings"}, "group"),
    "dra_grpo": ("reward", {"rewards", "embeddings"}, "group"),
    "entropy_bonus": ("loss", {"token_entropies"}, None),
    "gapo": ("reward", {"answers", "valid_sets"}, "group"),
    "passk": ("advantage", {"correct"}, None),
    "setpo": ("advantage", {"embeddings"}, None),
}


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def close(actual: torch.Tensor, expected, atol: float = 1e-12) -> None:
    torch.testing.assert_close(actual.to(F64), t(expected), rtol=0, atol=atol)


# ---------------------------------------------------------------------------------------------------------------
# the registry


def test_names_list():
    assert available_methods() == sorted(DECLARED)
    assert available_methods("reward") == ["darling", "diver", "dqo", "dra_grpo", "gapo"]
    assert available_methods("advantage") == ["passk", "setpo"]
    assert available_methods("loss") == ["entropy_bonus"]


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_method_declares_entry_inputs_and_citation(name):
    entry, needs, scale = DECLARED[name]
    m = get_method(name)
    assert isinstance(m, Method) and m.name == name
    assert (m.entry, set(m.required_inputs()), m.group_scale) == (entry, needs, scale)
    assert m.citation and m.formula == m.fn.__doc__.strip().splitlines()[0]
    assert m.check_params() == dict(m.defaults)


def test_required_inputs_follow_the_parameters():
    assert get_method("darling").required_inputs(partition="embedding") == {"rewards", "embeddings"}
    assert get_method("darling").required_inputs(partition=lambda b: None) == {"rewards"}
    assert get_method("diver").required_inputs(correct_only=False) == {"rewards", "texts"}


def test_unknown_method_name_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown method 'dqoo'.*'darling'.*'setpo'"):
        get_method("dqoo")
    with pytest.raises(ValueError, match="unknown method"):
        get_method(None)
    with pytest.raises(ValueError, match="unknown entry"):
        available_methods("rewards")


def test_unknown_parameter_is_refused_naming_the_accepted_ones():
    with pytest.raises(ValueError, match=r"unknown method 'dqo' parameter\(s\) \['lambda'\].*'alpha'"):
        get_method("dqo").check_params(alpha=0.1, **{"lambda": 1.0})
    batch = GroupBatch(torch.zeros(1, 3), embeddings=DUP3)
    with pytest.raises(ValueError, match=r"unknown method .dqo. parameter\(s\) \[.alph.\]"):
        get_method("dqo")(batch, alph=0.1)


@pytest.fixture
def scratch_name():
    name = "scratch_test_method"
    yield name
    registry_module._REGISTRY.pop(name, None)


def test_a_registered_name_cannot_be_overwritten(scratch_name):
    @register_method(scratch_name, entry="reward", needs=("rewards",), citation="none")
    def double(batch: GroupBatch, factor: float = 2.0) -> torch.Tensor:
        """R~_i = factor * R_i."""
        return batch.rewards * factor

    assert get_method(scratch_name)(GroupBatch(torch.ones(1, 2))).tolist() == [[2.0, 2.0]]
    with pytest.raises(ValueError, match="already registered"):
        register_method(scratch_name, entry="reward", needs=(), citation="x")(double)
    with pytest.raises(ValueError, match="already registered"):
        register_method("dqo", entry="reward", needs=(), citation="x")(double)
    assert get_method(scratch_name).fn is double and get_method("dqo").fn is not double


def test_registration_errors(scratch_name):
    with pytest.raises(ValueError, match="unknown entry"):
        register_method(scratch_name, entry="rewards", needs=(), citation="x")
    with pytest.raises(ValueError, match=r"unknown GroupBatch field\(s\) \[.embedding.\]"):
        register_method(scratch_name, entry="reward", needs=("embedding",), citation="x")
    with pytest.raises(ValueError, match="group_scale"):
        register_method(scratch_name, entry="reward", needs=(), citation="x", group_scale="batch")

    def no_doc(batch, factor: float = 1.0):
        return batch.rewards

    with pytest.raises(ValueError, match="docstring"):
        register_method(scratch_name, entry="reward", needs=(), citation="x")(no_doc)

    def no_default(batch, factor):
        """R~ = R."""
        return batch.rewards

    with pytest.raises(ValueError, match="needs a default"):
        register_method(scratch_name, entry="reward", needs=(), citation="x")(no_default)
    assert scratch_name not in available_methods()


def test_calling_conventions_are_enforced():
    batch = GroupBatch(torch.zeros(1, 3), embeddings=DUP3)
    with pytest.raises(ValueError, match=r"'setpo' enters after the normalisation: pass advantages"):
        get_method("setpo")(batch)
    with pytest.raises(ValueError, match="takes no advantages"):
        get_method("dqo")(batch, torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"advantages must have shape \(B, G\) = \(1, 3\)"):
        get_method("setpo")(batch, torch.zeros(3))
    with pytest.raises(ValueError, match="advantages contains 1 NaN"):
        get_method("setpo")(batch, t([[0.0, float("nan"), 0.0]]))
    with pytest.raises(TypeError, match="takes a setpo.methods.GroupBatch"):
        get_method("dqo")({"rewards": torch.zeros(1, 3)})
    with pytest.raises(ValueError, match=r"'dqo' needs GroupBatch field\(s\) \['embeddings'\]"):
        get_method("dqo")(GroupBatch(torch.zeros(1, 3)))
    with pytest.raises(ValueError, match=r"'darling' needs GroupBatch field\(s\) \['embeddings'\]"):
        get_method("darling")(GroupBatch(torch.zeros(1, 3)), partition="embedding")


# ---------------------------------------------------------------------------------------------------------------
# each registered name does what it says: hand-computed numbers


def test_dqo_on_a_known_kernel():
    # K = L + I = [[2, 1, 0], [1, 2, 0], [0, 0, 2]]: det 6; without o_1 or o_2 det 4, without o_3 det 3.
    out = get_method("dqo")(GroupBatch(t([[1.0, 0.0, 0.5]]), embeddings=DUP3), alpha=1.0)
    close(out, [[1.0 + math.log(1.5), math.log(1.5), 0.5 + math.log(2.0)]])
    ortho = torch.eye(3, dtype=F64).unsqueeze(0)  # K = 2 I: every credit log 2
    close(
        get_method("dqo")(GroupBatch(torch.zeros(1, 3, dtype=F64), embeddings=ortho), alpha=0.5),
        [[0.5 * math.log(2)] * 3],
    )


def test_dqo_zero_embedding_adds_nothing():
    e = t([[[1.0, 0.0], [0.0, 0.0]]])
    close(get_method("dqo")(GroupBatch(torch.zeros(1, 2, dtype=F64), embeddings=e), alpha=1.0), [[math.log(2), 0.0]])


def test_passk_by_hand():
    # n = 4, c = 1, k = 2: rho = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2; A_pos = 1, A_neg = (1/2 - C(2,1)/C(3,1)) / (1/2).
    correct = torch.tensor([[True, False, False, False], [True] * 4, [False] * 4])
    out = get_method("passk")(GroupBatch(torch.zeros(3, 4), correct=correct), torch.randn(3, 4, dtype=F64), k=2)
    close(out, [[1.0, -1 / 3, -1 / 3, -1 / 3], [0.0] * 4, [0.0] * 4])


def test_darling_by_hand():
    R = t([[1.0, 1.0, 1.0, 0.5], [1.0, 1.0, 1.0, 1.0]])
    answers = ["a", "A.", "b", "c"] + ["x"] * 4  # classes {0, 1}, {2}, {3}; then one class of 4
    out = get_method("darling")(GroupBatch(R, answers=answers), floor=0.0)
    close(out, [[2 / 3, 2 / 3, 1.0, 0.5], [0.0] * 4])
    close(get_method("darling")(GroupBatch(R, answers=answers))[1:], [[0.1] * 4])  # the public code's floor
    labels = get_method("darling")(GroupBatch(R), partition=lambda b: torch.tensor([[0, 0, 0, 1], [0, 1, 2, 3]]))
    close(labels, [[1 / 3, 1 / 3, 1 / 3, 0.5], [1.0] * 4])


def test_dra_grpo_by_hand():
    out = get_method("dra_grpo")(GroupBatch(t([[1.0, 1.0, 1.0]]), embeddings=DUP3))
    close(out, [[0.5, 0.5, 1.0]])  # denominators 1 + 1, 1 + 1, 1 + 0
    two = torch.cat([DUP3, DUP3])  # batch scope: e1 has 4 copies (itself included) among the 6 rollouts
    out = get_method("dra_grpo")(GroupBatch(torch.ones(2, 3, dtype=F64), embeddings=two), scope="batch")
    close(out, [[1 / (4 + 1e-6), 1 / (4 + 1e-6), 1 / (2 + 1e-6)]] * 2)


def test_diver_by_hand():
    texts = ["a b c d", "a b c d", "w x y z"]  # BLEU 1 between the duplicates, 0 without a shared word
    correct = torch.tensor([[True, False, True]])
    out = get_method("diver")(GroupBatch(t([[1.0, 0.0, 1.0]]), texts=texts, correct=correct), lam=1.0)
    close(out, [[1.5, 0.0, 2.0]])  # d = 1 - (1 + 0)/2, (gated off), 1 - 0
    out = get_method("diver")(GroupBatch(t([[1.0, 0.0, 1.0]]), texts=texts), lam=1.0, correct_only=False)
    close(out, [[1.5, 0.5, 2.0]])


def test_setpo_is_the_core_composition_and_a_hand_value():
    A = t([[0.3, -0.1, 0.2]])
    out = get_method("setpo")(GroupBatch(torch.zeros(1, 3), embeddings=DUP3), A, lam=0.5)
    assert torch.equal(out, setpo_advantages(A, group_credits(DUP3, 3), 0.5))
    # m = (1/2, 1/2, 0): D = -2/3 log 1.5; without o_1: D = 0; without o_3: D = -log 2.
    s = [-2 / 3 * math.log(1.5), -2 / 3 * math.log(1.5), -2 / 3 * math.log(1.5) + math.log(2)]
    close(out, [[a + 0.5 * x for a, x in zip([0.3, -0.1, 0.2], s)]])


def test_setpo_small_groups():
    e = t([[[1.0, 0.0], [0.0, 1.0]]])
    with pytest.raises(ValueError, match="G=2 is too small"):
        get_method("setpo")(GroupBatch(torch.zeros(1, 2), embeddings=e), t([[1.0, -1.0]]))
    out = get_method("setpo")(GroupBatch(torch.zeros(1, 2), embeddings=e), t([[1.0, -1.0]]), on_small_group="zero")
    close(out, [[1.0, -1.0]])


def test_gapo_is_gapo_rewards():
    answers = ["red", "red", "green", None, "blue", "blue"]
    out = get_method("gapo")(GroupBatch(torch.zeros(2, 3), answers=answers, valid_sets=[{"red", "green", "blue"}] * 2))
    assert out.dtype == torch.float32
    expected = gapo_rewards(answers, [{"red", "green", "blue"}] * 2, 3).reshape(2, 3)
    assert torch.equal(out, expected)


def test_entropy_bonus_by_hand():
    H = t([[[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]])
    M = torch.tensor([[[True, True, False], [True, False, False]]])
    batch = GroupBatch(torch.zeros(1, 2), token_entropies=H, response_mask=M)
    close(get_method("entropy_bonus")(batch, coef=0.1), -0.1 * (1 + 2 + 4) / 3)
    close(get_method("entropy_bonus")(batch, coef=0.1, aggregation="seq-mean-token-mean"), -0.1 * (1.5 + 4) / 2)


def test_reward_methods_keep_the_reward_dtype():
    R = torch.tensor([[1.0, 0.0, 1.0]])
    assert get_method("dqo")(GroupBatch(R, embeddings=DUP3)).dtype == torch.float32
    assert get_method("dra_grpo")(GroupBatch(R, embeddings=DUP3)).dtype == torch.float32
    assert get_method("darling")(GroupBatch(R, answers=["a", "b", "a"])).dtype == torch.float32


# ---------------------------------------------------------------------------------------------------------------
# bad input to the methods


def test_passk_bad_k():
    batch = GroupBatch(torch.zeros(1, 4), correct=torch.zeros(1, 4, dtype=torch.bool))
    for k in (5, 0, True, 2.5):
        with pytest.raises(ValueError, match=r"k \(at most the group size n = 4\) must be an integer"):
            get_method("passk")(batch, torch.zeros(1, 4), k=k)
    with pytest.raises(ValueError, match="eps must be"):
        get_method("passk")(batch, torch.zeros(1, 4), k=2, eps=-1.0)


def test_dqo_bad_input():
    batch = GroupBatch(torch.zeros(1, 3), embeddings=DUP3)
    with pytest.raises(ValueError, match=r"singular .* use ridge > 0"):
        get_method("dqo")(batch, ridge=0.0)
    with pytest.raises(ValueError, match="ridge must be"):
        get_method("dqo")(batch, ridge=-1.0)
    with pytest.raises(ValueError, match="alpha must be a finite number"):
        get_method("dqo")(batch, alpha=float("nan"))


def test_dra_grpo_bad_input():
    opposite = t([[[1.0, 0.0], [-1.0, 0.0], [-1.0, 0.1]]])
    batch = GroupBatch(torch.ones(1, 3), embeddings=opposite)
    with pytest.raises(ValueError, match=r"denominator .* <= 0 .* use clamp=True"):
        get_method("dra_grpo")(batch)
    assert torch.isfinite(get_method("dra_grpo")(batch, clamp=True)).all()
    with pytest.raises(ValueError, match="unknown scope 'prompt'"):
        get_method("dra_grpo")(batch, scope="prompt")


def test_darling_bad_input():
    R = torch.ones(1, 3)
    with pytest.raises(ValueError, match="unknown partition 'answers'"):
        get_method("darling")(GroupBatch(R, answers=["a", "b", "c"]), partition="answers")
    with pytest.raises(ValueError, match="threshold"):
        get_method("darling")(GroupBatch(R, embeddings=DUP3), partition="embedding", threshold=1.5)
    with pytest.raises(ValueError, match=r"partition function.s labels must have shape \(B, G\) = \(1, 3\)"):
        get_method("darling")(GroupBatch(R), partition=lambda b: torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="integer tensor"):
        get_method("darling")(GroupBatch(R), partition=lambda b: torch.zeros(1, 3))
    with pytest.raises(ValueError, match="G=1 is too small"):
        get_method("darling")(GroupBatch(torch.ones(2, 1), answers=["a", "b"]))


def test_diver_bad_input():
    with pytest.raises(ValueError, match=r"group size G .* must be an integer >= 2, got 1"):
        get_method("diver")(GroupBatch(torch.ones(2, 1), texts=["a", "b"]), correct_only=False)
    batch = GroupBatch(torch.ones(1, 2), texts=["a", "b"], correct=torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="lam must be"):
        get_method("diver")(batch, lam=-0.1)
    with pytest.raises(ValueError, match="correct_only must be True or False"):
        get_method("diver")(batch, correct_only="yes")
    with pytest.raises(ValueError, match="unknown smoothing"):
        get_method("diver")(batch, smoothing="nltk")
    with pytest.raises(ValueError, match=r"needs GroupBatch field\(s\) \['correct'\]"):
        get_method("diver")(GroupBatch(torch.ones(1, 2), texts=["a", "b"]))


def test_entropy_bonus_bad_input():
    H = torch.ones(1, 2, 3)
    with pytest.raises(ValueError, match="selects no token"):
        get_method("entropy_bonus")(GroupBatch(torch.zeros(1, 2), token_entropies=H, response_mask=H * 0))
    batch = GroupBatch(torch.zeros(1, 2), token_entropies=H)
    with pytest.raises(ValueError, match="unknown aggregation"):
        get_method("entropy_bonus")(batch, aggregation="sum")
    with pytest.raises(ValueError, match="coef must be"):
        get_method("entropy_bonus")(batch, coef=-1.0)


# ---------------------------------------------------------------------------------------------------------------
# GroupBatch


def test_group_batch_from_rows_is_row_major():
    b = GroupBatch.from_rows(
        torch.arange(6.0),
        3,
        embeddings=torch.arange(12.0).reshape(6, 2),
        correct=[1, 0, 1, 0, 0, 1],
        texts=list("abcdef"),
    )
    assert (b.num_groups, b.group_size) == (2, 3)
    assert b.rewards.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert b.embeddings[1, 0].tolist() == [6.0, 7.0]
    assert b.correct.dtype == torch.bool and b.correct.tolist() == [[True, False, True], [False, False, True]]
    assert b.present() == {"rewards", "embeddings", "correct", "texts"}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rewards": torch.zeros(6)}, r"rewards must have shape \(B, G\)"),
        ({"rewards": torch.zeros(0, 3)}, r"B, G >= 1"),
        ({"rewards": t([[0.0, float("nan")]])}, "rewards contains 1 NaN"),
        ({"rewards": "abc"}, "rewards must be a floating-point tensor"),
        ({"embeddings": torch.zeros(2, 3, 4)}, r"embeddings must have shape \(B, G, d\) = \(2, 2, d >= 1\)"),
        ({"embeddings": torch.full((2, 2, 3), float("inf"))}, "embeddings contains 0 NaN and 12 inf"),
        ({"texts": "abcd"}, "texts must be a sequence of strings, got a bare string"),
        ({"texts": ["a", "b", "c"]}, "texts must hold 4 entries, got 3"),
        ({"texts": ["a", "b", None, "d"]}, r"texts\[2\] is NoneType, not str"),
        ({"answers": ["a", 1, None, "d"]}, r"answers\[1\] is int, not str or None"),
        ({"valid_sets": [{"a"}]}, "valid_sets must be a sequence of 2 collections"),
        ({"valid_sets": ["ab", "cd"]}, "not bare strings"),
        ({"correct": torch.tensor([[0.5, 1.0], [0.0, 1.0]])}, "correct must be a bool mask"),
        ({"correct": torch.ones(2, 3, dtype=torch.bool)}, r"correct must have shape \(B, G\) = \(2, 2\)"),
        ({"token_entropies": torch.ones(2, 2)}, r"token_entropies must have shape \(B, G, T\)"),
        ({"token_logprobs": torch.full((2, 2, 3), float("nan"))}, "token_logprobs contains 12 NaN"),
        ({"token_entropies": torch.ones(2, 2, 3), "response_mask": torch.ones(2, 2, 4)}, "response_mask shape"),
        ({"response_mask": torch.full((2, 2, 3), 2)}, "response_mask must be a bool mask"),
    ],
)
def test_group_batch_refuses_bad_fields(kwargs, match):
    fields = {"rewards": torch.zeros(2, 2), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        GroupBatch(**fields)


def test_from_rows_errors():
    with pytest.raises(ValueError, match="group_size must be an integer >= 1"):
        GroupBatch.from_rows(torch.zeros(6), 0)
    with pytest.raises(ValueError, match="positive multiple of 4"):
        GroupBatch.from_rows(torch.zeros(6), 4)
    with pytest.raises(ValueError, match=r"unknown GroupBatch field\(s\) \[.embedding.\]"):
        GroupBatch.from_rows(torch.zeros(6), 3, embedding=torch.zeros(6, 2))
    with pytest.raises(ValueError, match="embeddings must have N = 6 rows"):
        GroupBatch.from_rows(torch.zeros(6), 3, embeddings=torch.zeros(5, 2))


def test_group_batch_refuses_mixed_devices():
    with pytest.raises(ValueError, match="embeddings is on meta but rewards are on cpu"):
        GroupBatch(torch.zeros(1, 2), embeddings=torch.zeros(1, 2, 3, device="meta"))


def test_group_batch_is_frozen():
    b = GroupBatch(torch.zeros(1, 2))
    with pytest.raises(AttributeError):
        b.rewards = torch.ones(1, 2)
    assert b.replace(texts=["x", "y"]).texts == ("x", "y") and b.texts is None


def test_setpo_names_its_weight_and_its_smallest_group_others_name_none():
    setpo = get_method("setpo")
    assert (setpo.scale, setpo.min_group) == ("lam", 3)
    for name in available_methods():
        if name != "setpo":
            assert get_method(name).scale is None and get_method(name).min_group == 1, name


def test_register_refuses_a_scale_that_is_no_parameter_and_a_bad_min_group():
    def fn(batch, advantages, weight: float = 1.0):
        """A = A_bar + weight."""
        return advantages + weight

    try:
        with pytest.raises(ValueError, match=r"scale 'lam' is not one of its parameters \['weight'\]"):
            register_method("_scale_probe", entry="advantage", needs=(), citation="-", scale="lam")(fn)
        with pytest.raises(ValueError, match="min_group must be an integer >= 1"):
            register_method("_scale_probe", entry="advantage", needs=(), citation="-", min_group=0)
        register_method("_scale_probe", entry="advantage", needs=(), citation="-", scale="weight", min_group=2)(fn)
        assert get_method("_scale_probe").scale == "weight"
    finally:
        registry_module._REGISTRY.pop("_scale_probe", None)


def test_acting_rows_are_the_mask_in_groups_large_enough():
    mask = torch.tensor([[True, True, False], [True, True, True], [False, False, True]])
    batch = GroupBatch(rewards=torch.zeros(3, 3), mask=mask)
    assert torch.equal(batch.acting_rows(3), torch.tensor([[False] * 3, [True] * 3, [False] * 3]))
    assert torch.equal(batch.acting_rows(2), mask & torch.tensor([[True], [True], [False]]))
    assert bool(GroupBatch(rewards=torch.zeros(2, 3)).acting_rows(3).all())
    assert "mask" in batch.present() and "mask" not in GroupBatch(rewards=torch.zeros(2, 3)).present()
