"""The notebooks: jupytext percent-format sources (notebooks/*.py) paired with the committed, executed .ipynb.

Edit the .py source, then ``jupytext --sync notebooks/NAME.py`` and execute the notebook
(``jupyter nbconvert --to notebook --execute --inplace notebooks/NAME.ipynb``) in the change that alters what it
shows; CI runs them again with ``pytest --nbmake notebooks``.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = ("01_kernel_and_credits", "02_influence_function", "03_discrete_results")


def cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) of every cell, the content the two files of a pair must agree on."""
    return [(c.cell_type, c.source) for c in nb.cells]


def test_every_notebook_has_its_source_and_no_other_file_is_unpaired():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.py")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_source_and_notebook_hold_the_same_cells(name):
    source = jupytext.read(NOTEBOOKS / f"{name}.py")
    stored = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert cells(source) == cells(stored), (
        f"notebooks/{name}.py and .ipynb differ: run jupytext --sync notebooks/{name}.py and execute the notebook"
    )
    assert stored.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


def test_a_drifted_source_is_caught():
    stored = nbformat.read(NOTEBOOKS / f"{NAMES[0]}.ipynb", as_version=4)
    text = (NOTEBOOKS / f"{NAMES[0]}.py").read_text()
    first_code = next(c.source for c in stored.cells if c.cell_type == "code")
    drifted = jupytext.reads(text.replace(first_code, first_code + "\nx = 1", 1), fmt="py:percent")
    assert cells(drifted) != cells(stored)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_executed(name):
    stored = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    assert [c.get("execution_count") for c in code] == list(range(1, len(code) + 1)), (
        f"notebooks/{name}.ipynb is not stored executed top to bottom"
    )
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], f"notebooks/{name}.ipynb stores an error"
    assert any("image/png" in o.get("data", {}) for o in outputs), f"notebooks/{name}.ipynb shows no figure"
    assert str(NOTEBOOKS.parent) not in nbformat.writes(stored), f"notebooks/{name}.ipynb stores a local path"
    assert not any("sys.path.insert" in c.source for c in code), "import the installed setpo, do not shadow it"
