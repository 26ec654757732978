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
    "gapo_qwen2.5_7b_lora": ("518a19d69945cd76", "a371e65f53780896"),
}

# verl setting -> (hash of overrides(s, "$DATA_DIR", "$SEED", "$RUN"), hash of the launch script after its header)
SETTING_HASHES = {
    "table4_grpo_math1.5b": ("2ec152a678e0aed4", "971e2b7b19c8a00f"),
    "table4_setpo_grpo_math1.5b": ("a1e5701960dafce7", "acc093d89d2e3b2d"),
    "table5_gspo_math1.5b": ("2cd09b6769c9621f", "7e12d606ed6cee6a"),
    "table5_setpo_gspo_math1.5b": ("785acc9835d86386", "0b42ff89611faeac"),
    "table6_dapo_math1.5b": ("55f1fc096a9b8fc1", "2836f7dc3bb35762"),
    "table6_setpo_dapo_math1.5b": ("f087bb04f17f6700", "a0bc88dabac106bf"),
    "table4_grpo_math7b": ("00c63e70abc78b19", "d0e3932867aebb67"),
    "table4_setpo_grpo_math7b": ("f0a61407a2fdb479", "925d2005aba6f537"),
    "table5_gspo_math7b": ("1e7acc34274628c9", "1e60a634f4231a35"),
    "table5_setpo_gspo_math7b": ("68e3b944cb028c16", "8c66c47f7e434f1e"),
    "table6_dapo_math7b": ("726eb6ae15205af0", "0d3653d156cf41e7"),
    "table6_setpo_dapo_math7b": ("4f6375a827e9e713", "9d9c3011d284977a"),
    "table7_grpo_qwen32b": ("ec31a4ba909fece0", "0c74943382798217"),
    "table7_setpo_grpo_qwen32b": ("4a01123a6b520737", "df8bc16f5d01a64e"),
    "table8_grpo_countdown_g3_kl0.001": ("a013c71a1c9646fa", "d033588f4532e4f6"),
    "table8_setpo_grpo_countdown_g3_kl0.001": ("39307a4303a78305", "8a2c678c9e6756ad"),
    "table8_grpo_countdown_g3_kl0.005": ("7388a1736b0361fb", "f38f96ae3e035a83"),
    "table8_setpo_grpo_countdown_g3_kl0.005": ("7e4059d778950baa", "edb52b719d64d70b"),
    "table8_grpo_countdown_g7_kl0.001": ("5f7ebdf76f9c04f7", "f1499b5a54ec064e"),
    "table8_setpo_grpo_countdown_g7_kl0.001": ("79a265b019a2e992", "7e96c9c21eefdb82"),
    "table8_grpo_countdown_g7_kl0.005": ("15dc3e3a857efab4", "9f5589a39755f4eb"),
    "table8_setpo_grpo_countdown_g7_kl0.005": ("eda33eb30c6bb5b7", "2fc2ba94bf7d7ebc"),
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
        "learning_rate": 1e-5, "beta": 0.0, "num_generations": 32, "generation_batch_size": 256, "setpo_lambda": 0.0
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
        (dict(base="ppo"), "base must be one of"),
        (dict(dataset="mnist"), "unknown dataset 'mnist'"),
        (dict(lr=-1e-6), "lr must be a finite number >= 0"),
        (dict(kl=float("nan")), "kl must be a finite number"),
        (dict(epochs=0), "epochs must be an integer >= 1"),
        (dict(group_size=2.5), "group_size must be an integer"),
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
