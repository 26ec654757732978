"""The verl adapter's pure pieces (no verl import): uid grouping, a method per uid group (SetPO's credits), config,
decoding, the reward function, and the full-scale launch scripts rendered by ``python -m reproduce.scale``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from references import credits_by_uid_reference

import setpo
from setpo.embedders import HashedNgramEmbedder, embed_texts
from setpo.integrations.verl import (
    SetPOVerlConfig,
    credit_metrics,
    group_rows_by_uid,
    method_by_uid,
    session_final_rows,
)
from setpo.integrations.verl.embedding import decode_responses, embedder_from_config, release_cached_memory
from setpo.integrations.verl.reward import compute_score

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_package_does_not_import_verl():
    code = "import sys, setpo.integrations.verl as v, setpo.integrations.verl.reward; print('verl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- grouping


def test_group_rows_by_uid_first_appearance_order_and_inactive_rows():
    uids = np.array(["b", "a", "b", "c", "a", "b"], dtype=object)
    groups = group_rows_by_uid(uids, active=np.array([True, True, True, True, False, True]))
    assert [g.tolist() for g in groups] == [[0, 2, 5], [1], [3]]
    with pytest.raises(ValueError, match="no uid"):
        group_rows_by_uid(["a", None])
    with pytest.raises(ValueError, match="boolean array"):
        group_rows_by_uid(["a", "b"], active=[1, 0])


def test_session_final_rows_mirrors_verl_multi_trajectory_keys():
    keys = ["p_a_0_0", "p_a_0_1", "p_a_1_0", "q_0_2", "q_0_0", "q_0_1"]
    final, row_to_session = session_final_rows(keys)
    assert final.tolist() == [1, 2, 3]
    assert row_to_session.tolist() == [0, 0, 1, 2, 2, 2]
    with pytest.raises(ValueError, match="not of the form"):
        session_final_rows(["no-index"])


# ----------------------------------------------------------------------------- credits


@st.composite
def grouped_rollouts(draw):
    sizes = draw(st.lists(st.integers(1, 7), min_size=1, max_size=5))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    emb = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    if n > 2 and draw(st.booleans()):
        emb[2] = emb[0]  # duplicate
    if n > 3 and draw(st.booleans()):
        emb[3] = 0.0  # an empty output embedded as the zero vector
    uids = np.array([f"u{g}" for g, k in enumerate(sizes) for _ in range(k)], dtype=object)
    perm = torch.randperm(n, generator=gen).numpy()
    active = np.array([draw(st.integers(0, 4)) > 0 for _ in range(n)], dtype=bool)  # ~1 in 5 rows is padding
    return emb[perm], uids[perm], active


def credits_by_uid(emb, uids, small_group: str = "zero", active=None) -> torch.Tensor:
    """SetPO's credits as the hook computes them: ``method_by_uid`` at unit weight on A_bar = 0, real rows only."""
    uids = list(uids)
    rows = [i for i in range(len(uids)) if active is None or active[i]]
    cfg = SetPOVerlConfig(small_group=small_group)
    params = {**cfg.method_params, "lam": 1.0}
    zeros = torch.zeros(len(rows), dtype=torch.float64)
    values, acting = method_by_uid(cfg, [uids[i] for i in rows], zeros, None, lambda _: emb[rows], zeros, params)
    out = torch.zeros(len(uids), dtype=torch.float64)
    out[torch.as_tensor(rows, dtype=torch.long)] = values
    assert bool((values[~acting] == 0).all())
    return out


@given(grouped_rollouts())
def test_setpo_by_uid_matches_the_brute_force_reference(case):
    emb, uids, active = case
    fast = credits_by_uid(emb, uids, active=active)
    ref = credits_by_uid_reference(emb, uids, active=active)
    torch.testing.assert_close(fast, ref, rtol=0, atol=1e-12)


