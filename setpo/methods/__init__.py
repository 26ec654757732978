"""Diversity methods behind one registry: small pure torch functions on a `GroupBatch` of B prompts x G rollouts.

``get_method(name)`` returns a `Method` whose ``entry`` says where it enters the RL step ("reward": before the
group normalisation; "advantage": after it; "loss": a term added to the policy loss), whose ``required_inputs()``
names the `GroupBatch` fields it reads, whose ``scale`` names the parameter weighting its term (SetPO's lambda) and
``min_group`` the fewest rows of a group it acts on, and which is called as ``method(batch, advantages, **params)``.
Both engines (TRL, verl) dispatch every method, SetPO included, through this registry.
One subpackage per entry point, one file per method.
"""

from setpo.methods import advantage, loss, reward
from setpo.methods.batch import INPUT_FIELDS, GroupBatch
from setpo.methods.registry import ENTRIES, Entry, GroupScale, Method, available_methods, get_method, register_method

__all__ = [
    "ENTRIES",
    "INPUT_FIELDS",
    "Entry",
    "GroupBatch",
    "GroupScale",
    "Method",
    "advantage",
    "available_methods",
    "get_method",
    "loss",
    "register_method",
    "reward",
]
