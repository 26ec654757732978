"""SetPOConfig: validation errors, the paper presets (SetPO Tables 4-8), and their YAML text (rendered on demand)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trl  # noqa: F401  (required: a broken install must fail, not skip)
import yaml

from setpo.integrations.trl import PRESETS, SetPOConfig, available_presets, get_preset, preset_to_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CPU = {"use_cpu": True, "bf16": False, "report_to": "none"}


def make(tmp_path, **kw) -> SetPOConfig:
    return SetPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=4, **CPU, **kw)


def test_defaults_are_the_paper_kernel(tmp_path):
    c = make(tmp_path)
    assert (c.setpo_lambda, c.setpo_shaping, c.setpo_kernel_clamp) == (None, None, None)  # SetPO's own defaults
    assert c.diversity_method == "setpo" and c.setpo_embed_field == "completion" and c.setpo_embedder == "minilm"
    assert c.method_params == {"lam": 0.05, "shaping": "neglog1p", "clamp": True, "on_small_group": "raise"}
    c = make(tmp_path, setpo_lambda=0.2, setpo_shaping="linear", setpo_kernel_clamp=False)
    assert c.method_params == {"lam": 0.2, "shaping": "linear", "clamp": False, "on_small_group": "raise"}


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"setpo_lambda": -0.1}, "setpo_lambda must be"),
        ({"setpo_lambda": float("nan")}, "setpo_lambda must be"),
        ({"setpo_lambda": float("inf")}, "setpo_lambda must be"),
        ({"setpo_lambda": "0.1"}, "setpo_lambda must be"),
        ({"setpo_lambda": True}, "setpo_lambda must be"),
        ({"setpo_shaping": "neglog"}, "unknown setpo_shaping 'neglog'"),
        ({"setpo_embedder": ""}, "setpo_embedder: embedder spec must be a non-empty string"),
        ({"setpo_embedder": None}, "setpo_embedder: embedder spec must be a non-empty string"),
        ({"setpo_embed_field": "prompt"}, "unknown setpo_embed_field 'prompt'"),
        ({"setpo_embedder": "policy", "setpo_embed_field": "prompt+completion"}, "needs a text embedder"),
        ({"setpo_embed_batch_size": 0}, "setpo_embed_batch_size must be an integer >= 1"),
        ({"setpo_embed_max_length": 0}, "setpo_embed_max_length must be None or an integer >= 1"),
        ({"setpo_policy_chunk_tokens": 0}, "setpo_policy_chunk_tokens must be an integer >= 1"),
        ({"setpo_target_ratio": 0.0}, "setpo_target_ratio must be None or a finite number > 0"),
        ({"setpo_target_ratio": -0.1}, "setpo_target_ratio must be None or a finite number > 0"),
        ({"setpo_target_ratio": float("nan")}, "setpo_target_ratio must be None or a finite number > 0"),
        ({"setpo_target_ratio": True}, "setpo_target_ratio must be None or a finite number > 0"),
        ({"setpo_lambda_warmup_steps": -1}, "setpo_lambda_warmup_steps must be an integer >= 0"),
        ({"setpo_lambda_warmup_steps": 2.5}, "setpo_lambda_warmup_steps must be an integer >= 0"),
        ({"setpo_placebo": "yes"}, "setpo_placebo must be True or False"),
    ],
)
def test_bad_setpo_values_raise_clear_errors(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        make(tmp_path, **kw)


@pytest.mark.parametrize("G", [1, 2])
def test_small_groups_are_refused_with_the_reason(tmp_path, G):
    with pytest.raises(ValueError, match=r"num_generations=\d: diversity_method='setpo' acts on groups of at least 3"):
        SetPOConfig(output_dir=str(tmp_path), num_generations=G, per_device_train_batch_size=4, **CPU)


@pytest.mark.parametrize("G", [1, 2])
def test_small_groups_are_fine_without_setpo(tmp_path, G):
    # TRL trains with G = 2 and evaluates with G = 1 or 2; SetPO refuses them only when its credit is on in training.
    c = make(tmp_path, num_generations_eval=G, setpo_lambda=0.5)  # evaluation skips credits where undefined
    assert c.num_generations_eval == G and c.method_enabled
    if G == 1:
        return  # TRL itself refuses one generation per prompt in training
    c = SetPOConfig(output_dir=str(tmp_path), num_generations=G, per_device_train_batch_size=4, setpo_lambda=0, **CPU)
    assert c.num_generations == G and not c.method_enabled
    with pytest.raises(
        ValueError, match=rf"num_generations={G}: diversity_method='setpo' acts on groups of at least 3"
    ):
        SetPOConfig(
            output_dir=str(tmp_path), num_generations=G, per_device_train_batch_size=4, setpo_lambda=0.0,
            setpo_target_ratio=0.1, **CPU,
        )  # fmt: skip


def test_controls_are_accepted(tmp_path):
    c = make(tmp_path, setpo_lambda=0.0, setpo_target_ratio=1, setpo_lambda_warmup_steps=5, setpo_placebo=True)
    assert (c.setpo_target_ratio, c.setpo_lambda_warmup_steps, c.setpo_placebo) == (1.0, 5, True)
    assert isinstance(c.setpo_target_ratio, float) and c.method_enabled
    d = make(tmp_path)
    assert (d.setpo_target_ratio, d.setpo_lambda_warmup_steps, d.setpo_placebo) == (None, 0, False)


def test_embedder_typo_fails_at_config_time_with_the_registered_names(tmp_path):
    with pytest.raises(ValueError, match=r"setpo_embedder: unknown embedder 'hashd'.*'hashed'.*'minilm'.*'policy'"):
        make(tmp_path, setpo_embedder="hashd")
    for bad in ("no such model!", "./missing/folder", "a/b/c"):
        with pytest.raises(ValueError, match="unknown embedder"):
            make(tmp_path, setpo_embedder=bad)
    for good in ("hashed", " Policy ", "minilm", "Qwen/Qwen3-Embedding-0.6B", str(tmp_path)):
        assert make(tmp_path, setpo_embedder=good).setpo_embedder == good


def test_registered_shapings_are_accepted(tmp_path):
    assert make(tmp_path, setpo_shaping="linear").setpo_shaping == "linear"
    assert make(tmp_path, setpo_lambda=0).setpo_lambda == 0.0  # int accepted, stored as float


def test_trl_validation_still_runs(tmp_path):
    # GRPOConfig's own check: the generation batch must hold whole groups.
    with pytest.raises(ValueError, match="divisible by num_generations"):
        SetPOConfig(output_dir=str(tmp_path), num_generations=3, per_device_train_batch_size=4, **CPU)


# -- presets ---------------------------------------------------------------------------------------------------


def test_available_presets_lists_every_table():
    names = available_presets()
    assert names == SetPOConfig.available_presets() == sorted(PRESETS)
    for prefix in ("table4_grpo", "table5_gspo", "table6_dapo", "table7_grpo_32b", "table8_countdown"):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Table 4: GRPO, lr 3e-6, KL 1e-4, G 6, temp 0.9, clip 0.2, 756 tokens, lambda 0.05, batch 64 prompts.
        (
            "table4_grpo_1.5b",
            dict(learning_rate=3e-6, beta=1e-4, num_generations=6, temperature=0.9, epsilon=0.2, epsilon_high=None,
                 max_completion_length=756, setpo_lambda=0.05, loss_type="grpo", importance_sampling_level="token",
                 generation_batch_size=384, num_train_epochs=2),
        ),
        # Table 5: GSPO = sequence-level importance ratio, clip 3e-4 / 4e-4, lr 1e-6, lambda 0.1.
        (
            "table5_gspo_7b",
            dict(learning_rate=1e-6, beta=1e-4, num_generations=6, temperature=0.9, epsilon=3e-4, epsilon_high=4e-4,
                 max_completion_length=756, setpo_lambda=0.1, importance_sampling_level="sequence", loss_type="grpo"),
        ),
        # Table 6: DAPO = token-level loss over the batch + clip-higher 0.28, lambda 0.2.
        (
            "table6_dapo_1.5b",
            dict(learning_rate=1e-6, beta=1e-4, epsilon=0.2, epsilon_high=0.28, loss_type="dapo", setpo_lambda=0.2,
                 importance_sampling_level="token"),
        ),
        # Table 7: 32B, KL 1e-3, 15 epochs, temp 1.0, 4096 tokens, batch 1024 prompts, lambda 0.1.
        (
            "table7_grpo_32b",
            dict(learning_rate=1e-6, beta=1e-3, num_train_epochs=15, temperature=1.0, max_completion_length=4096,
                 generation_batch_size=6144, setpo_lambda=0.1),
        ),
        # Table 8: Countdown, G 3 or 7, KL 1e-3 (also 5e-3), temp 1.0, 2048 tokens, batch 128, lambda 0.5.
        ("table8_countdown_g3", dict(num_generations=3, beta=1e-3, generation_batch_size=384, setpo_lambda=0.5)),
        ("table8_countdown_g7_kl5e-3", dict(num_generations=7, beta=5e-3, generation_batch_size=896, temperature=1.0)),
        # GAPO: its frequency reward is the method (the preset builds as it is, no SetPO field to refuse).
        ("gapo_qwen2.5_7b_lora", dict(diversity_method="gapo", num_generations=32, beta=0.0, learning_rate=1e-5)),
    ],
)  # fmt: skip
def test_presets_carry_the_paper_values(tmp_path, name, expected):
    c = SetPOConfig.from_preset(name, output_dir=str(tmp_path), **CPU)
    for key, value in expected.items():
        got = getattr(c, key)
        assert got == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key


def test_setpo_presets_use_the_paper_embedder_and_kernel():
    for name, p in PRESETS.items():
        if p.values.get("setpo_lambda", 0) > 0:
            assert p.values["setpo_embedder"] == "Qwen/Qwen3-Embedding-0.6B", name
            assert p.values["setpo_shaping"] == "neglog1p" and p.values["setpo_kernel_clamp"] is True, name


def test_preset_overrides_apply_on_top(tmp_path):
    c = SetPOConfig.from_preset("table4_grpo_1.5b", output_dir=str(tmp_path), setpo_lambda=0.0, **CPU)
    assert c.setpo_lambda == 0.0 and c.learning_rate == 3e-6  # the GRPO baseline of the same row
    assert c.output_dir == str(tmp_path)


def test_steps_per_generation_override_replaces_the_generation_batch(tmp_path):
    c = SetPOConfig.from_preset(
        "table4_grpo_1.5b", output_dir=str(tmp_path), steps_per_generation=2, per_device_train_batch_size=6, **CPU
    )
    assert c.steps_per_generation == 2 and c.generation_batch_size == 12


def test_unknown_preset_and_unknown_field_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'table9'.*table4_grpo_1.5b"):
        SetPOConfig.from_preset("table9", output_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"unknown SetPOConfig field\(s\) \['setpo_lamda'\]"):
        SetPOConfig.from_preset("table4_grpo_1.5b", output_dir=str(tmp_path), setpo_lamda=0.1)
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("nope")


def test_preset_keys_are_config_fields():
    fields = {f.name for f in dataclasses.fields(SetPOConfig)}
    for p in PRESETS.values():
        assert set(p.values) <= fields, p.name


# -- YAML text ------------------------------------------------------------------------------------------------


def test_every_preset_yaml_reads_back_as_its_values():
    for name in available_presets():
        text = preset_to_yaml(name)
        assert text.startswith(f"# {name}: {get_preset(name).source}\n"), name
        assert yaml.safe_load(text) == get_preset(name).values, name


def test_from_yaml_equals_from_preset(tmp_path):
    for name in ("table5_gspo_1.5b", "table8_countdown_g7"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(preset_to_yaml(name))
        a = SetPOConfig.from_yaml(path, output_dir=str(tmp_path), **CPU)
        b = SetPOConfig.from_preset(name, output_dir=str(tmp_path), **CPU)
        assert a.to_dict() == b.to_dict()


def test_the_cli_prints_the_preset_yaml():
    args = [sys.executable, "-m", "reproduce.scale", "table8_countdown_g7", "--trl-yaml"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == preset_to_yaml("table8_countdown_g7")
    out = subprocess.run([*args, "--baseline"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "setpo_lambda=0.0" in out.stderr


def test_from_yaml_rejects_non_mapping_and_unknown_keys(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"\(SetPOConfig fields\) must be a mapping"):
        SetPOConfig.from_yaml(bad, output_dir=str(tmp_path))
    bad.write_text("setpo_lambda: 0.1\nnot_a_field: 3\n")
    with pytest.raises(ValueError, match="not_a_field"):
        SetPOConfig.from_yaml(bad, output_dir=str(tmp_path))


def test_from_yaml_reads_values_as_trl_does(tmp_path):
    # YAML 1.1 reads 5e-2 and 1e-6 as strings; TRL's parser turns them into floats through the field types.
    from trl import TrlParser

    path = tmp_path / "c.yaml"
    path.write_text(
        "setpo_lambda: 5e-2\nlearning_rate: 1e-6\nsetpo_target_ratio: 1e-1\nnum_generations: 4\n"
        "per_device_train_batch_size: 4\nsetpo_kernel_clamp: false\nuse_cpu: true\nbf16: false\n"
        "report_to: none\nenv:\n  SETPO_TEST_FROM_YAML: '1'\n"
    )
    c = SetPOConfig.from_yaml(path, output_dir=str(tmp_path))
    assert c.setpo_lambda == 0.05 and c.learning_rate == 1e-6 and c.setpo_target_ratio == 0.1
    assert isinstance(c.learning_rate, float) and c.setpo_kernel_clamp is False
    (trl_c,) = TrlParser(SetPOConfig).parse_args_and_config(["--config", str(path), "--output_dir", str(tmp_path)])
    assert trl_c.to_dict() == c.to_dict()
    import os

    assert os.environ.pop("SETPO_TEST_FROM_YAML") == "1"


def test_from_yaml_names_the_field_of_a_bad_value(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("setpo_lambda: lots\n")
    with pytest.raises(ValueError, match=r"c\.yaml: argument --setpo_lambda.*: invalid float value: 'lots'"):
        SetPOConfig.from_yaml(path, output_dir=str(tmp_path))


def test_command_line_parsing(tmp_path):
    from transformers import HfArgumentParser

    argv = ["--output_dir", str(tmp_path), "--setpo_lambda", "0.3", "--setpo_embedder", "hashed"]
    argv += ["--setpo_kernel_clamp", "False", "--setpo_embed_max_length", "64", "--num_generations", "4"]
    argv += ["--per_device_train_batch_size", "4", "--use_cpu", "True", "--bf16", "False"]
    (c,) = HfArgumentParser(SetPOConfig).parse_args_into_dataclasses(argv)
    assert (c.setpo_lambda, c.setpo_embedder, c.setpo_kernel_clamp, c.setpo_embed_max_length) == (
        0.3,
        "hashed",
        False,
        64,
    )
    with pytest.raises(ValueError, match="setpo_lambda must be"):
        HfArgumentParser(SetPOConfig).parse_args_into_dataclasses(argv + ["--setpo_lambda", "-1"])
    controls = ["--setpo_target_ratio", "0.1", "--setpo_placebo", "True", "--setpo_lambda_warmup_steps", "5"]
    (c,) = HfArgumentParser(SetPOConfig).parse_args_into_dataclasses(argv + controls)
    assert (c.setpo_target_ratio, c.setpo_placebo, c.setpo_lambda_warmup_steps) == (0.1, True, 5)


def test_a_setpo_parameter_under_another_method_is_refused_naming_both_fields(tmp_path):
    # the leak this closes: GAPO with setpo_lambda=0.5 used to train plain GAPO without a word
    with pytest.raises(ValueError, match=r"setpo_lambda=0.5 is a parameter of diversity_method='setpo'.*"
                       r"diversity_method='gapo' does not run"):  # fmt: skip
        make(tmp_path, diversity_method="gapo", setpo_lambda=0.5)
    for field, value in (("setpo_shaping", "linear"), ("setpo_kernel_clamp", False), ("setpo_lambda", 0.0)):
        with pytest.raises(ValueError, match=rf"{field}=.* diversity_method='passk'"):
            make(tmp_path, diversity_method="passk", **{field: value})
    with pytest.raises(ValueError, match=r"setpo_lambda and diversity_method_kwargs\['lam'\] give the same"):
        make(tmp_path, setpo_lambda=0.1, diversity_method_kwargs={"lam": 0.2})
    assert make(tmp_path, diversity_method_kwargs={"lam": 0.2}).method_params["lam"] == 0.2


def test_controls_act_on_any_method_but_not_on_a_loss_term(tmp_path):
    c = make(tmp_path, diversity_method="passk", diversity_method_kwargs={"k": 2}, setpo_placebo=True)
    assert c.method_enabled and c.setpo_placebo
    with pytest.raises(ValueError, match=r"\['setpo_placebo'\] act on the advantage term.*'entropy_bonus'"):
        make(tmp_path, diversity_method="entropy_bonus", diversity_method_kwargs={"coef": 0.01}, setpo_placebo=True)


def test_yaml_with_a_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("setpo_lambda: 0.1\nlearning_rate: 1e-5\nsetpo_lambda: 0.2\n")
    with pytest.raises(ValueError, match=r"key 'setpo_lambda' is given twice \(line 3\)"):
        SetPOConfig.from_yaml(path, output_dir=str(tmp_path))


def test_yaml_env_is_set_only_once_the_config_is_valid(tmp_path, monkeypatch):
    monkeypatch.delenv("SETPO_TEST_ENV", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  SETPO_TEST_ENV: set\nsetpo_lambda: -1\n")
    with pytest.raises(ValueError, match="setpo_lambda must be"):
        SetPOConfig.from_yaml(path, output_dir=str(tmp_path))
    assert "SETPO_TEST_ENV" not in os.environ