def test_one_group_equals_the_core_functions():
    emb = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = credits_by_uid(emb, ["x"] * 6)
    torch.testing.assert_close(got, setpo.loo_credits(setpo.cosine_kernel(emb)), rtol=0, atol=1e-14)


def test_credits_are_permutation_equivariant_and_groups_independent():
    gen = torch.Generator().manual_seed(1)
    emb = torch.randn(9, 3, dtype=torch.float64, generator=gen)
    uids = np.array(["a"] * 4 + ["b"] * 5, dtype=object)
    base = credits_by_uid(emb, uids)
    perm = torch.randperm(9, generator=gen).numpy()
    torch.testing.assert_close(credits_by_uid(emb[perm], uids[perm]), base[perm], rtol=0, atol=1e-14)
    alone = credits_by_uid(emb[:4], uids[:4])
    torch.testing.assert_close(base[:4], alone, rtol=0, atol=1e-14)


def test_small_groups_and_inactive_rows():
    emb = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    uids = ["a", "a", "b", "b", "b", "c", "b"]
    s = credits_by_uid(emb, uids)
    assert s[[0, 1, 5]].abs().sum() == 0 and s[[2, 3, 4, 6]].abs().sum() > 0
    with pytest.raises(ValueError, match="uid group 'a' has 2 rollout.*at least 3"):
        credits_by_uid(emb, uids, small_group="raise")
    active = np.array([True, True, True, True, False, True, True])
    s2 = credits_by_uid(emb, uids, active=active)
    assert s2[4] == 0
    torch.testing.assert_close(s2[[2, 3, 6]], credits_by_uid(emb[[2, 3, 6]], ["b"] * 3), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="small_group"):
        SetPOVerlConfig(small_group="drop")


def test_a_group_of_no_acting_row_keeps_its_values():
    cfg = SetPOVerlConfig(method="passk", method_kwargs={"k": 2})
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0])
    base = torch.tensor([0.5, -0.5, 0.7, -0.2, -0.5], dtype=torch.float64)
    values, acting = method_by_uid(cfg, ["a", "a", "b", "b", "b"], scores, None, None, base)
    assert acting.all()  # pass@k acts on groups of any size
    values, acting = method_by_uid(SetPOVerlConfig(), ["a", "a", "b", "b", "c"], scores, None, None, base)
    assert not acting.any() and torch.equal(values, base)  # no group of 3: SetPO embeds nothing and keeps A_bar


def test_credit_metrics_over_scored_groups_only():
    s = torch.tensor([0.5, -0.5, 0.1, 9.0, 9.0], dtype=torch.float64)
    m = credit_metrics(s, [np.array([0, 1, 2]), np.array([3, 4])])
    assert m["setpo/num_groups"] == 2 and m["setpo/num_small_groups"] == 1
    assert m["setpo/credit_max"] == 0.5 and m["setpo/credit_min"] == -0.5


# ----------------------------------------------------------------------------- config


def test_config_from_the_hydra_section():
    cfg = SetPOVerlConfig.from_mapping({"lambda": 0.2, "embedder": "hashed", "embed_device": "cpu"})
    assert cfg.lam == 0.2 and cfg.embedder == "hashed"
    for bad, match in [
        ({"lamda": 0.1}, "unknown key"),
        ({"lambda": -1}, "lambda"),
        ({"lambda": float("nan")}, "lambda"),
        ({"embed_device": "tpu"}, "embed_device"),
        ({"shaping": "nope"}, "nope"),
        ({"small_group": "drop"}, "small_group"),
        ({"lambda": 0.1, "lam": 0.1}, "not both"),
        ({"embed_dtype": "float8"}, "embed_dtype"),
        ({"method": "passk", "lambda": 0.5}, r"setpo.lambda=0.5 is a parameter of setpo.method=setpo"),
        ({"method": "dqo", "shaping": "linear"}, r"setpo.shaping='linear' is a parameter of setpo.method=setpo"),
        ({"lambda": 0.1, "method_kwargs": {"lam": 0.2}}, "give the same parameter"),
        ({"method": "dqo", "placebo": True}, "changes the scores before it"),
    ]:
        with pytest.raises(ValueError, match=match):
            SetPOVerlConfig.from_mapping(bad)


