"""Bad input raises a clear ValueError instead of giving a silent wrong number."""

import numpy as np
import pytest
import references
import torch

import setpo


def test_kernel_values_outside_minus_one_one_are_refused():
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        setpo.loo_credits(torch.full((4, 4), 3.0))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        setpo.set_diversity(torch.full((2, 4, 4), -1.5))
    gram = torch.randn(5, 16)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        setpo.loo_credits(gram @ gram.T)  # an unnormalised Gram matrix is not a similarity kernel
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        setpo.influence(torch.full((3,), 1 / 3, dtype=torch.float64), torch.full((3, 3), 2.0, dtype=torch.float64))


def test_nan_kernel_is_named_as_nan():
    K = torch.eye(4)
    K[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        setpo.loo_credits(K)


def test_shaping_outside_its_domain_is_refused_not_returned_as_inf():
    e = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]])
    K = setpo.cosine_kernel(e, clamp=False)  # a local mass of -1: -log(1 + m) is undefined there
    with pytest.raises(ValueError, match="not finite"):
        setpo.set_diversity(K)
    with pytest.raises(ValueError, match="not finite"):
        setpo.loo_credits(K)


def test_clamp_must_be_a_bool():
    with pytest.raises(ValueError, match="clamp"):
        setpo.cosine_kernel(torch.randn(3, 4), clamp=None)


def test_group_advantages_with_zero_eps_and_tied_rewards_raises():
    with pytest.raises(ValueError, match="tied"):
        setpo.group_advantages(torch.ones(6), 3, eps=0.0)
    out = setpo.group_advantages(torch.tensor([0.0, 1.0, 2.0]), np.int64(3), eps=0.0)
    assert torch.allclose(out, torch.tensor([-1.0, 0.0, 1.0]))


def test_setpo_advantages_checks_base_and_lambda_and_keeps_a_base_dtype_of_32_bits_or_more():
    with pytest.raises(ValueError, match="base_advantages"):
        setpo.setpo_advantages(torch.tensor([float("nan")]), torch.zeros(1), 0.1)
    for bad in (True, "0.5", float("inf"), -0.1):
        with pytest.raises(ValueError, match="lambda"):
            setpo.setpo_advantages(torch.zeros(2), torch.zeros(2), bad)
    out = setpo.setpo_advantages(torch.zeros(2, dtype=torch.float16), torch.ones(2, dtype=torch.float64), 0.5)
    assert out.dtype == torch.float32 and torch.equal(out, torch.full((2,), 0.5))
    out = setpo.setpo_advantages(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float32), 0.5)
    assert out.dtype == torch.float64
    tensor_lambda = setpo.setpo_advantages(torch.zeros(2), torch.ones(2), torch.tensor(0.25))
    assert torch.equal(tensor_lambda, torch.full((2,), 0.25))


def test_gapo_rewards_rejects_malformed_answers_and_options():
    with pytest.raises(ValueError, match="answers"):
        setpo.gapo_rewards("ab", [{"a"}], 2)
    with pytest.raises(ValueError, match="strings"):
        setpo.gapo_rewards(torch.tensor([1, 2]), [{"1"}], 2)
    with pytest.raises(ValueError, match="dtype"):
        setpo.gapo_rewards(["a", "b"], [{"a"}], 2, dtype=torch.int64)
    with pytest.raises(ValueError, match="invalid_reward"):
        setpo.gapo_rewards(["a", "b"], [{"a"}], 2, invalid_reward=float("nan"))
    with pytest.raises(ValueError, match="group_size"):
        setpo.gapo_rewards(["a", "b"], [{"a"}], True)


def test_register_shaping_rejects_bad_entries():
    with pytest.raises(ValueError, match="name"):
        setpo.register_shaping("", torch.exp, torch.exp, torch.exp)
    with pytest.raises(ValueError, match="shaping 'not-callable': g must be callable, got float"):
        setpo.register_shaping("not-callable", 1.0, torch.exp, torch.exp)


def test_influence_mixed_dtypes_are_named():
    with pytest.raises(ValueError, match="dtype"):
        setpo.influence(torch.full((3,), 1 / 3, dtype=torch.float32), torch.eye(3, dtype=torch.float64))


def test_pass_at_k_accepts_values_beyond_int64():
    """n beyond int64 is a valid sample count (issue: n = 1e20 as an int must work): 1 - (1 - 1/n) exactly."""
    assert setpo.pass_at_k(np.uint64(2**63 + 5), 1, 1) == pytest.approx(1 / (2**63 + 5), rel=1e-15)


JUNK = [None, ["a", "b"], [["a", "b"], ["c", "d"]], object(), {"k": 1}, np.array([None, None], dtype=object)]


@pytest.mark.parametrize("junk", JUNK, ids=["None", "strings", "string-matrix", "object", "dict", "object-array"])
@pytest.mark.parametrize("fn", [setpo.local_mass, setpo.set_diversity, setpo.loo_credits, setpo.loo_credits_reference])
def test_non_tensor_kernel_is_a_type_error_naming_the_kernel(fn, junk):
    with pytest.raises(TypeError, match="kernel"):
        fn(junk)


@pytest.mark.parametrize("junk", JUNK, ids=["None", "strings", "string-matrix", "object", "dict", "object-array"])
def test_non_tensor_embeddings_are_a_type_error_naming_the_embeddings(junk):
    with pytest.raises(TypeError, match="embeddings"):
        setpo.cosine_kernel(junk)
    with pytest.raises(TypeError, match="embeddings"):
        setpo.metrics.mean_pairwise_distance(junk)


