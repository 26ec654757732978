"""setpo.eval on verl checkpoint folders: which folder is loaded, and the errors that name the merge step."""

from __future__ import annotations

import pytest

from setpo.eval.checkpoint import LATEST, find_actor, main, merged_dir, resolve_model


def _layout(root, step: int = 7):
    ckpt = root / "checkpoints"
    actor = ckpt / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "model_world_size_8_rank_0.pt").write_bytes(b"")
    (actor / "huggingface" / "config.json").write_text("{}")
    (ckpt / f"global_step_{step - 2}").mkdir()  # an older step without actor (max_actor_ckpt_to_keep=1)
    (ckpt / LATEST).write_text(f"{step}\n")
    return actor


def test_plain_model_folders_and_hub_ids_pass_through(tmp_path):
    assert resolve_model("Qwen/Qwen2.5-3B") == "Qwen/Qwen2.5-3B"
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == str(tmp_path) and find_actor(tmp_path) is None


def test_the_latest_step_is_found_from_every_level(tmp_path):
    actor = _layout(tmp_path)
    for path in (tmp_path, tmp_path / "checkpoints", actor.parent, actor):
        assert find_actor(path) == actor
    with pytest.raises(ValueError, match=f"merge it first: .* --local_dir {actor} --target_dir {merged_dir(actor)}"):
        resolve_model(str(tmp_path))
    (actor / "huggingface" / "model.safetensors").write_bytes(b"")  # saved with hf_model in save_contents
    assert resolve_model(str(tmp_path)) == str(actor / "huggingface")
    merged_dir(actor).mkdir()
    (merged_dir(actor) / "model.safetensors").write_bytes(b"")
    assert resolve_model(str(tmp_path)) == str(merged_dir(actor))  # the merge step's output comes first


def test_broken_records_are_named(tmp_path, capsys):
    actor = _layout(tmp_path)
    (tmp_path / "checkpoints" / LATEST).write_text("nine")
    with pytest.raises(ValueError, match="not a step number"):
        find_actor(tmp_path)
    (tmp_path / "checkpoints" / LATEST).write_text("9")
    with pytest.raises(ValueError, match="names step 9"):
        find_actor(tmp_path)
    assert actor.is_dir()
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nothing")])
    assert "holds no verl checkpoint" in capsys.readouterr().err
