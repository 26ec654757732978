"""Named embedder factories (verl core_algos style) and `build_embedder`, which turns a spec into an embedder."""

from __future__ import annotations

from collections.abc import Callable

from setpo.embedders.base import Embedder
from setpo.embedders.hashed import HashedNgramEmbedder
from setpo.embedders.sentence_transformer import SentenceTransformerEmbedder, offline_minilm

EmbedderFactory = Callable[..., Embedder]
_EMBEDDERS: dict[str, EmbedderFactory] = {}


def register_embedder(name: str, factory: EmbedderFactory | None = None, overwrite: bool = False):
    """Register `factory(**kwargs) -> Embedder` under `name`; usable as ``@register_embedder("name")`` too."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"embedder name must be a non-empty string, got {name!r}")
    key = name.strip().lower()

    def add(fn: EmbedderFactory) -> EmbedderFactory:
        if not callable(fn):
            raise ValueError(f"embedder factory for {name!r} must be callable, got {type(fn).__name__}")
        if key in _EMBEDDERS and not overwrite and _EMBEDDERS[key] is not fn:
            raise ValueError(f"an embedder named {key!r} is already registered; pass overwrite=True to replace it")
        _EMBEDDERS[key] = fn
        return fn

    return add if factory is None else add(factory)


def available_embedders() -> list[str]:
    """Registered embedder names."""
    return sorted(_EMBEDDERS)


def build_embedder(spec: str | Embedder, **kwargs) -> Embedder:
    """An embedder from `spec`: a registered name ("hashed", "minilm"/"offline", ...), a sentence-transformers
    Hub id or local folder (anything else that is a string), or an embedder object (returned as is)."""
    if isinstance(spec, str):
        key = spec.strip().lower()
        if not key:
            raise ValueError("embedder spec is an empty string")
        if key in _EMBEDDERS:
            return _EMBEDDERS[key](**kwargs)
        return SentenceTransformerEmbedder(spec, **kwargs)
    if isinstance(spec, type):
        raise ValueError(f"embedder spec {spec.__name__} is a class; pass an instance")
    if isinstance(spec, Embedder):
        if kwargs:
            raise ValueError(f"keyword arguments {sorted(kwargs)} cannot be applied to an existing embedder object")
        return spec
    raise ValueError(
        f"cannot build an embedder from {type(spec).__name__}; use a name from {available_embedders()}, "
        "a sentence-transformers model id or folder, or a callable mapping a list of texts to an (N, d) tensor"
    )


register_embedder("hashed", HashedNgramEmbedder)
register_embedder("minilm", offline_minilm)
register_embedder("offline", offline_minilm)
