"""Profiles rendered on demand: `--print-config` writes YAML that `--config FILE` reads back to the same profile.

The profiles in reproduce/countdown.py, gapo_lists.py and math_pipeline.py are the only copies (no committed YAML).
"""

from __future__ import annotations

import pytest

import reproduce.__main__ as cli_entry
from reproduce import countdown, gapo_lists, math_pipeline
from reproduce.common import read_config

WHAT = {countdown: "countdown profile", gapo_lists: "gapo_lists config", math_pipeline: "math pipeline"}
CASES = [(mod, name) for mod in WHAT for name in sorted(mod.PROFILES)]


def _printed(mod, argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert mod.main(argv) == 0
    return capsys.readouterr().out


def _body(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.parametrize("mod, name", CASES, ids=[f"{m.NAME}-{n}" for m, n in CASES])
def test_printed_profile_reads_back_as_the_same_profile(mod, name, tmp_path, capsys):
    out = tmp_path / "run"
    text = _printed(mod, ["--profile", name, "--print-config", "--out", str(out)], capsys)
    assert text.startswith(f"# {mod.NAME}: ") and not out.exists()  # rendered, nothing run
    f = tmp_path / f"{name}.yaml"
    f.write_text(text)
    # gapo_lists reads a file on top of --profile: a rendered profile holds every field, so any base gives it back
    other = [p for p in sorted(mod.PROFILES) if p != name][0]
    base = mod.PROFILES[other] if mod is gapo_lists else None
    assert read_config(f, type(mod.PROFILES[name]), WHAT[mod], base) == mod.PROFILES[name]
    again = _printed(mod, ["--profile", other, "--config", str(f), "--print-config"], capsys)
    assert _body(again) == _body(text)


def test_printed_config_has_the_command_line_applied(tmp_path, capsys):
    text = _printed(countdown, ["--profile", "smoke", "--seeds", "3", "--print-config"], capsys)
    f = tmp_path / "c.yaml"
    f.write_text(text)
    cfg = read_config(f, countdown.CountdownProfile, "countdown profile")
    assert cfg.seeds == 3 and cfg.n_train == countdown.PROFILES["smoke"].n_train
    text = _printed(gapo_lists, ["--seeds", "2", "--print-config"], capsys)
    f.write_text(text)
    assert read_config(f, gapo_lists.GapoListsConfig, "gapo_lists config").seeds == (0, 1)


def test_yaml_values_become_the_fields_types(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("seeds: [0, 2]\ntemperature: 7e-1\nn_overrides: {aime24: 8}\n")
    cfg = read_config(f, math_pipeline.MathPipelineConfig, "math pipeline", math_pipeline.PROFILES["quick"])
    assert cfg.seeds == (0, 2) and cfg.temperature == 0.7 and cfg.n_overrides == {"aime24": 8}
    f.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping of math pipeline fields"):
        read_config(f, math_pipeline.MathPipelineConfig, "math pipeline")


def test_quick_refuses_print_config_before_anything_runs(capsys):
    rc = cli_entry.main(["quick", "--print-config"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--print-config" in err


def test_cpu_rl_args_are_groups_of_g_per_step_and_fields_replace_defaults(tmp_path):
    from reproduce.common import CPU_TRL_ARGS, cpu_rl_args
    from setpo.integrations.trl import SetPOConfig

    a = cpu_rl_args(tmp_path / "trl", 3, 4, 5, 16, 1e-3, 7, temperature=0.7, use_cpu=True, setpo_lambda=0.5)
    assert a["per_device_train_batch_size"] == 20 and a["num_generations"] == 5 and a["temperature"] == 0.7
    assert a["seed"] == a["data_seed"] == 7 and a["output_dir"] == str(tmp_path / "trl")
    assert CPU_TRL_ARGS.items() <= a.items()
    cfg = SetPOConfig(**a)
    assert (cfg.max_steps, cfg.learning_rate, cfg.setpo_lambda) == (3, 1e-3, 0.5)
