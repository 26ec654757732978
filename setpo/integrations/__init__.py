"""Integrations of the SetPO credit into training engines.

``setpo.integrations.trl``: ``SetPOConfig`` / ``SetPOTrainer`` on top of TRL's ``GRPOTrainer``, plus group-level
reward functions (GAPO) computed on the batch gathered across processes. Importing it needs the ``trl`` extra.
``setpo.integrations.verl``: the verl integration (verl needs its own environment).
Nothing is imported here, so each engine's dependencies load only when its subpackage is imported.
"""
