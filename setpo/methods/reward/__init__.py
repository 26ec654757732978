"""Methods that enter before the group normalisation: they transform (or replace) the rewards."""

from setpo.methods.reward.darling import answer_partition, darling_diversity, darling_method, embedding_partition
from setpo.methods.reward.diver import diver_method, pairwise_bleu_diversity
from setpo.methods.reward.dqo import dqo_credits, dqo_kernel, dqo_method
from setpo.methods.reward.dra_grpo import dra_grpo_method, dra_weights
from setpo.methods.reward.gapo import gapo_method

__all__ = [
    "answer_partition",
    "darling_diversity",
    "darling_method",
    "diver_method",
    "dqo_credits",
    "dqo_kernel",
    "dqo_method",
    "dra_grpo_method",
    "dra_weights",
    "embedding_partition",
    "gapo_method",
    "pairwise_bleu_diversity",
]
