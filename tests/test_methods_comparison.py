"""The methods comparison: each arm's SetPOConfig, the contrasts and table on a synthetic frame with known answers,
Holm's adjustment, and one smoke run end to end (GRPO + DARLING + DRA-GRPO)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from reproduce import comparison as cmp
from reproduce import methods_comparison as mc
from reproduce.common import RunDir
from reproduce.stats import frontier_at, holm_adjust
from setpo.integrations.trl import SetPOConfig
from setpo.metrics import pass_at_k

CALIBRATION = {"diver": {"params": {"lam": 1.0, "correct_only": True, "tokenization": "char"}},
               "dqo": {"params": {"alpha": 1.3, "ridge": 1.0}}, "entropy": {"params": {"coef": 0.1}}}  # fmt: skip
CALIBRATED = {a.name: a for a in cmp.calibrated_arms(list(cmp.ARMS), CALIBRATION)}


def _config(arm: cmp.Arm, G: int = 7, tmp_path=None) -> SetPOConfig:
    prof = mc.PROFILES["full"]
    return SetPOConfig(**mc.arm_config(prof, arm, G, 3, tmp_path / arm.name))


def test_arms_build_their_setpo_configs(tmp_path):
    expect = {
        "grpo": ("setpo", {}, 1.0, 0.0),
        "setpo_r0.3": ("setpo", {}, 1.0, 0.0),
        "dra_grpo": ("dra_grpo", {"scope": "group", "clamp": True}, 1.0, 0.0),
        "darling": ("darling", {"partition": "answer", "floor": 0.1}, 1.0, 0.0),
        "diver": ("diver", {"lam": 1.0, "correct_only": True, "tokenization": "char"}, 1.0, 0.0),
        "dqo": ("dqo", {"alpha": 1.3, "ridge": 1.0}, 1.0, 0.0),
        "passk": ("passk", {"k": 4}, 1.0, 0.0),
        "entropy": ("entropy_bonus", {"coef": 0.1}, 1.0, 0.1),
        "grpo_t1.3": ("setpo", {}, 1.3, 0.0),
    }
    assert list(cmp.ARMS) == list(expect) and mc.PROFILES["full"].arms == tuple(expect)
    for name, (method, kwargs, temperature, entropy_coef) in expect.items():
        cfg = _config(CALIBRATED[name], tmp_path=tmp_path)
        assert cfg.diversity_method == method, name
        assert (cfg.diversity_method_kwargs or {}) == kwargs, name
        assert (cfg.temperature, cfg.entropy_coef) == (temperature, entropy_coef), name
        # the shared budget: same steps, batch, lr, beta and seeds in every arm
        assert (cfg.max_steps, cfg.per_device_train_batch_size, cfg.num_generations) == (60, 16 * 7, 7), name
        assert (cfg.learning_rate, cfg.beta, cfg.seed, cfg.data_seed) == (3e-4, 0.001, 3, 3), name
        if method != "setpo":
            assert cfg.diversity_correct_threshold == 0.5, name  # 0.1 is Countdown's format score, not correct
    assert not _config(cmp.ARMS["grpo"], tmp_path=tmp_path).method_enabled
    setpo = _config(cmp.ARMS["setpo_r0.3"], tmp_path=tmp_path)
    assert setpo.method_enabled and setpo.setpo_target_ratio == 0.3 and not setpo.setpo_placebo
    needs = {n for n, a in cmp.ARMS.items() if a.embedder}
    assert needs == {"setpo_r0.3", "dra_grpo", "dqo"} and {n for n, a in cmp.ARMS.items() if a.answers} == {"darling"}


def test_profile_refuses_unknown_or_misordered_arms():
    with pytest.raises(ValueError, match="unknown arm"):
        replace(mc.PROFILES["quick"], arms=("grpo", "gapo"))
    with pytest.raises(ValueError, match="start with 'grpo'"):
        replace(mc.PROFILES["quick"], arms=("darling", "grpo"))


def test_commutative_answer_merges_operand_order():
    a = mc.commutative_answer("<answer>(3+4)*5</answer>")
    assert a == mc.commutative_answer("<answer>5*(4+3)</answer>") != mc.commutative_answer("<answer>3+4*5</answer>")
    assert mc.commutative_answer("no tags") is None
    assert mc.commutative_answer("<answer>3+</answer>") == "3+"  # does not parse: kept as written


def test_choose_coefficient_closest_in_ratio_or_where_it_saturates():
    grid = cmp.coefficient_grid()
    assert grid[0] == 0.01 and grid[-1] == 10_000 and len(grid) == 25 and list(grid) == sorted(grid)
    assert cmp.coefficient_grid(1.0)[-1] == 1.0 and cmp.coefficient_grid(0.5)[-2:] == (0.32, 0.5)  # the cap itself
    linear = [(c, 0.1 * c) for c in grid]
    assert cmp.choose_coefficient(linear, 0.3) == (3.2, True)  # 0.32 is closer to 0.3 in ratio than 0.18
    saturating = [(c, 0.2 * c / (1 + c)) for c in grid]  # tops out below 0.2
    coef, reached = cmp.choose_coefficient(saturating, 0.3)
    top = max(r for _, r in saturating)
    assert not reached and 0.2 * coef / (1 + coef) >= 0.9 * top
    assert all(0.2 * c / (1 + c) < 0.9 * top for c in grid if c < coef)
    with pytest.raises(ValueError, match="raise calibration_prompts"):
        cmp.choose_coefficient([(1.0, 0.0), (2.0, float("nan"))], 0.3)


def _calibration_batch():
    """Two groups of 4 with unequal rewards and one with equal rewards; one-hot answers, two of them repeated."""
    from setpo.methods import GroupBatch

    rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0], dtype=torch.float64)
    ids = [0, 0, 1, 2, 3, 4, 4, 5, 6, 6, 6, 7]
    emb = torch.nn.functional.one_hot(torch.tensor(ids), 8).double()
    texts = [f"a{i}" for i in ids]
    return GroupBatch.from_rows(rewards, 4, texts=texts, answers=texts, correct=rewards > 0.5, embeddings=emb)


def test_setpo_size_is_its_term_over_unequal_groups():
    from setpo.core import group_advantages, group_credits

    batch = _calibration_batch()
    base = group_advantages(batch.rewards.reshape(-1), 4).reshape(-1, 4)
    s = group_credits(batch.embeddings, 4)
    lam = 0.3 * base.abs().mean() / s.abs().mean()  # the trainer's rule over all rows
    want = float((lam * s)[:2].abs().mean() / base[:2].abs().mean())  # groups 0 and 1 have unequal rewards
    got = cmp.setpo_size(batch)
    assert got["ratio"] == pytest.approx(want) and got["lambda"] == pytest.approx(float(lam))
    assert got["equal_groups_moved"] == 1.0  # group 2 has equal rewards and unequal answers: SetPO moves it


def test_calibrate_sizes_each_term_near_setpos():
    sizes = cmp.calibrate(_calibration_batch(), ["dqo", "diver", "darling"])
    target = sizes["setpo_r0.3"]["ratio"]
    dqo = sizes["dqo"]
    assert dqo["params"]["ridge"] == 1.0 and dqo["params"]["alpha"] in cmp.coefficient_grid()
    best = min(dqo["scan"], key=lambda cr: abs(np.log(cr[1] / target)) if cr[1] > 0 else np.inf)
    assert dqo["params"]["alpha"] == best[0] and dqo["reached_target"]
    assert dqo["ratio"] == pytest.approx(dict(dqo["scan"])[dqo["params"]["alpha"]])  # sizes at the chosen alpha
    assert sizes["diver"]["params"]["lam"] <= 1.0  # capped: the bonus stays at most the task reward
    assert "scan" not in sizes["darling"] and sizes["darling"]["params"] == cmp.ARMS["darling"].kwargs
    arms = {a.name: a for a in cmp.calibrated_arms(["dqo", "darling"], sizes)}
    assert arms["dqo"].kwargs == dqo["params"] and arms["darling"] == cmp.ARMS["darling"]


def test_calibrate_solves_for_the_entropy_coefficient_with_one_gradient_pass():
    calls = []

    def entropy_ratio(adv):  # ||grad H|| / ||grad L_pg|| at coef 1
        calls.append(adv)
        return 2.0

    sizes = cmp.calibrate(_calibration_batch(), ["entropy"], entropy_ratio)
    target = sizes["setpo_r0.3"]["ratio"]
    assert sizes["entropy"]["params"] == {"coef": float(f"{target / 2.0:.2g}")}
    assert sizes["entropy"]["ratio"] == pytest.approx(2.0 * sizes["entropy"]["params"]["coef"])
    assert sizes["entropy"]["ratio_at_1"] == 2.0 and len(calls) == 1


def test_holm_adjust_known_values():
    assert holm_adjust([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm_adjust([0.3, 0.3]) == pytest.approx([0.6, 0.6])
    assert holm_adjust([0.6, 0.2]) == pytest.approx([0.6, 0.4])  # monotone and capped at 1
    with pytest.raises(ValueError, match="p-values"):
        holm_adjust([0.1, 1.5])


#: per-problem correct counts (of n = 8) with known answers: GRPO narrows its start (pass@4 0.79 -> 0.5), 'darling'
#: keeps pass@4 far above GRPO's frontier on every seed, 'dqo' falls below it on every seed
#: (40 problems: the seeds x problems interval must also exclude 0)
COUNTS = {"start": lambda s: [2, 2, 2, 2] * 10, "grpo": lambda s: [6, 6, 0, 0] * 10,
          "darling": lambda s: [3, 3, 3, 3 + s % 3] * 10, "dqo": lambda s: [1, 1, 1, 1 + s % 2] * 10}  # fmt: skip


def _synthetic(prof):
    """Per-problem counts and timing frames (`COUNTS`; step times 1, 1.5, 2 x (1 + seed) for grpo, darling, dqo)."""
    rows, times = [], []
    for i, c in enumerate(COUNTS["start"](0)):
        rows.append({"arm": "start", "G": 0, "seed": -1, "step": 0, "decoding": "T1_p1", "problem": i,
                     "n": prof.eval_n, "n_correct": c, "n_distinct": min(c, 2)})  # fmt: skip
    for s in range(prof.seeds):
        for arm in ("grpo", "darling", "dqo"):
            for i, c in enumerate(COUNTS[arm](s)):
                rows.append({"arm": arm, "G": 7, "seed": s, "step": prof.rl_steps, "decoding": "T1_p1", "problem": i,
                             "n": prof.eval_n, "n_correct": c, "n_distinct": min(c, 2)})  # fmt: skip
        for arm, t, added in (("grpo", 1.0, np.nan), ("darling", 1.5, 0.125), ("dqo", 2.0, 0.25)):
            times.append({"arm": arm, "G": 7, "seed": s, "step_time_s": t * (1 + s), "added_s": added, "steps": 2,
                          "wall_s": 1.0})  # fmt: skip
    return pd.DataFrame(rows), pd.DataFrame(times)


def _reference(arm: str, s: int, metric: str, n: int = 8) -> float:
    """A model's metric from COUNTS by the library's pass_at_k, independently of the comparison's tables."""
    k = int(metric[5:])
    return float(np.mean([pass_at_k(n, c, k) for c in COUNTS[arm](s)]))


