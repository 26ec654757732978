#!/usr/bin/env bash
# The whole test suite: set up the environments if needed, then lint, the docs build, unit/property/integration tests,
# notebooks (nbmake), the theory checks (python -m theory), the verl adapter tests in their own venv, and the
# wheel installed into the oldest supported TRL stack with the core, TRL and SmolLM2 tests (scripts/check_compat.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. "${SETPO_VENV:-.venv}/bin/activate"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The tests read the benchmark copies shipped in tests/fixtures (or $SETPO_BENCHMARK_DIR when set).

echo "== ruff"
ruff check .
ruff format --check .

echo "== docs (mkdocs build --strict: broken links, missing pages, failing API-reference imports)"
mkdocs build --strict -d "$(mktemp -d)"

echo "== theory (python -m theory)"
python -m theory --report "$(mktemp -d)/theory_report.md"

echo "== pytest: library, integrations, reproduction pipelines, notebooks"
python -m pytest -n 2 tests --ignore=tests/verl --nbmake notebooks

if [ -d tests/verl ]; then
  echo "== pytest: verl adapter (own environment, verl pins an older transformers)"
  bash scripts/setup_verl_env.sh
  .venv-verl/bin/python -m pytest -q tests/verl
fi

echo "== oldest supported versions: the built wheel in .venv-oldest with the core, TRL and SmolLM2 tests"
bash scripts/check_compat.sh
