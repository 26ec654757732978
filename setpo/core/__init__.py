"""Pure-torch core: kernels, local mass, D(S), leave-one-out credits, influence, advantages."""

from setpo.core.advantages import group_advantages, setpo_advantages
from setpo.core.credits import SmallGroupPolicy, group_credits, loo_credits, loo_credits_reference
from setpo.core.diversity import local_mass, set_diversity
from setpo.core.influence import Influence, influence, population_diversity, population_local_mass
from setpo.core.kernels import cosine_kernel
from setpo.core.shaping import Shaping, ShapingSpec, available_shapings, get_shaping, register_shaping

__all__ = [
    "Influence",
    "Shaping",
    "ShapingSpec",
    "SmallGroupPolicy",
    "available_shapings",
    "cosine_kernel",
    "get_shaping",
    "group_advantages",
    "group_credits",
    "influence",
    "local_mass",
    "loo_credits",
    "loo_credits_reference",
    "population_diversity",
    "population_local_mass",
    "register_shaping",
    "set_diversity",
    "setpo_advantages",
]