def test_overrides_round_trip():
    cfg = SetPOVerlConfig(lam=0.1, embedder="minilm", embedder_kwargs={"batch_size": 8})
    parsed: dict = {}
    for o in cfg.as_overrides():
        key, value = o.removeprefix("+setpo.").split("=", 1)
        target = parsed
        *parents, leaf = key.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = {"true": True, "false": False}.get(value, value)
    parsed["lambda"] = float(parsed["lambda"])
    parsed["embedder_kwargs"] = {k: int(v) for k, v in parsed["embedder_kwargs"].items()}
    assert SetPOVerlConfig.from_mapping(parsed) == cfg


def test_controls_and_setpo_parameters_by_method():
    assert SetPOVerlConfig().method_params == {
        "lam": 0.05,
        "shaping": "neglog1p",
        "clamp": True,
        "on_small_group": "raise",
    }
    assert SetPOVerlConfig.from_mapping({"lambda": 0.2}).method_params["lam"] == 0.2
    assert SetPOVerlConfig(method_kwargs={"lam": 0.3}).method_params["lam"] == 0.3
    passk = SetPOVerlConfig(method="passk", method_kwargs={"k": 2}, placebo=True, target_ratio=0.1)
    assert passk.enabled and passk.placebo  # the controls act on pass@k's term too
    assert not any("lambda" in o for o in SetPOVerlConfig().as_overrides())  # unset: the method's default


# ----------------------------------------------------------------------------- decoding and embedding


class _Tok:
    def batch_decode(self, ids, skip_special_tokens=True):
        return ["".join(chr(96 + i) for i in row) for row in ids]


def test_decode_uses_each_row_length():
    responses = torch.tensor([[1, 2, 3, 0], [4, 4, 0, 0], [5, 0, 0, 0]])
    assert decode_responses(_Tok(), responses, [3, 2, 0]) == ["abc", "dd", ""]
    with pytest.raises(ValueError, match="lengths"):
        decode_responses(_Tok(), responses, [3, 2])
    with pytest.raises(ValueError, match="lie in"):
        decode_responses(_Tok(), responses, [3, 2, 9])


def test_embedder_from_config_and_embed_texts():
    emb = embedder_from_config(SetPOVerlConfig(embedder="hashed"))
    assert isinstance(emb, HashedNgramEmbedder)  # model-free: no dtype to pin
    e = embed_texts(emb, ["a b", "a b", "zzz"])
    assert e.shape[0] == 3 and torch.equal(e[0], e[1])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            embedder_from_config(SetPOVerlConfig(embedder="hashed", embed_device="cuda"))


# ----------------------------------------------------------------------------- reward


def test_reward_dispatch_countdown_and_math():
    truth = {"target": 24, "numbers": np.array([4, 6, 1])}
    assert compute_score("countdown", "<answer>4*6*1</answer>", truth) == 1.0
    assert compute_score("countdown", "<answer>4*6</answer>", truth) == pytest.approx(0.1)
    assert compute_score("countdown", "no tags", truth) == 0.0
    with pytest.raises(ValueError, match="target"):
        compute_score("countdown", "<answer>1</answer>", 24)
    assert compute_score("gsm8k", "so the answer is \\boxed{18}", "18") == 1.0
    assert compute_score("math500", "\\boxed{\\frac{1}{2}}", "0.5") == 1.0
    assert compute_score("gsm8k", "\\boxed{17}", "18") == 0.0


# ----------------------------------------------------------------------------- launch scripts


def test_every_rendered_launch_script_parses():
    from reproduce.scale.__main__ import script_text
    from reproduce.scale.settings import SETTINGS

    for s in SETTINGS.values():
        out = subprocess.run(["bash", "-n"], input=script_text(s), capture_output=True, text=True)
        assert out.returncode == 0, f"{s.name}: {out.stderr}"


