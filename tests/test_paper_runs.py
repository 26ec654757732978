"""The paper's runs: the TRL presets and the verl launch settings are pinned to the values they had before both
were derived from one table (hashes of the full values, so any drift in any run fails)."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("trl")

from reproduce.scale.__main__ import estimates_csv, script_text  # noqa: E402
from reproduce.scale.settings import SETTINGS, overrides  # noqa: E402
from setpo.integrations.trl.presets import PRESETS, get_preset, preset_to_yaml  # noqa: E402


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# name -> (hash of every Preset field, hash of its YAML text)
PRESET_HASHES = {
    "table4_grpo_1.5b": ("a4db4c1c8b48df48", "d51097315b0cd4b3"),
    "table5_gspo_1.5b": ("30a1e3c557dea441", "e22c756c4b71c0c8"),
    "table6_dapo_1.5b": ("2ea4bc9963c49187", "f2324a8784b216ac"),
    "table4_grpo_7b": ("cc7260591aee8b41", "c0ebb22757815ab8"),
    "table5_gspo_7b": ("a97a46d465e1f829", "bba8cb5a53b05b3d"),
    "table6_dapo_7b": ("57eba0f93152d42e", "39682bea027cc97b"),
    "table7_grpo_32b": ("10ecd2dc11f134a1", "246355c026f03ed9"),
    "table8_countdown_g3": ("bf8e60cfcfca9373", "2e1066bc3680e6bd"),
    "table8_countdown_g3_kl5e-3": ("25ba3fbd92614b83", "c005343ac68364de"),
    "table8_countdown_g7": ("9f5beb92ffd6ba7b", "317428d253399eed"),
    "table8_countdown_g7_kl5e-3": ("f3f4a8342e0c07d5", "26390c217fae39a9"),
    # re-pinned when GAPO's row became the method diversity_method="gapo" (it was setpo_lambda=0.0, plain GRPO)
    "gapo_qwen2.5_7b_lora": ("d888a63ecf0158c5", "bc28d725c7b56222"),
}

# verl setting -> (hash of overrides(s, "$DATA_DIR", "$SEED", "$RUN"), hash of the launch script after its header).
# Re-pinned when every launch came to keep one actor checkpoint and drop two keys the V1 trainer never reads,
# Table 8 to feed TinyZero's prompts raw, Table 7 to embed 8 responses per batch, and multi-node scripts to
# require an absolute OUT_DIR.
SETTING_HASHES = {
    "table4_grpo_math1.5b": ("a1fe41a12dc1f734", "6c1b64f1054b1755"),
    "table4_setpo_grpo_math1.5b": ("a6ba8411badfab48", "3a1d6e7e5c5211b3"),
    "table5_gspo_math1.5b": ("756d959fdd1705b9", "76e539f17af25d8d"),
    "table5_setpo_gspo_math1.5b": ("b0f7e7b8d1be79da", "7c5ebf63de4ba309"),
    "table6_dapo_math1.5b": ("f1b0ef3375595091", "476b555e5fd5a47f"),
    "table6_setpo_dapo_math1.5b": ("61c0fbb980e42db9", "906127d5fa94ed7f"),
    "table4_grpo_math7b": ("5a16b3e1623d7f9f", "f3ed46bfc950ec18"),
    "table4_setpo_grpo_math7b": ("91fb5879598717cd", "5e4dd233e6aa3a9b"),
    "table5_gspo_math7b": ("0263e59fd78d9281", "c961742b08c33608"),
    "table5_setpo_gspo_math7b": ("4644f60ae2445f50", "ea2163b3deb2f3d3"),
    "table6_dapo_math7b": ("76c6be7b7a105940", "5b894878d2205196"),
    "table6_setpo_dapo_math7b": ("a1515c9cb952a97e", "46f877a630e3f06b"),
    "table7_grpo_qwen32b": ("e7719865c3f3c4fc", "0a31e101692eceaa"),
    "table7_setpo_grpo_qwen32b": ("e142698e8bd6f081", "15843c983e68dcde"),
    "table8_grpo_countdown_g3_kl0.001": ("9773c70461677301", "ad322445e7f7f7f0"),
    "table8_setpo_grpo_countdown_g3_kl0.001": ("2525625cc74beec5", "70ce22cefb2cecef"),
    "table8_grpo_countdown_g3_kl0.005": ("1022bbbc7a7acbdc", "6fa8fef39ae851bf"),
    "table8_setpo_grpo_countdown_g3_kl0.005": ("969b4dce95683c03", "892d8703ac0a521a"),
    "table8_grpo_countdown_g7_kl0.001": ("f2e9f3b118a3d3d7", "1fd7685133e59e7b"),
    "table8_setpo_grpo_countdown_g7_kl0.001": ("99c37148386e6095", "f73f78abd3040e00"),
    "table8_grpo_countdown_g7_kl0.005": ("cff3c62c2488b289", "015cc51b020220e2"),
    "table8_setpo_grpo_countdown_g7_kl0.005": ("f51000ff22a92349", "d4e2a068ee9e7965"),
}


def test_every_trl_preset_keeps_its_values_and_yaml():
    assert sorted(PRESETS) == sorted(PRESET_HASHES)
    for name, (values_hash, yaml_hash) in PRESET_HASHES.items():
        p = get_preset(name)
        fields = json.dumps([p.name, p.source, p.model, p.data, p.values, p.notes, p.extra], sort_keys=True)
        assert (_h(fields), _h(preset_to_yaml(name))) == (values_hash, yaml_hash), name


def test_three_presets_spelled_out():
    common = {"setpo_embedder": "Qwen/Qwen3-Embedding-0.6B", "setpo_kernel_clamp": True, "setpo_shaping": "neglog1p"}
    common |= {"setpo_embed_field": "completion", "scale_rewards": "group"}
    assert get_preset("table6_dapo_7b").values == {
        **common, "learning_rate": 1e-6, "beta": 1e-4, "num_train_epochs": 2, "num_generations": 6,
        "generation_batch_size": 384, "temperature": 0.9, "epsilon": 0.2, "epsilon_high": 0.28,
        "max_completion_length": 756, "setpo_lambda": 0.2, "loss_type": "dapo",
    }  # fmt: skip
    t8 = get_preset("table8_countdown_g7_kl5e-3")
    assert t8.values == {
        **common, "learning_rate": 1e-6, "beta": 5e-3, "num_train_epochs": 1, "num_generations": 7,
        "generation_batch_size": 896, "temperature": 1.0, "epsilon": 0.2, "max_completion_length": 2048,
        "setpo_lambda": 0.5, "loss_type": "grpo",
    }  # fmt: skip
    assert t8.notes.startswith("Clip range not given (TRL default 0.2 kept); max prompt length 512 tokens")
    gapo = get_preset("gapo_qwen2.5_7b_lora")
    assert gapo.values == {
        "learning_rate": 1e-5, "beta": 0.0, "num_generations": 32, "generation_batch_size": 256,
        "diversity_method": "gapo",
    }  # fmt: skip
    assert gapo.extra == {"lora": {"r": 64, "lora_alpha": 32, "lora_dropout": 0.1}}
    for value, kind in ((t8.values["generation_batch_size"], int), (gapo.values["beta"], float)):
        assert type(value) is kind


def test_every_verl_setting_keeps_its_overrides_and_script():
    assert list(SETTINGS) == list(SETTING_HASHES)
    for name, (overrides_hash, body_hash) in SETTING_HASHES.items():
        s = SETTINGS[name]
        assert _h("\n".join(overrides(s, "$DATA_DIR", "$SEED", "$RUN"))) == overrides_hash, name
        assert _h(script_text(s).split("set -euo pipefail\n", 1)[1]) == body_hash, name


def test_gpu_hour_estimates_unchanged():
    """The listing is the former estimates.csv with two leading columns (the run's name and its arm)."""
    lines = estimates_csv().splitlines(keepends=True)
    assert lines[0].startswith("run,arm,name,table,")
    assert _h("".join(line.split(",", 2)[2] for line in lines)) == "77e7cf3fe56be942"


# -- the table itself ------------------------------------------------------------------------------------------


def test_the_table_carries_the_papers_settings():
    """Spec section 4 table: prompts per step, lr, KL, epochs, G, temperature, clip, max response, lambda."""
    from setpo.paper_runs import PAPER_RUNS

    def row(name):
        r = PAPER_RUNS[name]
        return (r.prompts_per_step, r.lr, r.kl, r.epochs, r.group_size, r.temperature, r.clip_low, r.clip_high,
                r.max_response, r.lam)  # fmt: skip

    for size in ("1.5b", "7b"):
        assert row(f"table4_grpo_{size}") == (64, 3e-6, 1e-4, 2, 6, 0.9, 0.2, None, 756, 0.05)
        assert row(f"table5_gspo_{size}") == (64, 1e-6, 1e-4, 2, 6, 0.9, 3e-4, 4e-4, 756, 0.1)
        assert row(f"table6_dapo_{size}") == (64, 1e-6, 1e-4, 2, 6, 0.9, 0.2, 0.28, 756, 0.2)
    assert row("table7_grpo_32b") == (1024, 1e-6, 1e-3, 15, 6, 1.0, 0.2, None, 4096, 0.1)
    assert PAPER_RUNS["table7_grpo_32b"].mini_batch == 256
    for g in (3, 7):
        assert row(f"table8_countdown_g{g}") == (128, 1e-6, 1e-3, 1, g, 1.0, None, None, 2048, 0.5)
        assert row(f"table8_countdown_g{g}_kl5e-3")[2] == 5e-3
        assert PAPER_RUNS[f"table8_countdown_g{g}"].max_prompt == 512
        assert PAPER_RUNS[f"table8_countdown_g{g}"].train_max_samples == 86_400
    assert {r.base for r in PAPER_RUNS.values()} == {"grpo", "gspo", "dapo", None}


def test_unstated_fields_are_none_and_not_translated():
    from setpo.paper_runs import PAPER_RUNS

    gapo = PAPER_RUNS["gapo_qwen2.5_7b_lora"]
    assert (gapo.epochs, gapo.temperature, gapo.max_response, gapo.clip_low, gapo.base) == (None,) * 5
    assert not {"num_train_epochs", "temperature", "max_completion_length", "epsilon", "loss_type"} & set(
        get_preset(gapo.name).values
    )
    assert PAPER_RUNS["table4_grpo_7b"].mini_batch is None and PAPER_RUNS["table4_grpo_7b"].max_prompt is None


def test_paper_lambda_and_embedder_come_from_the_table():
    from setpo.integrations.verl import SetPOVerlConfig
    from setpo.paper_runs import PAPER_EMBEDDER, PAPER_LAMBDA, PAPER_RUNS

    assert SetPOVerlConfig().embedder is PAPER_EMBEDDER  # one constant, no alias
    assert PAPER_EMBEDDER == "Qwen/Qwen3-Embedding-0.6B"
    assert PAPER_LAMBDA == {"grpo": 0.05, "gspo": 0.1, "dapo": 0.2, "grpo_32b": 0.1, "countdown": 0.5}
    for run in PAPER_RUNS.values():
        if run.table is not None:
            family = {4: "grpo", 5: "gspo", 6: "dapo", 7: "grpo_32b", 8: "countdown"}[run.table]
            assert PAPER_LAMBDA[family] == run.lam == get_preset(run.name).values["setpo_lambda"], run.name


def test_a_table_with_two_lambdas_is_refused(monkeypatch):
    import dataclasses

    import setpo.paper_runs as pr

    changed = dataclasses.replace(pr.PAPER_RUNS["table4_grpo_7b"], lam=0.07)
    monkeypatch.setattr(pr, "PAPER_RUNS", {**pr.PAPER_RUNS, changed.name: changed})
    with pytest.raises(ValueError, match=r"Table 4 must have exactly one lambda.*0.05, 0.07"):
        pr._family_lambda(4)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(base="ppo"), "unknown .*: base 'ppo'"),
        (dict(dataset="mnist"), "unknown .*: dataset 'mnist'"),
        (dict(lr=-1e-6), "lr must be"),
        (dict(kl=float("nan")), "kl must be"),
        (dict(epochs=0), "epochs must be"),
        (dict(group_size=2.5), "group_size must be"),
        (dict(clip_low=None, clip_high=0.3), "clip_high is set but clip_low is not"),
    ],
)
def test_bad_rows_are_refused_by_name(change, match):
    import dataclasses

    from setpo.paper_runs import PAPER_RUNS

    with pytest.raises(ValueError, match=match):
        dataclasses.replace(PAPER_RUNS["table6_dapo_7b"], **change)


