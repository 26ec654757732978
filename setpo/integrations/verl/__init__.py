"""SetPO inside verl 0.9.1: the ``setpo_sync`` V1 trainer mode and an entry point.

There is no ``setpo`` advantage estimator: verl 0.9.1 never passes the responses to an estimator, so the
credit is added by the trainer mode. Importing this package does not import verl: the pure pieces (config,
grouping by uid, credits, broadcast to tokens, response decoding, the reward function) work anywhere.
``trainer`` and ``runner`` need verl (``bash scripts/setup_verl_env.sh`` makes ``.venv-verl``). Launch with
``python -m setpo.integrations.verl <verl hydra overrides> trainer.v1.trainer_mode=setpo_sync +setpo.lambda=0.05``.
"""

from setpo.integrations.verl.config import PAPER_EMBEDDER, PAPER_LAMBDA, SetPOVerlConfig, preset
from setpo.integrations.verl.groups import (
    add_credits_to_token_advantages,
    credit_metrics,
    credits_by_uid,
    group_rows_by_uid,
    session_final_rows,
)

__all__ = [
    "PAPER_EMBEDDER",
    "PAPER_LAMBDA",
    "SetPOVerlConfig",
    "add_credits_to_token_advantages",
    "credit_metrics",
    "credits_by_uid",
    "group_rows_by_uid",
    "preset",
    "session_final_rows",
]
