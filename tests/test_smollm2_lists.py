"""The SmolLM2 list-selection experiment's parts: prompts, rewards, answer kernel, GAPO's metrics, contrasts, a run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reproduce import smollm2_lists as sl
from setpo.core import cosine_kernel


def test_test_lists_are_eight_distinct_items_and_never_a_training_list():
    train, test = set(sl.make_lists("train", sl.TRAIN_LISTS)), sl.make_lists("test", 12)
    assert len(train) == sl.TRAIN_LISTS and len(test) == 12 and not train & set(test)
    assert all(len(t) == len(set(t)) == sl.TEST_SIZE for t in test)
    assert all(4 <= len(t) <= 12 for t in train)
    assert not any("red" in t or "green" in t for t in test)  # colours are the prompt's example


def test_validity_reward_reads_the_first_line():
    items = ["pear", "fig", "kiwi"]
    completions = [" fig\nList: x", " Pear.", " apple", "", " kiwi, fig"]
    assert sl.validity_reward(prompts=None, completions=completions, valid_answers=[items] * 5) == [1, 1, 0, 0, 0]


def test_answer_kernel_is_same_answer_or_not():
    E = sl.AnswerOneHot()([" fig\nmore", " Fig.", " pear", " two words", " two words!"])
    K = cosine_kernel(E.double())
    assert K[0, 1] == pytest.approx(1) and K[0, 2] == 0 and K[3, 4] == pytest.approx(1) and K[2, 3] == 0


def _js_uniform_brute(p: list[float], q: list[float]) -> float:
    m = [(a + b) / 2 for a, b in zip(p, q)]
    kl = lambda x, y: sum(a * math.log2(a / b) for a, b in zip(x, y) if a > 0)  # noqa: E731
    return (kl(p, m) + kl(q, m)) / 2


def test_list_metrics_match_a_hand_count():
    items = ("a1", "b2", "c3", "d4")
    answers = ["a1", "a1", "b2", None, "zz", "a1", "c3", "a1"]
    m = sl.list_metrics(answers, items)
    assert m["validity"] == 6 / 8 and m["distinct"] == 3 and m["first_item"] == 4 / 8
    assert m["counts"] == {"a1": 4, "b2": 1, "c3": 1}
    assert m["js_valid"] == pytest.approx(_js_uniform_brute([4 / 6, 1 / 6, 1 / 6, 0], [0.25] * 4))
    assert m["js_all"] == pytest.approx(_js_uniform_brute([4 / 8, 1 / 8, 1 / 8, 0, 2 / 8], [0.25] * 4 + [0]))
    assert sl.list_metrics(["zz", None], items)["js_valid"] == 1.0  # no valid answer: maximal divergence


def _lists(rows: list, arm: str, seed: int, step: int, validity: float, m: int, n_lists: int = 8) -> None:
    """Per-list rows of one model: every list answered validly at rate `validity`, spread evenly over m items."""
    for i in range(n_lists):
        rows.append({"arm": arm, "seed": seed, "step": step, "list": i, "item": sl.INVALID, "count": None,
                     "validity": validity})  # fmt: skip
        rows += [{"arm": arm, "seed": seed, "step": step, "list": i, "item": f"w{j}", "count": 32 * validity / m,
                  "validity": None} for j in range(m)]  # fmt: skip


def _uniformity(m: int) -> float:
    """1 - JS(uniform over m of the 8 items, uniform over 8), independently of the experiment's code."""
    return 1 - _js_uniform_brute([1 / m] * m + [0.0] * (8 - m), [1 / 8] * 8)


def test_contrasts_judge_against_grpos_frontier_and_the_placebo():
    prof = sl.ListsProfile(seeds=6, rl_steps=4, frontier_points=3)
    r, p = f"setpo_r{prof.ratio:g}", f"placebo_r{prof.ratio:g}"
    rows: list = []
    _lists(rows, "start", -1, 0, 0.5, 6)
    for s in range(6):  # GRPO narrows: (0.5, 6 items) -> (0.7, 4) -> (0.9, 2); SetPO keeps 5-6 items at 0.7
        _lists(rows, "grpo", s, 2, 0.7, 4)
        _lists(rows, "grpo", s, 4, 0.9, 2)
        _lists(rows, "gapo", s, 4, 0.9, 2)  # exactly GRPO's end point
        _lists(rows, r, s, 4, 0.7, 5 + s % 2)
        _lists(rows, p, s, 4, 0.9, 2)
    con = sl.contrasts(pd.DataFrame(rows), prof)
    row = lambda claim, metric: con[(con.claim == claim) & (con.metric == metric)].iloc[0]  # noqa: E731
    gap = row(f"{r} lies above GRPO's frontier", "uniformity gap")
    want = np.mean([_uniformity(5 + s % 2) - _uniformity(4) for s in range(6)])  # frontier at 0.7: the checkpoint
    assert gap["mean"] == pytest.approx(want) and gap["verdict"] == "confirmed"
    assert row(f"{r} beats {p}", "uniformity")["verdict"] == "confirmed"
    assert row("gapo lies above GRPO's frontier", "uniformity gap")["verdict"] == "no difference"  # on GRPO's end
    assert row("GRPO raises validity over its start (regime check)", "validity")["verdict"] == "confirmed"
    narrows = row("GRPO narrows: JS over valid answers up from its start", "js_valid")["mean"]
    assert narrows == pytest.approx(_uniformity(6) - _uniformity(2))


def test_one_gapo_lora_run_trains_and_is_evaluated(tmp_path):
    from reproduce.common import RunDir

    prof = sl.PROFILES["smoke"]
    run = RunDir(tmp_path, {"test": 1})
    adapter = sl.stage_rl(run, prof, "gapo", "gapo", 0.0, False, 0)
    assert (adapter / "adapter_model.safetensors").exists()
    m = sl.evaluate(adapter, prof)
    assert len(m["per_list"]) == prof.n_test and 0 <= m["validity"] <= 1
    assert m["validity"] == pytest.approx(np.mean([pl["validity"] for pl in m["per_list"]]))
    assert all(sum(pl["counts"].values()) == round(pl["validity"] * prof.eval_n) for pl in m["per_list"])
