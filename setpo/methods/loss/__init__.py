"""Methods that add a term to the policy loss."""

from setpo.methods.loss.entropy_bonus import entropy_bonus_method, entropy_bonus_term

__all__ = ["entropy_bonus_method", "entropy_bonus_term"]
