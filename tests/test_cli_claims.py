"""`python -m reproduce.claims` over damaged published results: one line naming the file and how to restore it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reproduce import claims

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def figures(tmp_path, monkeypatch) -> Path:
    """A copy of the published results that `python -m reproduce.claims` reads."""
    copy = tmp_path / "paper_figures"
    shutil.copytree(ROOT / "paper_figures", copy, ignore=shutil.ignore_patterns("*.png", "*.gz"))
    monkeypatch.setattr(claims, "PAPER_FIGURES", copy)
    return copy


def test_the_copy_renders_as_the_published_results(figures, capsys):
    assert claims.main([]) == 0
    assert capsys.readouterr().out == claims.render(ROOT / "paper_figures")


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda text: text[: len(text) // 3], "is damaged (line "),  # truncated mid-row
        (lambda text: "\udcff" + text, "is damaged ('utf-8' codec can't decode"),
        (lambda text: text.replace(",", ",x", 1), "is damaged (line 2: no "),  # a column renamed
        (lambda text: text.splitlines()[0] + "\n", "has no contrast"),  # the header alone: every row missing
        (None, "is missing"),
    ],
)
def test_a_damaged_contrasts_csv_is_one_line_naming_it(figures, capsys, damage, why):
    path = figures / "countdown_evidence" / "contrasts.csv"
    if damage is None:
        path.unlink()
    else:
        path.write_bytes(damage(path.read_text()).encode("utf-8", "surrogateescape"))
    before = (figures / "claims.md").read_bytes()
    assert claims.main(["--write"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"python -m reproduce.claims: error: {path} ") and why in err, err
    assert "git checkout --" in err and "python -m reproduce.verdicts --write" in err
    assert (figures / "claims.md").read_bytes() == before  # nothing written


def test_a_damaged_earlier_table_is_one_line(figures, capsys):
    path = figures / claims.PREVIOUS
    path.write_text("claim,G\nnot a claim of the table,7\n")
    assert claims.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"python -m reproduce.claims: error: {path} is damaged; restore the committed copy (git checkout -- {path})"
    )


def test_write_into_a_readme_without_the_answer_markers_is_one_line_and_writes_nothing(
    figures, tmp_path, monkeypatch, capsys
):
    readme = tmp_path / "README.md"
    readme.write_text("# a README whose answer markers were deleted\n")
    monkeypatch.setattr(claims, "README", readme)
    before = (figures / "claims.md").read_bytes()
    assert claims.main(["--write"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("python -m reproduce.claims: error: README.md lacks the markers ") and len(err.splitlines()) == 1
    )
    assert err.endswith("put them back around the answer")
    assert (figures / "claims.md").read_bytes() == before and readme.read_text().startswith("# a README whose")
