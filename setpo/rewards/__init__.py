"""Group-level rewards."""

from setpo.rewards.gapo import gapo_rewards, normalize_answer

__all__ = ["gapo_rewards", "normalize_answer"]
