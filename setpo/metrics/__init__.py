"""Evaluation metrics."""

from setpo.metrics.diversity import (
    item_distribution,
    js_divergence,
    js_to_uniform,
    kl_divergence,
    mean_pairwise_distance,
    mean_pairwise_embedding_distance,
    self_bleu,
    sentence_bleu,
    unique_at_n,
    validity_rate,
)
from setpo.metrics.pass_at_k import pass_at_k

__all__ = [
    "item_distribution",
    "js_divergence",
    "js_to_uniform",
    "kl_divergence",
    "mean_pairwise_distance",
    "mean_pairwise_embedding_distance",
    "pass_at_k",
    "self_bleu",
    "sentence_bleu",
    "unique_at_n",
    "validity_rate",
]
