"""SetPO inside verl 0.9.1: the ``setpo_sync`` V1 trainer mode and an entry point.

There is no ``setpo`` advantage estimator: verl 0.9.1 never passes the responses to an estimator, so the
credit is added by the trainer mode. Importing this package does not import verl: the pure pieces (config,
grouping by uid, a method per uid group, response decoding, the reward function) work anywhere.
``trainer`` and ``runner`` need verl (``bash scripts/setup_verl_env.sh`` makes ``.venv-verl``). Launch with
``python -m setpo.integrations.verl <verl hydra overrides> trainer.v1.trainer_mode=setpo_sync +setpo.lambda=0.05``.
"""

from setpo.integrations.verl.config import SetPOVerlConfig
from setpo.integrations.verl.groups import credit_metrics, group_rows_by_uid, method_by_uid, session_final_rows

__all__ = ["SetPOVerlConfig", "credit_metrics", "group_rows_by_uid", "method_by_uid", "session_final_rows"]
