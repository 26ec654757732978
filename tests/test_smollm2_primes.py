"""The SmolLM2 primes experiment's parts: reward, answer kernel, prompts, evaluation and one LoRA RL run."""

from __future__ import annotations

import json

import pytest
import torch

from reproduce import smollm2_primes as sp
from reproduce.common import RunDir
from reproduce.tasks import primes
from reproduce.tasks import smollm2 as smollm2_task
from setpo.core import cosine_kernel


def test_reward_takes_the_first_integer_and_needs_a_prime_inside():
    assert primes.primes_reward(["13.", "15", "11 and 13", "none", "7"], [10] * 5, [20] * 5) == [
        1.0,
        0.0,
        1.0,
        0.0,
        0.0,
    ]
    assert primes.valid_answer("31", 0, 31) is None and primes.valid_answer("29", 0, 31) == 29  # strictly inside
    brute = [x for x in range(200) if x > 1 and all(x % d for d in range(2, x))]
    assert [x for x in range(200) if primes.is_prime(x)] == brute


def test_answer_kernel_is_same_answer_or_not():
    E = primes.AnswerOneHot()(["13.", "13 is prime", "17", "no number", "no number"])
    K = cosine_kernel(E.double())
    assert K[0, 1] == pytest.approx(1) and K[0, 2] == 0 and K[3, 4] == pytest.approx(1) and K[2, 3] == 0


def test_no_test_prompt_is_a_training_prompt():
    train, test = set(primes.windows("train", 12)), set(primes.windows("test", 12))
    assert len(test) == 12 and not train & test


def test_one_placebo_lora_run_trains_and_logs(tmp_path):
    prof = sp.PROFILES["smoke"]
    run = RunDir(tmp_path, {"test": 1})
    adapter = smollm2_task.stage_rl(run, prof, "placebo_r0.3", 0.3, True, 3, 0)
    log = json.loads((tmp_path / "steps" / "rl_placebo_r0.3_g3_s0.json").read_text())["log"]
    assert log[0]["setpo/placebo"] == 1.0 and "setpo/lambda" in log[0]
    from safetensors.torch import load_file

    weights = load_file(adapter / "adapter_model.safetensors")
    assert sum("lora_A" in k for k in weights) == sum("lora_B" in k for k in weights) == 4 * 30  # q,k,v,o x 30 layers
    metrics = smollm2_task.evaluate(adapter, prof)["T1_p1"]
    assert len(metrics["n_correct"]) == prof.n_test and all(0 <= c <= prof.eval_n for c in metrics["n_correct"])
    assert metrics["pass@k"]["1"] == pytest.approx(sum(metrics["n_correct"]) / (prof.n_test * prof.eval_n))
    assert torch.is_tensor(torch.tensor(metrics["n_distinct"]))
