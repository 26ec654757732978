"""The documentation's results and speed pages: rendered from paper_figures/ by reproduce.docs_pages (at build time,
so never committed and never stale), covering every experiment folder, with its verdicts, figures and per-seed
rows taken from its files; no result table typed by hand in the README or a source page."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

import setpo
from reproduce import docs_pages

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FIGURES = ROOT / "paper_figures"
#: configuration guides whose tables hold settings (lambda 0.05, GPU counts), not measured results
GUIDES = {"scale.md", "evaluation.md"}


@pytest.fixture(scope="module")
def site() -> docs_pages.Site:
    return docs_pages.site(DOCS)


def test_every_experiment_folder_has_a_page_and_every_timing_folder_is_on_the_speed_page(site):
    folders = {d.name for d in FIGURES.iterdir() if d.is_dir() and any(d.rglob("*.csv")) | any(d.rglob("*.md"))}
    assert folders, "paper_figures holds no experiment"
    results = {p.removeprefix("results/").removesuffix(".md") for p in site.pages if p.startswith("results/")}
    assert folders - set(docs_pages.SPEED) <= results
    markers = set(docs_pages.MARKER.findall((DOCS / "speed.md").read_text()))
    assert set(docs_pages.SPEED) & folders <= markers
    assert "<!-- render:" not in site.pages["speed.md"]
    for name in folders - set(docs_pages.SPEED):
        assert f"({name}.md)" in site.pages["results/index.md"], f"{name} missing from the results index"


@pytest.mark.parametrize("name", docs_pages.experiments())
def test_a_results_page_shows_its_figures_verdicts_and_per_seed_rows(site, name):
    page = site.pages[f"results/{name}.md"]
    folder = FIGURES / name
    for png in folder.glob("*.png"):
        assert f"]({name}/{png.name})" in page and f"results/{name}/{png.name}" in site.files
    if (folder / "contrasts.csv").is_file():
        with (folder / "contrasts.csv").open(newline="") as f:
            decided = [r for r in csv.DictReader(f) if r["family"]]
        for r in decided:  # each decided contrast: its mean and verdict, formatted from the file
            row = next(line for line in page.splitlines() if f"| {float(r['mean']):+.4f} | " in line)
            assert f"**{r['verdict']}**" in row and r["metric"] in row
    seeds = docs_pages.per_seed_file(folder)
    if seeds is not None:
        with seeds.open(newline="") as f:
            n = sum(1 for _ in csv.reader(f)) - 1
        table = re.split(r"\n#+ ", page.split("Per-seed table", 1)[1], maxsplit=1)[0]
        assert n <= docs_pages.MAX_ROWS and len([x for x in table.splitlines() if x.startswith("    | ")]) == n + 1
    for md in folder.glob("*.md"):
        body = md.read_text().strip().splitlines()[1:]  # its title is demoted; the rest appears as written
        assert all(line in page for line in body if line.strip() and not line.startswith("#"))
    design = docs_pages.design(name)
    if design is not None:
        assert design.splitlines()[0] in page


def test_a_new_experiment_folder_is_picked_up_without_code_changes(tmp_path):
    figures = tmp_path / "paper_figures"
    shutil.copytree(FIGURES / "smollm2_primes", figures / "brand_new")
    (figures / "overhead").mkdir()
    (figures / "overhead" / "overhead.md").write_text("# timing\n\n| a |\n|---|\n| 1 |\n")
    assert docs_pages.experiments(figures) == ["brand_new"]
    out = docs_pages.site(tmp_path / "docs", figures, ROOT)
    assert "results/brand_new.md" in out.pages and "results/brand_new/frontier.png" in out.files
    page = out.pages["results/brand_new.md"]
    assert "Per-seed table" in page and "## Verdicts" in page and "## Design" not in page  # no reproduce/brand_new.py
    assert "[brand_new](brand_new.md)" in docs_pages.results_index(figures)


def test_cells_and_tables_are_formatted_from_the_values():
    assert [docs_pages.fmt(v) for v in ("0.123456", "10", "-3", "nan", "a|b", "1e-05")] == [
        "0.1235",
        "10",
        "-3",
        "nan",
        "a\\|b",
        "1e-05",
    ]
    assert docs_pages.table(["x", "y"], [["1", "2"]]) == "| x | y |\n|---|---|\n| 1 | 2 |"
    assert docs_pages.demote("# a\n```\n# not a heading\n```\n## b", 2) == "### a\n```\n# not a heading\n```\n#### b"


def test_a_json_file_renders_its_records_and_scalars(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text('{"device": "cpu", "rows": [{"G": 6, "ms": 0.25}, {"G": 64, "ms": 1.5}], "nested": {"x": 1}}')
    got = docs_pages.json_tables(path)
    assert "| device | cpu |" in got and "| 6 | 0.25 |" in got and "| 64 | 1.5 |" in got
    assert docs_pages.json_tables(tmp_path / "bench.json", max_rows=1).count("| 6 |") == 0


def test_a_speed_marker_naming_no_folder_is_an_error():
    with pytest.raises(FileNotFoundError, match="names no folder"):
        docs_pages.speed_page("<!-- render: no_such_folder -->")


def test_write_refuses_the_docs_folder(tmp_path):
    with pytest.raises(SystemExit, match="would commit generated pages"):
        docs_pages.main(["--write", str(DOCS)])
    assert docs_pages.main(["--write", str(tmp_path)]) == 0
    assert (tmp_path / "results" / "index.md").is_file() and (tmp_path / "speed.md").is_file()


_VERSION = re.compile(r"[<>=]=?\s*\d+(\.\d+)*|\d+\.\d+\.\d+")
_RESULT_CELL = re.compile(r"(?<![\d.])\d+\.\d{2,}(?![\d.])|\d%")


def _typed_result_rows(text: str) -> list[str]:
    """Table rows holding a measured-looking number (2+ decimals or a percentage), versions left out."""
    return [line for line in text.splitlines() if line.startswith("|") and _RESULT_CELL.search(_VERSION.sub("", line))]


def test_no_result_table_is_typed_by_hand():
    assert _typed_result_rows("| GRPO | 0.208 | 55% |") and not _typed_result_rows("| numpy | 1.26.4 | >=1.26 |")
    sources = [p for p in DOCS.rglob("*.md") if p.name not in GUIDES]
    assert len(sources) >= 9
    for path in [ROOT / "README.md", *sources]:
        assert _typed_result_rows(path.read_text()) == [], path


def test_readme_is_a_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for page in ("getting-started", "core", "trl", "scale", "results/index", "speed", "theory/index", "runs"):
        assert (DOCS / f"{page}.md").is_file(), page


def test_every_public_name_is_in_the_api_reference():
    api = (DOCS / "api.md").read_text()
    assert "group_credits" in setpo.__all__ and setpo.group_credits is not None
    missing = [n for n in setpo.__all__ if f"- {n}\n" not in api]
    assert missing == []