def test_contrasts_and_table_on_a_synthetic_frame(tmp_path):
    prof = replace(mc.PROFILES["full"], seeds=8, arms=("grpo", "darling", "dqo"), eval_n=8)
    df, times = _synthetic(prof)
    con = cmp.comparison(df, times, prof)
    gap = con[con.claim == "lies above GRPO's frontier"].set_index("arm")
    for arm in ("darling", "dqo"):  # the gap against frontier_at through start and GRPO's end, per seed
        want = [_reference(arm, s, "pass@4") - frontier_at([(_reference(a, s, "pass@1"), _reference(a, s, "pass@4"))
                for a in ("start", "grpo")], _reference(arm, s, "pass@1")) for s in range(8)]  # fmt: skip
        assert gap.loc[arm, "mean"] == pytest.approx(np.mean(want))
    assert gap.loc["darling", "verdict"] == "confirmed" and gap.loc["darling", "seeds_up"] == 8
    assert gap.loc["dqo", "mean"] < 0 and gap.loc["dqo", "verdict"] == "refuted"
    assert gap.loc["darling", "p_exact"] == pytest.approx(2 / 256)  # all 8 signs up: 2 of 256 patterns as extreme
    assert gap.loc["darling", "p_holm"] == pytest.approx(2 * 2 / 256)
    cost = con[(con.claim == "minus GRPO end point") & (con.metric == "pass@1")].set_index("arm")
    want = np.mean([_reference("darling", s, "pass@1") - 0.375 for s in range(8)])
    assert cost.loc["darling", "mean"] == pytest.approx(want) and cost.loc["darling", "verdict"] == "-"
    slow = con[con.claim == "step time over GRPO's"].set_index("arm")
    assert slow.loc["dqo", "mean"] == pytest.approx(1.0) and slow.loc["darling", "mean"] == pytest.approx(0.5)
    regime = con[con.arm == "grpo"].iloc[0]
    assert regime["mean"] == pytest.approx(0.5 - _reference("start", 0, "pass@4")) and regime["verdict"] == "refuted"

    run = RunDir(tmp_path / "run", {"t": 1})
    path = cmp.summary_table(run.path, prof, con, times, {"dqo": {"ratio": 0.29}}, "Setting.")
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert rows[0].startswith("| 1 | darling |") and "confirmed" in rows[0] and "| 0.1250 | +50% |" in rows[0]
    assert rows[1].startswith("| 2 | dqo |") and "refuted" in rows[1] and "+100%" in rows[1]
    assert "the start is on the frontier" in text and "dqo 0.29" in text and "GAPO: not applicable" in text
    run.close()

    # a control (a placebo) gets the same contrasts, but stays out of the Holm family and the ranking
    con = cmp.comparison(df, times, prof, controls=("dqo",))
    gap = con[con.claim == "lies above GRPO's frontier"].set_index("arm")
    assert gap.loc["darling", "p_holm"] == pytest.approx(2 / 256) and np.isnan(gap.loc["dqo", "p_holm"])
    run = RunDir(tmp_path / "run2", {"t": 2})
    text = cmp.summary_table(run.path, prof, con, times, {}, "Setting.", controls=("dqo",)).read_text()
    assert "| 1 | darling |" in text and "| control | dqo |" in text and "| 2 |" not in text
    run.close()

    # arms timed in another process than GRPO's get no step-time ratio
    con = cmp.comparison(df, times, prof, timed_with_grpo=("darling",))
    assert set(con[con.claim == "step time over GRPO's"].arm) == {"darling"}
    run = RunDir(tmp_path / "run3", {"t": 3})
    text = cmp.summary_table(run.path, prof, con, times, {}, "Setting.").read_text()
    assert [line for line in text.splitlines() if line.startswith("| 2 | dqo |")][0].endswith("| 0.2500 | - |")
    assert "for arms timed alongside GRPO in one process" in text
    run.close()
    con = cmp.comparison(df, times, prof, timed_with_grpo=())  # runs resumed across calls: no ratio at all
    assert not (con.claim == "step time over GRPO's").any()
    run = RunDir(tmp_path / "run4", {"t": 4})
    text = cmp.summary_table(run.path, prof, con, times, {}, "Setting.").read_text()
    assert "none here" in text and "Setting." in text
    run.close()


