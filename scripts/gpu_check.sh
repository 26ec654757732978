#!/usr/bin/env bash
# On a GPU machine, after `bash scripts/setup_env.sh`: the CUDA-only tests (they skip on a CPU), the credit benchmark
# (eager, then beside its torch.compile build) and the overhead benchmark's quick profile, all on CUDA, in under 10
# minutes, and the GPU memory of one Table 7 embedding batch. Logs, JSON, CSV and figures go to $OUT (default
# runs/gpu_check): cuda_tests.log/.xml, bench_credits.log/.json, bench_credits_inductor.log/.json, overhead/
# (fig9_overhead.png/.csv, overhead.md, summary.json), embed_memory.log/.json, gpu.txt (the GPU and torch build).
# A test module that cannot be imported (a missing optional package) is reported as an error and the CUDA tests of
# the other modules still run.
#
#   bash scripts/gpu_check.sh [--dry-run]      # --dry-run prints the commands and runs nothing
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
dry=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$arg' (options: --dry-run, --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-runs/gpu_check}
if [ -z "$OUT" ]; then
  echo "gpu_check.sh: OUT is empty; give a folder (default runs/gpu_check)" >&2
  exit 2
fi
VENV=${SETPO_VENV:-.venv}
PY="$VENV/bin/python"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

failed=0
# step LIMIT_S LOG COMMAND...: print the command (--dry-run), or run it under `timeout` with its output in $OUT/LOG.
step() {
  local limit=$1 log=$2
  shift 2
  if [ "$dry" = 1 ]; then
    printf 'timeout %s' "$limit"
    printf ' %q' "$@"
    printf ' > %q\n' "$OUT/$log"
    return 0
  fi
  echo "== $*  (limit $limit s, log $OUT/$log)"
  local rc=0
  timeout "$limit" "$@" >"$OUT/$log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "   FAILED (exit $rc$([ "$rc" = 124 ] && echo ': time limit')); last lines of $OUT/$log:"
    tail -n 20 "$OUT/$log"
    failed=1
  else
    tail -n 3 "$OUT/$log"
  fi
}

if [ "$dry" = 0 ]; then
  if [ ! -x "$PY" ]; then
    echo "gpu_check.sh: no environment at $VENV; run 'bash scripts/setup_env.sh' first" >&2
    exit 2
  fi
  if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    "$PY" -c 'import torch; print(f"gpu_check.sh: torch {torch.__version__} in the environment sees no CUDA device")' >&2
    echo "gpu_check.sh: on a GPU machine install a CUDA build of the same torch into $VENV (see pytorch.org)" >&2
    exit 2
  fi
  mkdir -p "$OUT"
  "$PY" -c 'import torch; p = torch.cuda.get_device_properties(0)
print(f"{p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}")' |
    tee "$OUT/gpu.txt"
else
  echo "# dry run: would write to $OUT with $PY"
fi

start=$(date +%s)
# The time limits add up to 9 minutes 45 seconds.
step 150 cuda_tests.log "$PY" -m pytest -q -n 0 -rs -k cuda tests --ignore=tests/verl --continue-on-collection-errors \
  --junitxml="$OUT/cuda_tests.xml"
step 80 bench_credits.log "$PY" benchmarks/bench_credits.py --device cuda --groups 6 16 32 64 \
  --json "$OUT/bench_credits.json"
step 110 bench_credits_inductor.log "$PY" benchmarks/bench_credits.py --device cuda --groups 6 16 32 64 --inductor \
  --json "$OUT/bench_credits_inductor.json"
step 200 overhead.log "$PY" -m reproduce overhead --profile quick --device cuda --out "$OUT/overhead" --overwrite
# Peak and reserved memory of the SetPO embedder (Qwen3-Embedding-0.6B's shapes) on one Table 7 batch on cuda:0.
step 45 embed_memory.log "$PY" -m reproduce.scale.bench_embed_placement --memory --json "$OUT/embed_memory.json"
[ "$dry" = 1 ] || echo "== gpu_check finished in $(($(date +%s) - start)) s; results in $OUT (exit $failed)"
exit "$failed"
