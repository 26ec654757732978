"""verl checkpoints for ``setpo.eval``: the Hugging Face model of a training run, or the merge step it needs.

verl 0.9.1 saves each checkpoint as sharded FSDP state, ``<checkpoints>/global_step_<N>/actor/
model_world_size_<W>_rank_<r>.pt``, with the model's config and tokenizer (no weights) in ``actor/huggingface/``
(``verl/utils/checkpoint/fsdp_checkpoint_manager.py``), and records the last step in
``<checkpoints>/latest_checkpointed_iteration.txt`` (``verl/trainer/ppo/v1/trainer_base.py``). The merge step,
verl's own ``python -m verl.model_merger merge --backend fsdp`` (``verl/model_merger/__main__.py``), writes a
Hugging Face model into ``global_step_<N>/merged_hf/``; ``python -m setpo.eval.checkpoint PATH --merge`` runs it.
``setpo.eval --model`` accepts a run folder, its ``checkpoints`` folder, a ``global_step_<N>`` folder or an
``actor`` folder and loads that merged model (or ``actor/huggingface/`` when the run saved ``hf_model`` itself).

    python -m setpo.eval.checkpoint runs/scale/<name>/seed1 [--merge]   # the model folder setpo.eval loads
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from setpo._cli import Parser

LATEST = "latest_checkpointed_iteration.txt"
MERGED = "merged_hf"


def _has_weights(folder: Path) -> bool:
    return folder.is_dir() and (any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin")))


def _is_actor(folder: Path) -> bool:
    return (folder / "fsdp_config.json").is_file() or any(folder.glob("model_world_size_*_rank_*.pt"))


def find_actor(path: str | Path) -> Path | None:
    """The ``actor`` folder of the verl checkpoint at `path` (a run folder with ``checkpoints/``, the checkpoints
    folder itself, a ``global_step_<N>`` folder or the actor folder), the latest step's; None when `path` is no
    verl checkpoint."""
    path = Path(path)
    if (path / "checkpoints" / LATEST).is_file():
        path = path / "checkpoints"
    if (path / LATEST).is_file():
        text = (path / LATEST).read_text().strip()
        if not text.isdigit():
            raise ValueError(f"{path / LATEST} holds {text!r}, not a step number")
        path = path / f"global_step_{int(text)}"
        if not path.is_dir():
            raise ValueError(f"{path.parent / LATEST} names step {text}, but {path} does not exist")
    if path.name.startswith("global_step_") and (path / "actor").is_dir():
        path = path / "actor"
    return path if path.is_dir() and _is_actor(path) else None


def merged_dir(actor: Path) -> Path:
    """Where the merge step writes the Hugging Face model of `actor`: ``global_step_<N>/merged_hf``."""
    return Path(actor).parent / MERGED


def merge_command(actor: str | Path) -> list[str]:
    """verl's merge of an FSDP actor checkpoint into a Hugging Face model folder (`merged_dir`)."""
    actor = Path(actor)
    return [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
            "--target_dir", str(merged_dir(actor))]  # fmt: skip


def resolve_model(model: str) -> str:
    """The folder (or Hub id) to load for `model`: a verl checkpoint's merged model, ``actor/huggingface`` when it
    holds weights, or `model` itself when it is no verl checkpoint. A verl checkpoint without weights raises a
    ValueError that names the merge command."""
    actor = find_actor(model) if Path(model).exists() else None
    if actor is None:
        return model
    for folder in (merged_dir(actor), actor / "huggingface"):
        if _has_weights(folder):
            return str(folder)
    command = " ".join(merge_command(actor))
    raise ValueError(f"{model} is a verl checkpoint without Hugging Face weights; merge it first: {command}")


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m setpo.eval.checkpoint", description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="a verl run folder, checkpoints folder, global_step_<N> or actor folder")
    p.add_argument("--merge", action="store_true", help="run verl's merge step when the weights are missing")
    a = p.parse_args(argv)
    actor = find_actor(a.path)
    if actor is None:
        p.error(f"{a.path} holds no verl checkpoint (no {LATEST}, global_step_<N>/actor or FSDP shards)")
    if a.merge and not any(_has_weights(f) for f in (merged_dir(actor), actor / "huggingface")):
        done = subprocess.run(merge_command(actor))
        if done.returncode != 0:
            return done.returncode
    try:
        print(resolve_model(a.path))
    except ValueError as e:
        p.exit(2, f"error: {e}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
