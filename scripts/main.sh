#!/usr/bin/env bash
# The project's main job on a CPU: set up the environment if needed, then the CPU-scale reproduction.
# Results and figures go to runs/<experiment>/quick (resumable: finished steps are skipped on a rerun);
# the committed paper_figures/ are only replaced by an explicit `python -m reproduce NAME ... --publish`.
# Extra arguments go to every experiment (e.g. --overwrite to recompute runs whose config changed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. "${SETPO_VENV:-.venv}/bin/activate"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ -z "${SETPO_BENCHMARK_DIR:-}" ] && [ -d ../shared/data/benchmarks ]; then
  SETPO_BENCHMARK_DIR=$(cd ../shared/data/benchmarks && pwd)
  export SETPO_BENCHMARK_DIR
fi
start=$(date +%s)
echo "== one group, by hand (python -m setpo.demo)"
python -m setpo.demo
echo "== speed of the credits (benchmarks/bench_credits.py)"
python benchmarks/bench_credits.py
echo "== theory checks (python -m theory; writes paper_figures/theory_report.md)"
python -m theory
echo "== CPU-scale reproduction (python -m reproduce quick; results and figures in runs/<experiment>/quick)"
python -m reproduce quick "$@"
echo "== main job finished in $(( $(date +%s) - start )) s"
