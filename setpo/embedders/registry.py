"""Named embedder factories (verl core_algos style) and `build_embedder`, which turns a spec into an embedder."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from setpo._validate import check_callable, check_str
from setpo.embedders.base import Embedder
from setpo.embedders.hashed import HashedNgramEmbedder
from setpo.embedders.sentence_transformer import SentenceTransformerEmbedder, offline_minilm

EmbedderFactory = Callable[..., Embedder]
_EMBEDDERS: dict[str, EmbedderFactory] = {}
_ORG_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")  # a Hub model id "org/name"


def register_embedder(name: str, factory: EmbedderFactory | None = None, overwrite: bool = False):
    """Register `factory(**kwargs) -> Embedder` under `name`; usable as ``@register_embedder("name")`` too."""
    check_str(name, "embedder name")
    key = name.strip().lower()

    def add(fn: EmbedderFactory) -> EmbedderFactory:
        check_callable(fn, f"embedder factory for {name!r}")
        if key in _EMBEDDERS and not overwrite and _EMBEDDERS[key] is not fn:
            raise ValueError(f"an embedder named {key!r} is already registered; pass overwrite=True to replace it")
        _EMBEDDERS[key] = fn
        return fn

    return add if factory is None else add(factory)


def available_embedders() -> list[str]:
    """Registered embedder names."""
    return sorted(_EMBEDDERS)


def check_embedder_spec(spec: str, extra_names: Sequence[str] = ()) -> str:
    """Return `spec` stripped if it is a registered name (or one of `extra_names`), an existing local folder or a
    Hub id of the form "org/name"; otherwise raise ValueError listing the registered names (catches typos early)."""
    check_str(spec, "embedder spec")
    name = spec.strip()
    if name.lower() in _EMBEDDERS or name.lower() in {n.lower() for n in extra_names}:
        return name
    if Path(name).expanduser().is_dir():
        return name
    if _ORG_NAME.match(name) and not Path(name).expanduser().exists():
        return name
    names = sorted({*_EMBEDDERS, *(n.lower() for n in extra_names)})
    raise ValueError(
        f"unknown embedder {name!r}: not a registered name {names}, not an existing model folder, and not a Hugging "
        "Face Hub id of the form 'org/name' (e.g. 'Qwen/Qwen3-Embedding-0.6B', "
        "'sentence-transformers/all-MiniLM-L6-v2')"
    )


def embedder_accepts(spec: str, names: Collection[str]) -> bool:
    """Whether the embedder `spec` names is built with every keyword argument in `names` (a sentence-transformers
    model takes device, batch_size, max_length, ...; a registered factory takes what its signature lists)."""
    key = spec.strip().lower() if isinstance(spec, str) else None
    if key not in _EMBEDDERS:
        return isinstance(spec, str)  # an id or folder: a SentenceTransformerEmbedder
    params = inspect.signature(_EMBEDDERS[key]).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return True
    return set(names) <= {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}


def build_embedder(spec: str | Embedder, **kwargs) -> Embedder:
    """An embedder from `spec`: a registered name ("hashed", "minilm"/"offline", ...), a sentence-transformers
    Hub id ("org/name") or local folder, or an embedder object (returned as is). Other strings are refused
    with the registered names listed (see :func:`check_embedder_spec`)."""
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key in _EMBEDDERS:
            return _EMBEDDERS[key](**kwargs)
        return SentenceTransformerEmbedder(check_embedder_spec(spec), **kwargs)
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
