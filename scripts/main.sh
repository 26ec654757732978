#!/usr/bin/env bash
# The project's main job on a CPU: set up the environment if needed, then run the CPU-scale work.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. "${SETPO_VENV:-.venv}/bin/activate"
python -m setpo.demo
python benchmarks/bench_credits.py