def test_step_times_take_each_runs_median_and_the_methods_own_seconds():
    logs = {
        "rl_grpo_g7_s0": [{"step_time": t} for t in (1.0, 1.2, 30.0)],  # one step slowed by other load
        "rl_dqo_g7_s0": [{"step_time": t, "method/dqo/time_s": 0.01 * t} for t in (2.0, 2.2, 2.4)],
        "rl_setpo_r0.3_g7_s0": [{"step_time": 3.0, "setpo/embed_time_s": 0.2, "setpo/credit_time_s": 0.05}] * 3,
    }
    prof = replace(mc.PROFILES["full"], seeds=1, group_sizes=(7,))
    times = cmp.step_times(lambda step: {"log": logs[step], "wall_s": 9.0}, prof, ["grpo", "dqo", "setpo_r0.3"])
    t = times.set_index("arm")
    assert t.loc["grpo", "step_time_s"] == 1.2 and np.isnan(t.loc["grpo", "added_s"])
    assert t.loc["dqo", "added_s"] == pytest.approx(0.022) and t.loc["setpo_r0.3", "added_s"] == pytest.approx(0.25)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("methods")
    assert mc.main(["--profile", "smoke", "--out", str(out)]) == 0
    return out


def test_smoke_run_end_to_end(smoke_run):
    prof = mc.PROFILES["smoke"]
    G = prof.group_sizes[0]
    for seed in range(prof.seeds):
        for name in prof.arms:
            rl = json.loads((smoke_run / "steps" / f"rl_{name}_g{G}_s{seed}.json").read_text())
            assert rl["fields"]["diversity_method"] == cmp.ARMS[name].config_fields()["diversity_method"]
            assert len(rl["log"]) == prof.rl_steps and all("step_time" in h for h in rl["log"])
            if name != "grpo":  # the method ran inside the trainer and changed the advantages it logged
                assert all(f"method/{name}/advantage_delta" in h for h in rl["log"])
    con = pd.read_csv(smoke_run / "contrasts.csv")
    assert set(con[con.claim == "lies above GRPO's frontier"].arm) == {"darling", "dra_grpo"}
    timing = pd.read_csv(smoke_run / "timing.csv")
    assert len(timing) == prof.seeds * len(prof.arms) and (timing.step_time_s > 0).all()
    methods = timing[timing.arm != "grpo"]  # the methods' own seconds are logged; GRPO has none
    assert (methods.added_s > 0).all() and (methods.added_s < methods.step_time_s).all()
    assert timing[timing.arm == "grpo"].added_s.isna().all()
    sizes = json.loads((smoke_run / "term_sizes.json").read_text())
    assert set(sizes) >= {"darling", "dra_grpo"} and sizes["G"] == G and "setpo_r0.3" not in sizes  # none calibrated
    for f in ("methods_frontier.png", "summary.md", "results.csv", "per_problem.csv.gz"):
        assert (smoke_run / f).is_file(), f
    assert (smoke_run / "summary.md").read_text().count("| 1 |") == 1
