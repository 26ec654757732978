#!/usr/bin/env bash
# Build the wheel and sdist into ${SETPO_DIST:-dist} and check them with `twine check --strict`.
# Uses build and twine from the project's environment (the `dev` extra); pass --core to also install the wheel with
# no extra into a fresh venv beside the CPU torch 2.13.0 and check that only torch, numpy and setpo come in and that
# `python -m setpo.demo` runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${SETPO_VENV:-.venv}/bin/python
DIST=${SETPO_DIST:-dist}
rm -rf "$DIST"
echo "[wheel] python -m build --outdir $DIST"
nice "$PY" -m build --outdir "$DIST" . >"${TMPDIR:-/tmp}/setpo-build.log" 2>&1 || {
  tail -30 "${TMPDIR:-/tmp}/setpo-build.log"
  exit 1
}
ls "$DIST"
"$PY" -m twine check --strict "$DIST"/*

if [ "${1:-}" = "--core" ]; then
  core=$(mktemp -d)/venv-core
  echo "[wheel] core install (no extra) into a fresh $core"
  python3 -m venv "$core"
  nice "$core/bin/python" -m pip install -q "torch==2.13.0" "$DIST"/setpo-*.whl
  # setpo requires exactly torch and numpy; everything installed is torch's closure, numpy, setpo or pip itself
  "$core/bin/python" - <<'PY'
import importlib.metadata as md
import re


def requires(name: str) -> list[str]:
    try:
        found = md.requires(name) or []
    except md.PackageNotFoundError:
        return []
    return [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0].lower().replace("_", "-") for r in found if "extra ==" not in r]


closure, todo = set(), ["torch"]
while todo:
    name = todo.pop()
    if name not in closure:
        closure.add(name)
        todo += requires(name)
installed = {d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()}
extra = installed - closure - {"numpy", "setpo", "pip", "setuptools"}
assert sorted(requires("setpo")) == ["numpy", "torch"], f"setpo requires {requires('setpo')}, not torch + numpy"
assert not extra, f"the core install pulled {sorted(extra)}, which neither setpo nor torch requires"
print(f"[wheel] core install: setpo + numpy + torch and its {len(closure) - 1} requirements, nothing else")
PY
  (cd "$(dirname "$core")" && "$core/bin/python" -m setpo.demo >/dev/null)
  echo "[wheel] python -m setpo.demo ran from the core install"
  rm -rf "$(dirname "$core")"
fi
