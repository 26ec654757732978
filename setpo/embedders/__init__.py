"""Text embedders for the semantic kernel: a list of N texts in, an (N, d) float32 tensor out."""

from setpo._validate import check_embeddings, check_texts
from setpo.embedders.base import Embedder
from setpo.embedders.cache import CachedEmbedder, EmbeddingCache
from setpo.embedders.hashed import HashedNgramEmbedder
from setpo.embedders.policy import (
    POLICY_EMBEDDER,
    PolicyHiddenStateEmbedder,
    is_policy_embedder,
    mean_pool_hidden_states,
)
from setpo.embedders.registry import (
    available_embedders,
    build_embedder,
    check_embedder_spec,
    embedder_accepts,
    register_embedder,
)
from setpo.embedders.sentence_transformer import (
    SentenceTransformerEmbedder,
    default_offline_model_path,
    offline_minilm,
)
from setpo.embedders.texts import embed_texts

__all__ = [
    "POLICY_EMBEDDER",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "HashedNgramEmbedder",
    "PolicyHiddenStateEmbedder",
    "SentenceTransformerEmbedder",
    "available_embedders",
    "build_embedder",
    "check_embedder_spec",
    "check_embeddings",
    "check_texts",
    "default_offline_model_path",
    "embed_texts",
    "embedder_accepts",
    "is_policy_embedder",
    "mean_pool_hidden_states",
    "offline_minilm",
    "register_embedder",
]
