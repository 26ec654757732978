"""setpo: set-level diversity credits for group-based policy optimisation (SetPO, arXiv 2602.01062)."""

from setpo.core import (
    Influence,
    Shaping,
    available_shapings,
    cosine_kernel,
    get_shaping,
    group_advantages,
    group_credits,
    influence,
    local_mass,
    loo_credits,
    loo_credits_reference,
    population_diversity,
    population_local_mass,
    register_shaping,
    set_diversity,
    setpo_advantages,
)
from setpo.metrics import pass_at_k
from setpo.rewards import gapo_rewards, normalize_answer

__version__ = "0.1.0"

__all__ = [
    "Influence",
    "Shaping",
    "available_shapings",
    "cosine_kernel",
    "gapo_rewards",
    "get_shaping",
    "group_advantages",
    "group_credits",
    "influence",
    "local_mass",
    "loo_credits",
    "loo_credits_reference",
    "normalize_answer",
    "pass_at_k",
    "population_diversity",
    "population_local_mass",
    "register_shaping",
    "set_diversity",
    "setpo_advantages",
]
