#!/usr/bin/env bash
# Create (or refresh) .venv-verl: verl 0.9.1 on CPU torch 2.13.0, setpo itself (editable, no deps) and pytest.
# verl pins transformers < 5.11, hence a separate environment from .venv. No vllm/sglang: the CPU tests only
# import verl's trainer modules and compose its hydra configs. Re-installs only when this script changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SETPO_VERL_VENV:-.venv-verl}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup-verl] creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.setpo-verl-installed"
want=$(sha256sum scripts/setup_verl_env.sh | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup-verl] installing verl 0.9.1 into $VENV"
  start=$SECONDS
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch in the same command as verl, so pip keeps the CPU build instead of resolving a CUDA one.
  # TransferQueue (V1 trainer), cachetools, fastapi, uvicorn: imported by verl's trainer modules but missing
  # from verl's base requirements. hypothesis: tests/conftest.py imports it.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" "verl==0.9.1" "TransferQueue>=0.1.10" cachetools fastapi uvicorn numpy scipy pyyaml tqdm "pytest>=8" hypothesis
  "$VENV/bin/python" -m pip install -q --no-deps -e .
  "$VENV/bin/python" -W ignore -c "import verl, verl.trainer.ppo.v1, verl.trainer.main_ppo, setpo; print('[setup-verl] verl', verl.__version__)"
  echo "$want" >"$stamp"
  echo "[setup-verl] done in $((SECONDS - start)) s"
fi