def test_unknown_run_names_are_named():
    from setpo.paper_runs import get_run

    with pytest.raises(ValueError, match=r"unknown paper run 'table9'.*table4_grpo_1.5b"):
        get_run("table9")


def test_verl_settings_are_the_translation_of_each_setpo_run():
    from reproduce.scale.settings import setting

    s, b = setting("table6_dapo_7b"), setting("table6_dapo_7b", baseline=True)
    assert (s.name, b.name) == ("table6_setpo_dapo_math7b", "table6_dapo_math7b")
    assert (s.lam, b.lam, s.clip_high, s.lr) == (0.2, None, 0.28, 1e-6)
    assert {x.run for x in SETTINGS.values()} == {n for n in PRESETS if not n.startswith("gapo")}
    with pytest.raises(ValueError, match="'gapo_qwen2.5_7b_lora' has no verl launch setting"):
        setting("gapo_qwen2.5_7b_lora")
    with pytest.raises(ValueError, match="unknown paper run 'table4'"):
        setting("table4")


def test_a_verl_run_on_a_model_without_resources_is_named():
    import dataclasses

    from reproduce.scale.settings import to_setting
    from setpo.paper_runs import PAPER_RUNS

    run = dataclasses.replace(PAPER_RUNS["table4_grpo_7b"], model="Qwen/Qwen3-8B")
    with pytest.raises(ValueError, match="model 'Qwen/Qwen3-8B' needs an entry in RESOURCES and PARAMS_B"):
        to_setting(run, setpo=True)
