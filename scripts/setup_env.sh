#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment: CPU torch 2.13.0 plus every extra the main job,
# the tests and the notebooks need. Re-installs only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SETPO_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.setpo-installed"
want=$(cat pyproject.toml scripts/setup_env.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing setpo and its extras into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch in the same command as everything that depends on it, so pip keeps the CPU build.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" -e ".[trl,plots,eval,theory,notebooks,dev]"
  echo "$want" >"$stamp"
fi
