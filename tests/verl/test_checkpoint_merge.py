"""The merge step of docs/scale.md on a verl-layout FSDP checkpoint: verl's own ``verl.model_merger`` writes the
Hugging Face model where ``setpo.eval`` looks for it, and ``setpo.eval`` loads the trained weights from the run
folder."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from setpo.eval.checkpoint import LATEST, find_actor, main, merge_command, merged_dir, resolve_model


def _verl_checkpoint(root, tiny_model_dir: str, step: int = 2):
    """A one-rank FSDP checkpoint in verl 0.9.1's layout (verl/utils/checkpoint/fsdp_checkpoint_manager.py):
    ``model_world_size_1_rank_0.pt``, ``fsdp_config.json``, config + tokenizer in ``huggingface/``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))  # "trained": differs from the model folder's weights
    ckpt = root / "run" / "checkpoints"
    actor = ckpt / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    torch.save(model.state_dict(), actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    for f in (p for p in Path(tiny_model_dir).iterdir() if p.is_file()):
        if not f.name.endswith((".safetensors", ".bin")):
            shutil.copy(f, actor / "huggingface" / f.name)
    (ckpt / LATEST).write_text(str(step))
    return model, actor


def test_merge_step_gives_the_model_setpo_eval_loads(tmp_path, tiny_model_dir, capsys):
    from transformers import AutoModelForCausalLM

    model, actor = _verl_checkpoint(tmp_path, tiny_model_dir)
    run = tmp_path / "run"
    for path in (run, run / "checkpoints", actor.parent, actor):
        assert find_actor(path) == actor
    with pytest.raises(ValueError, match="merge it first: .*verl.model_merger merge --backend fsdp"):
        resolve_model(str(run))
    assert main([str(run), "--merge"]) == 0  # runs merge_command(actor)
    assert capsys.readouterr().out.strip().endswith(str(merged_dir(actor)))
    merged = AutoModelForCausalLM.from_pretrained(resolve_model(str(run)))
    want = model.state_dict()
    for key, value in merged.state_dict().items():
        torch.testing.assert_close(value, want[key].to(value.dtype), rtol=0, atol=0)
    assert resolve_model(str(actor.parent)) == str(merged_dir(actor))


def test_merge_command_is_verls_cli(tmp_path):
    cmd = merge_command(tmp_path / "global_step_5" / "actor")
    assert cmd[1:6] == ["-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    assert cmd[-1] == str(tmp_path / "global_step_5" / "merged_hf")
    out = subprocess.run([cmd[0], "-m", "verl.model_merger", "merge", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--local_dir" in out.stdout and "--target_dir" in out.stdout
