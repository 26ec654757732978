"""Group-level rewards."""

from setpo.rewards.gapo import checked_normalize, gapo_rewards, normalize_answer

__all__ = ["checked_normalize", "gapo_rewards", "normalize_answer"]
