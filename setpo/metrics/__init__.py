"""Evaluation metrics."""

from setpo.metrics.pass_at_k import pass_at_k

__all__ = ["pass_at_k"]
