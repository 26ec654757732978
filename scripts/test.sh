#!/usr/bin/env bash
# The whole test suite: set up the environment if needed, lint, unit/property tests, notebooks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. "${SETPO_VENV:-.venv}/bin/activate"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ruff check .
ruff format --check .
targets=(tests)
[ -d notebooks ] && ls notebooks/*.ipynb >/dev/null 2>&1 && targets+=(--nbmake notebooks)
python -m pytest -n 2 "${targets[@]}"