def test_the_docs_show_the_script_as_rendered():
    from reproduce.scale.__main__ import script_text
    from reproduce.scale.settings import setting

    assert "```bash\n" + script_text(setting("table4_grpo_1.5b")) + "```" in (ROOT / "docs" / "scale.md").read_text()


def _scale(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reproduce.scale", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


def test_the_cli_prints_a_script_and_lists_every_run():
    from reproduce.scale.__main__ import script_text
    from reproduce.scale.settings import SETTINGS

    out = _scale("table5_gspo_7b", "--baseline", "--print")
    assert out.returncode == 0, out.stderr
    assert out.stdout == script_text(SETTINGS["table5_gspo_math7b"])
    assert "-m verl.trainer.main_ppo" in out.stdout and "+setpo.lambda" not in out.stdout
    assert '"+setpo.lambda=0.1"' in _scale("table5_gspo_7b", "--print").stdout
    listing = _scale()
    assert listing.returncode == 0, listing.stderr
    rows = [line.split(",") for line in listing.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 1 + len(SETTINGS) and rows[0][:3] == ["run", "arm", "name"]
    assert ["table7_grpo_32b", "setpo", "table7_setpo_grpo_qwen32b"] == rows[14][:3]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("table9", "--print"), "unknown paper run 'table9'; use one of .*'table4_grpo_1.5b'"),
        (("gapo_qwen2.5_7b_lora", "--print"), "'gapo_qwen2.5_7b_lora' has no verl launch setting"),
        (("table4_grpo_1.5b",), "choose one of --print, --run, --trl-yaml or --check"),
        (("--print",), "NAME is required"),
        (("table4_grpo_1.5b", "--print", "trainer.logger=[console]"), "only passed on with --run"),
    ],
)
def test_the_cli_names_bad_requests(args, match):
    out = _scale(*args)
    assert out.returncode == 2 and re.search(match, out.stderr), out.stderr


def test_run_executes_the_script_with_the_python_it_is_given(tmp_path):
    """--run through a fake interpreter (PYTHON): every seed gets the overrides, paths expanded, extras last."""
    fake = tmp_path / "fake_python"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$CALLS.$(date +%s%N)"\necho trained\n')
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "DATA_DIR": str(tmp_path / "data"), "OUT_DIR": str(tmp_path / "out")}
    env |= {"SEEDS": "1 2", "CALLS": str(tmp_path / "call")}
    out = _scale("table8_countdown_g3", "--run", "trainer.logger=[console,wandb]", env=env)
    assert out.returncode == 0, out.stderr
    calls = [p.read_text().splitlines() for p in sorted(tmp_path.glob("call.*"))]
    assert len(calls) == 2
    for seed, args in zip((1, 2), calls):
        assert args[:2] == ["-m", "setpo.integrations.verl"] and args[-1] == "trainer.logger=[console,wandb]"
        assert f"data.train_files=[{tmp_path}/data/countdown/train.parquet]" in args
        assert f"trainer.experiment_name=table8_setpo_grpo_countdown_g3_kl0.001_seed{seed}" in args
        assert "+setpo.lambda=0.5" in args and "data.train_max_samples=86400" in args
        log = tmp_path / "out" / "table8_setpo_grpo_countdown_g3_kl0.001" / f"seed{seed}" / "train.log"
        assert log.read_text() == "trained\n"
    env.pop("DATA_DIR")
    out = _scale("table8_countdown_g3", "--baseline", "--run", env=env)
    assert out.returncode != 0 and "--run needs DATA_DIR" in out.stderr


