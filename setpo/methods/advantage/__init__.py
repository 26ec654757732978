"""Methods that enter after the group normalisation: they add to or replace the advantages."""

from setpo.methods.advantage.passk import passk_advantages, passk_method
from setpo.methods.advantage.setpo import setpo_credits, setpo_method

__all__ = ["passk_advantages", "passk_method", "setpo_credits", "setpo_method"]
