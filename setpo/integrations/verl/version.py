"""The verl version the adapter is written against, and the check that refuses another one.

The ``setpo_sync`` trainer mode subclasses verl 0.9.1's V1 trainer and reads its internals (the TransferQueue
batch layout, ``_compute_advantage``, the replay buffer's warnings), which change between verl releases, so a
different verl is refused rather than run with silently wrong advantages. ``SETPO_VERL_ANY_VERSION=1`` turns the
refusal into a warning, for trying a newer verl at one's own risk.
"""

from __future__ import annotations

import os
import warnings

VERL_VERSION = "0.9.1"
OVERRIDE_ENV = "SETPO_VERL_ANY_VERSION"


def installed_verl_version() -> str:
    """``verl.__version__`` of the installed verl (ImportError when there is none)."""
    import verl

    return str(verl.__version__)


def check_verl_version(version: str | None = None, what: str = "setpo.integrations.verl") -> str:
    """`version` (default: the installed verl's) when it is `VERL_VERSION`; RuntimeError otherwise, or a
    RuntimeWarning when ``SETPO_VERL_ANY_VERSION=1``."""
    version = installed_verl_version() if version is None else str(version)
    if version == VERL_VERSION:
        return version
    message = (
        f"{what} supports verl {VERL_VERSION} only, found verl {version}: it relies on that version's V1 trainer "
        f"internals; install verl=={VERL_VERSION} (pip install 'setpo[verl]'), or set {OVERRIDE_ENV}=1 to run anyway"
    )
    if os.environ.get(OVERRIDE_ENV) == "1":
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return version
    raise RuntimeError(message)
