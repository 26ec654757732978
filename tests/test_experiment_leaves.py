"""reproduce/ has three floors, and an experiment is a leaf: it imports no other experiment.

* harness: run folders, profiles, the CLI and the analyses every experiment may use (`common`, `evidence`,
  `contrast`, `stats`, `confirm`, `comparison`); it imports no task and no experiment;
* tasks: `reproduce/tasks/` (data, start models, RL runs and evaluation shared by the experiments of one task);
  they import the harness, never an experiment;
* experiments: the modules `python -m reproduce NAME` runs (`AVAILABLE` in `reproduce/__main__.py`); each imports
  the harness and the tasks, never another experiment. What two experiments share moves down a floor.

Above them, tools may read experiments: the all-in-one runner (`__main__`), the cross-experiment reports
(`claims`, `verdicts`, `docs_pages`), `starts` (builds the start an experiment ships) and `scale`.
Every import counts, the ones inside functions too. One crossing is allowed: a task loads the shipped start
(`starts.countdown_start`: a model folder checked against its checksum), while `starts`'s own builder reads the
recipe profile of the experiment it ships the start for.
"""

from __future__ import annotations

from pathlib import Path

from import_graph import file_imports

from reproduce.__main__ import AVAILABLE

ROOT = Path(__file__).resolve().parents[1] / "reproduce"

HARNESS = frozenset({"common", "evidence", "contrast", "stats", "confirm", "comparison"})
TASKS = frozenset({"tasks"})
TOOLS = frozenset({"__init__", "__main__", "claims", "verdicts", "docs_pages", "starts", "scale"})


def floor_of(unit: str, experiments: frozenset[str]) -> str:
    """The floor of a unit of reproduce/ (a top-level module or subpackage name)."""
    for name, units in (("harness", HARNESS), ("tasks", TASKS), ("experiment", experiments), ("tool", TOOLS)):
        if unit in units:
            return name
    raise KeyError(f"reproduce.{unit} is on no floor: add it to a floor in {Path(__file__).name}")


def units(root: Path) -> dict[str, list[Path]]:
    """unit -> its files: reproduce/x.py is unit x, every file under reproduce/pkg/ is unit pkg."""
    out: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        out.setdefault(rel.parts[0] if len(rel.parts) > 1 else rel.stem, []).append(path)
    return out


def imported_units(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, unit) of every reproduce import in the file; `from reproduce import x` names unit x."""
    package = ".".join(("reproduce", *path.relative_to(root).parent.parts))
    out = []
    for line, module, names in file_imports(path, package):
        full = [f"{module}.{n}" for n in names] if module == "reproduce" else [module]
        out += [(line, n.split(".")[1]) for n in full if n.startswith("reproduce.")]
    return out


#: floor -> the floors it must not import
FORBIDDEN = {"harness": {"tasks", "experiment", "tool"}, "tasks": {"experiment", "tool"}, "experiment": {"tool"}}
#: (importer unit, imported unit) pairs allowed across the floors (module docstring)
ALLOWED = frozenset({("tasks", "starts")})


def bad_imports(root: Path = ROOT, experiments: frozenset[str] = frozenset(AVAILABLE)) -> list[str]:
    """Every import that breaks the floors, as "file:line: importer (floor) -> imported (floor)"."""
    bad = []
    for unit, paths in units(root).items():
        floor = floor_of(unit, experiments)
        for path in paths:
            for line, other in imported_units(path, root):
                if other == unit or (unit, other) in ALLOWED:
                    continue
                other_floor = floor_of(other, experiments)
                if other_floor in FORBIDDEN.get(floor, ()) or (floor == other_floor == "experiment"):
                    rel = path.relative_to(root.parent)
                    bad.append(f"{rel}:{line}: {unit} ({floor}) -> {other} ({other_floor})")
    return bad


def test_every_module_of_reproduce_is_on_a_floor():
    for unit in units(ROOT):
        floor_of(unit, frozenset(AVAILABLE))


def test_no_experiment_imports_another_and_floors_run_downward():
    bad = bad_imports()
    assert bad == [], "imports against the floors (move what they share into reproduce/tasks/):\n" + "\n".join(bad)


def test_the_check_names_an_experiment_importing_another(tmp_path):
    root = tmp_path / "reproduce"
    (root / "tasks").mkdir(parents=True)
    (root / "common.py").write_text("")
    (root / "tasks" / "a.py").write_text("from reproduce import common\n")
    (root / "first.py").write_text("from reproduce.tasks import a\n")
    (root / "second.py").write_text("import os\n\n\ndef run():\n    from reproduce import first\n    return first\n")
    assert bad_imports(root, frozenset({"first", "second"})) == [
        "reproduce/second.py:5: second (experiment) -> first (experiment)"
    ]


def test_the_check_names_a_task_importing_an_experiment(tmp_path):
    root = tmp_path / "reproduce"
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "a.py").write_text("from ..first import x\n")
    (root / "first.py").write_text("x = 1\n")
    assert bad_imports(root, frozenset({"first"})) == ["reproduce/tasks/a.py:1: tasks (tasks) -> first (experiment)"]