def test_non_tensor_kernel_refused_by_the_small_group_policy_and_population_functions():
    with pytest.raises(TypeError, match="kernel"):
        setpo.loo_credits(None, on_small_group="zero")
    with pytest.raises(TypeError, match="kernel"):
        setpo.influence(torch.full((3,), 1 / 3), None)
    with pytest.raises(TypeError, match="weights p"):
        setpo.population_diversity(None, torch.eye(3))


def test_bare_strings_are_refused_by_every_text_metric():
    from setpo import metrics
    from setpo.tasks.countdown import diversity as countdown_diversity

    calls = {
        "self_bleu": lambda: metrics.self_bleu("abc"),
        "self_bleu_reference": lambda: references.self_bleu_reference("abc"),
        "unique_at_n": lambda: metrics.unique_at_n("abc"),
        "unique_at_n valid": lambda: metrics.unique_at_n(["a", "b"], valid="ab"),
        "validity_rate": lambda: metrics.validity_rate("abc", ["a"]),
        "validity_rate valid": lambda: metrics.validity_rate(["a"], "abc"),
        "item_distribution": lambda: metrics.item_distribution("abc", ["a", "b"]),
        "item_distribution items": lambda: metrics.item_distribution(["a"], "ab"),
        "js_to_uniform": lambda: metrics.js_to_uniform("abc", ["a", "b"]),
        "mean_pairwise_embedding_distance": lambda: metrics.mean_pairwise_embedding_distance(
            "abc", lambda t: torch.eye(len(t))
        ),
        "distinct_correct": lambda: countdown_diversity.distinct_correct("abc", None),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match="bare string"):
            call()
            pytest.fail(f"{name} accepted a bare string")
    assert metrics.unique_at_n(["abc"]) == 1 and metrics.self_bleu(["a b", "a b"], max_n=2) == pytest.approx(1.0)


# --- no silent number: overflow, 16-bit rewards, non-elementwise shaping, a normaliser returning None ---------------


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_advantages_that_overflow_raise(scale):
    """Finite float32 rewards whose mean or std overflows: a ValueError naming the overflow, never inf or NaN."""
    r = torch.tensor([3e38, 3e38, -3e38, 0.0])
    with pytest.raises(ValueError, match="overflowed torch.float32"):
        setpo.group_advantages(r, 4, scale=scale)
    out = setpo.group_advantages(r.double(), 4, scale=scale)  # the same rewards in float64 are fine
    ref = (r.double() - r.double().mean()) / (1.0 if scale == "none" else r.double().std() + 1e-4)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=0)


def test_setpo_advantages_that_overflow_raise():
    with pytest.raises(ValueError, match="setpo_advantages overflowed torch.float32"):
        setpo.setpo_advantages(torch.tensor([3e38, 0.0]), torch.tensor([3e38, 0.0]), 1.0)
    with pytest.raises(ValueError, match="overflowed torch.float32"):  # float64 credits beyond float32's range
        setpo.setpo_advantages(torch.tensor([0.0]), torch.tensor([1e39], dtype=torch.float64), 1.0)
    assert setpo.setpo_advantages(torch.tensor([3e38]), torch.tensor([3e38], dtype=torch.float64), 0.0).isfinite().all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_rewards_give_float32_advantages_that_keep_small_credits(dtype):
    """16-bit rewards are computed in float32 and returned in float32: the values equal the float32 computation of
    the same (16-bit) rewards, and a credit of 1e-4 survives the sum with lambda = 1 (a bf16 sum would drop it)."""
    r = torch.tensor([0.1, 0.7, 0.3, 0.9, 0.2, 0.4]).to(dtype)
    a = setpo.group_advantages(r, 3)
    assert a.dtype == torch.float32
    torch.testing.assert_close(a, setpo.group_advantages(r.float(), 3), rtol=0, atol=0)
    shaped = setpo.setpo_advantages(a.to(dtype), torch.full((6,), 1e-4), 1.0)
    assert shaped.dtype == torch.float32
    torch.testing.assert_close(shaped - a.to(dtype).float(), torch.full((6,), 1e-4), rtol=1e-3, atol=0)


@pytest.mark.parametrize(
    "g", [lambda x: x - x.mean(), lambda x: torch.softmax(x, -1), lambda x: x.sum(), lambda x: x.cumsum(-1)]
)
def test_a_shaping_that_is_not_elementwise_is_refused(g):
    K = setpo.cosine_kernel(torch.randn(2, 5, 4, dtype=torch.float64))
    for fn in (setpo.loo_credits, setpo.set_diversity):
        with pytest.raises(ValueError, match="elementwise"):
            fn(K, g)


def test_an_elementwise_callable_shaping_still_matches_the_registered_one():
    K = setpo.cosine_kernel(torch.randn(3, 6, 4, dtype=torch.float64))
    own = setpo.loo_credits(K, lambda x: -torch.log1p(x))
    torch.testing.assert_close(own, setpo.loo_credits(K), rtol=0, atol=1e-14)


def test_a_normaliser_returning_none_is_refused():
    """A custom normaliser that returns None would make every answer 'valid' and equal: refused by name."""
    with pytest.raises(ValueError, match="normalize must return a string, got NoneType"):
        setpo.gapo_rewards(["a", "b"], [{"a"}], 2, normalize=lambda t: None)
    from setpo.methods.reward.darling import answer_partition

    with pytest.raises(ValueError, match="normalize must return a string, got NoneType"):
        answer_partition(["a", "b"], 2, normalize=lambda t: None)
    with pytest.raises(ValueError, match="normalize must be callable"):
        setpo.gapo_rewards(["a", "b"], [{"a"}], 2, normalize=None)
    upper = setpo.gapo_rewards(["A", "b"], [{"a"}], 2, normalize=lambda t: (t or "").lower())
    assert upper.tolist() == [1.0, -1.0]