def test_settings_cover_every_paper_run_with_its_hyperparameters():
    from reproduce.scale.settings import SEEDS, SETTINGS, estimate

    assert SEEDS == (1, 2, 3, 4, 5)
    runs = {(s.table, s.base, s.model, s.n, s.kl, s.lam is not None) for s in SETTINGS.values()}
    assert len(runs) == len(SETTINGS) == 22
    t6 = SETTINGS["table6_setpo_dapo_math7b"]
    t6_values = (t6.clip_low, t6.clip_high, t6.lam, t6.lr, t6.batch, t6.n, t6.temperature)
    assert t6_values == (0.2, 0.28, 0.2, 1e-6, 64, 6, 0.9)
    t5 = SETTINGS["table5_setpo_gspo_math1.5b"]
    assert (t5.clip_low, t5.clip_high, t5.lam, t5.max_response, t5.epochs) == (3e-4, 4e-4, 0.1, 756, 2)
    t7 = SETTINGS["table7_setpo_grpo_qwen32b"]
    assert (t7.batch, t7.mini_batch, t7.kl, t7.epochs, t7.max_response, t7.lam) == (1024, 256, 1e-3, 15, 4096, 0.1)
    t8 = [s for s in SETTINGS.values() if s.table == 8]
    assert {(s.n, s.kl) for s in t8} == {(3, 1e-3), (7, 1e-3), (3, 5e-3), (7, 5e-3)}
    assert all(s.lam in (None, 0.5) and s.max_response == 2048 and s.batch == 128 for s in t8)
    for name, s in SETTINGS.items():
        e = estimate(s)
        assert e.steps > 0 and e.gpu_hours_per_seed > 0
        if s.lam is not None:
            base = SETTINGS[name.replace("setpo_", "")]
            assert estimate(base).gpu_hours_per_seed < e.gpu_hours_per_seed


def test_the_embedder_is_needed_for_the_credit_or_a_method_that_reads_embeddings():
    assert SetPOVerlConfig(lam=0.1).needs_embedder and SetPOVerlConfig(lam=0.0, target_ratio=0.1).needs_embedder
    assert not SetPOVerlConfig(lam=0.0).needs_embedder
    assert SetPOVerlConfig(method="dqo").needs_embedder  # DQO's kernel comes from embeddings
    assert not SetPOVerlConfig(method="passk").needs_embedder  # correctness only


class _FakeCuda:
    def __init__(self):
        self.emptied = 0

    def is_available(self):
        return True

    def empty_cache(self):
        self.emptied += 1


def test_cached_cuda_memory_is_released_only_on_a_cuda_device(monkeypatch):
    fake = _FakeCuda()
    monkeypatch.setattr(torch, "cuda", fake)
    assert release_cached_memory("cuda") and fake.emptied == 1
    assert release_cached_memory(torch.device("cuda", 0)) and fake.emptied == 2
    assert not release_cached_memory("cpu") and fake.emptied == 2


def test_the_embedder_dtype_is_pinned(monkeypatch):
    import setpo.integrations.verl.embedding as embedding

    built = {}
    monkeypatch.setattr(embedding, "embedder_accepts", lambda spec, names: True)
    monkeypatch.setattr(embedding, "build_embedder", lambda spec, **kw: built.update(kw) or "embedder")
    monkeypatch.setattr(torch, "cuda", _FakeCuda())
    embedding.embedder_from_config(SetPOVerlConfig(embedder="m", embed_device="cuda", embed_dtype="bfloat16"))
    assert built["model_kwargs"] == {"dtype": torch.bfloat16} and built["device"] == "cuda"
    embedding.embedder_from_config(SetPOVerlConfig(embedder="m", embed_device="cpu", embed_dtype="bfloat16"))
    assert built["model_kwargs"] == {"dtype": torch.float32}  # the CPU embedder runs float32
    kw = {"model_kwargs": {"dtype": torch.float16, "attn_implementation": "sdpa"}}
    embedding.embedder_from_config(SetPOVerlConfig(embedder="m", embed_device="cuda", embedder_kwargs=kw))
    assert built["model_kwargs"] == kw["model_kwargs"]  # given explicitly: kept
