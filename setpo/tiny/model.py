"""Tiny randomly initialised causal LMs (Qwen2 or Llama architecture) with the character tokenizer, saved to disk.

Load them back with :func:`load_tiny`. Do not use ``AutoTokenizer`` on these folders: in transformers 5.x it
may rebuild a Qwen2 tokenizer from the config and drop spaces; ``PreTrainedTokenizerFast.from_pretrained``
loads the saved character tokenizer as it is.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from setpo._validate import check_choice, check_int
from setpo.tiny.tokenizer import build_char_tokenizer

Family = Literal["qwen2", "llama"]
FAMILIES: dict[str, type] = {"qwen2": Qwen2Config, "llama": LlamaConfig}
META_FILE = "setpo_tiny.json"


@dataclass
class TinyModelConfig:
    """Architecture of a tiny model; the defaults give ~0.1M parameters (about 1 s to build on a CPU)."""

    family: Family = "qwen2"
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int | None = None  # None: same as num_heads
    intermediate_size: int | None = None  # None: 4 * hidden_size
    max_position_embeddings: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice(self.family, "model family", sorted(FAMILIES))
        for name in ("hidden_size", "num_layers", "num_heads", "max_position_embeddings"):
            check_int(getattr(self, name), name, minimum=1)
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}")
        kv = self.num_heads if self.num_kv_heads is None else self.num_kv_heads
        if kv < 1 or self.num_heads % kv:
            raise ValueError(f"num_heads={self.num_heads} is not a multiple of num_kv_heads={kv}")
        check_int(self.intermediate_size, "intermediate_size", minimum=1, none=True)
        check_int(self.seed, "seed", minimum=0)

    def to_transformers(self, tokenizer: PreTrainedTokenizerFast):
        """The transformers config (Qwen2Config or LlamaConfig) for this architecture and tokenizer."""
        return FAMILIES[self.family](
            vocab_size=len(tokenizer),
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size or 4 * self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads or self.num_heads,
            max_position_embeddings=self.max_position_embeddings,
            tie_word_embeddings=True,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )


def _check_tokenizer(tokenizer) -> PreTrainedTokenizerFast:
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        raise ValueError(f"tokenizer must be a PreTrainedTokenizerFast, got {type(tokenizer).__name__}")
    missing = [name for name in ("pad_token_id", "eos_token_id") if getattr(tokenizer, name) is None]
    if missing:
        raise ValueError(f"tokenizer has no {' / '.join(missing)}; the tiny models need pad and eos tokens")
    return tokenizer


def init_tiny_model(config: TinyModelConfig, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    """A freshly initialised float32 model, deterministic given ``config.seed`` (global RNG state is left as it was)."""
    hf_config = config.to_transformers(_check_tokenizer(tokenizer))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model.eval()


FILES_MARKER = ".setpo-tiny-files.json"  # written first: which files of the folder a build wrote
# What a build wrote before FILES_MARKER existed (a folder with META_FILE and no marker).
_LEGACY_FILES = (
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    META_FILE,
)


def _owned_files(path: Path) -> list[str] | None:
    """Names of the files an earlier build wrote in `path`; None when no build wrote there."""
    marker = path / FILES_MARKER
    if marker.is_file():
        try:
            info = json.loads(marker.read_text())
            if "files" in info:
                return list(info["files"])
            before = set(info["before"])
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
            raise FileExistsError(
                f"{marker} is damaged ({type(err).__name__}); nothing deleted: remove the folder yourself if it "
                "holds only a setpo.tiny model, or choose another folder"
            ) from None
        return sorted(set(os.listdir(path)) - before - {FILES_MARKER})  # an interrupted build: all it added
    meta = path / META_FILE
    if meta.is_file():
        try:
            if json.loads(meta.read_text()).get("builder") == "setpo.tiny":
                return [f for f in _LEGACY_FILES if (path / f).is_file()]
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            pass
    return None


def _prepare_dir(out_dir: str | Path, overwrite: bool) -> tuple[Path, set[str]]:
    """The output folder, emptied of an earlier build's files when asked; and the names it holds beside them."""
    if isinstance(out_dir, str) and not out_dir.strip():
        raise ValueError("out_dir is an empty string; name a folder (for the current one, say '.')")
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        owned = _owned_files(path)
        if owned is None:
            raise FileExistsError(
                f"{path} is not empty and holds no model built by setpo.tiny; nothing there is deleted or "
                "replaced: choose a new or empty folder"
            )
        if not overwrite:
            raise FileExistsError(
                f"{path} is not empty (a model built by setpo.tiny); pass overwrite=True (--overwrite) to replace "
                "that model's files, or choose a new or empty folder"
            )
        for name in owned:
            if "/" not in name and (path / name).is_file():
                (path / name).unlink()
        (path / FILES_MARKER).unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(path))
    _write_marker(path, {"builder": "setpo.tiny", "before": sorted(before)})
    return path, before


def _write_marker(path: Path, info: dict) -> None:
    tmp = path / f"{FILES_MARKER}.tmp"
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, path / FILES_MARKER)


def build_tiny_model(
    out_dir: str | Path,
    family: Family = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_position_embeddings: int = 1024,
    seed: int = 0,
    tokenizer: PreTrainedTokenizerFast | None = None,
    overwrite: bool = False,
    **config_kwargs,
) -> Path:
    """Build a tiny causal LM with the character tokenizer and save both to `out_dir`; returns the folder.

    The same arguments always give the same weights. A non-empty `out_dir` is refused unless it holds an
    earlier build and ``overwrite=True``; then that build's files (listed in ``.setpo-tiny-files.json``) are
    deleted first and nothing else is. ``config_kwargs`` go to
    :class:`TinyModelConfig` (``num_kv_heads``, ``intermediate_size``). Load with :func:`load_tiny`.
    """
    config = TinyModelConfig(
        family=family,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        seed=seed,
        **config_kwargs,
    )
    tokenizer = build_char_tokenizer() if tokenizer is None else _check_tokenizer(tokenizer)
    model = init_tiny_model(config, tokenizer)  # before touching the folder: bad input leaves it as it was
    path, before = _prepare_dir(out_dir, overwrite)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / META_FILE).write_text(json.dumps({"builder": "setpo.tiny", **asdict(config)}, indent=2) + "\n")
    written = sorted(set(os.listdir(path)) - before - {FILES_MARKER})
    _write_marker(path, {"builder": "setpo.tiny", "files": written})
    return path


def load_tiny(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Load (model, tokenizer) saved by :func:`build_tiny_model`; the tokenizer via PreTrainedTokenizerFast."""
    path = Path(path)
    if not (path / "config.json").is_file() or not (path / "tokenizer.json").is_file():
        raise ValueError(f"{path} does not hold a saved model and tokenizer (config.json / tokenizer.json missing)")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer
