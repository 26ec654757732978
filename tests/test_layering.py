"""Imports inside setpo run one way: a module imports only from its own layer or the layers below it.

Every import is checked, the ones inside functions too (a deferred import is still a dependency).
"""

from __future__ import annotations

from pathlib import Path

from import_graph import file_imports

ROOT = Path(__file__).resolve().parents[1] / "setpo"

#: Lowest layer first. "setpo" is the package root (setpo/__init__.py) and its top-level modules not listed.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("setpo._validate", "setpo._cli"),  # argument checks and the command-line parser, used by every layer
    ("setpo.core",),  # the set-level credits: tensors in, tensors out
    ("setpo.embedders", "setpo.tiny", "setpo.models", "setpo.paper_runs", "setpo.files"),  # leaves beside the core
    ("setpo.rewards",),  # group-level rewards (GAPO)
    ("setpo.metrics",),  # diversity and pass@k metrics
    ("setpo.methods", "setpo.tasks"),  # diversity methods; tasks: prompt, answer reading, checking, reward
    ("setpo.data",),  # dataset preparation (rows of the tasks)
    ("setpo.integrations",),  # TRL and verl adapters
    ("setpo.eval",),  # evaluation harness: generation, checking, tables
    ("setpo", "setpo.demo"),  # the package's public surface
)
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def unit_of(module: str) -> str:
    """The layer unit of a dotted module name: its first two components (setpo.eval.verify -> setpo.eval)."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every setpo import in the file, relative imports resolved."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for line, module, names in file_imports(path, package):
        if module == "setpo":  # `from setpo import x`: the submodule x when there is one, else the root
            for a in names:
                sub = root / a
                is_module = sub.is_dir() or sub.with_suffix(".py").is_file()
                out.append((line, f"setpo.{a}" if is_module else "setpo"))
        else:
            out.append((line, module))
    return [(line, m) for line, m in out if m == "setpo" or m.startswith("setpo.")]


def rank_of(module: str, root: Path) -> int:
    """The layer of a module; unlisted top-level modules (setpo/x.py) belong to the root."""
    unit = unit_of(module)
    if unit in RANK:
        return RANK[unit]
    if (root / f"{unit.split('.')[-1]}.py").is_file():
        return RANK["setpo"]
    raise KeyError(f"{unit} is in no layer: put it in LAYERS")


def upward_imports(root: Path = ROOT) -> list[str]:
    """Every import of a higher layer, as "file:line: importer -> imported"."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        for line, imported in imported_modules(path, root):
            if rank_of(imported, root) > rank_of(importer, root):
                bad.append(f"{path.relative_to(root.parent)}:{line}: {unit_of(importer)} -> {unit_of(imported)}")
    return bad


def test_every_package_has_a_layer():
    packages = {f"setpo.{p.name}" for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert sorted(packages - set(RANK)) == [], "put each new setpo package in LAYERS"


def test_imports_run_downward_only():
    bad = upward_imports()
    assert bad == [], "imports of a higher layer:\n" + "\n".join(bad)


def test_the_check_sees_a_deferred_upward_import(tmp_path):
    pkg = tmp_path / "setpo"
    (pkg / "data").mkdir(parents=True)
    (pkg / "eval").mkdir()
    (pkg / "data" / "rows.py").write_text("def f():\n    from setpo.eval.harness import x\n    return x\n")
    (pkg / "eval" / "harness.py").write_text("from ..data.rows import f\n")
    assert upward_imports(pkg) == ["setpo/data/rows.py:2: setpo.data -> setpo.eval"]
