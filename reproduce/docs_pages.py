"""The documentation's results, speed and theory-report pages, rendered from the files in ``paper_figures/``.

    python -m reproduce.docs_pages [--list] [--write DIR]

One page per experiment folder ``paper_figures/<name>/``, found by listing the folder (a new experiment needs no
code here): its design (the docstring of ``reproduce/<name>.py``, or of the module named in `DESIGN_MODULE`), the
verdicts of its decided contrasts (``contrasts.csv``), its figures with the data files beside them, every summary
file it holds (``*.md``, written by the experiment from its data), its per-seed table and the list of its files.
The folders in `SPEED` go to the speed page instead: a source page's ``<!-- render: NAME -->`` is replaced by the
folder's block, and ``<!-- render-table: experiments|methods|theory -->`` by the table of the experiments, of the
registered diversity methods or of the theory checks. Nothing here is typed by hand: every number comes from a file
in the folder (or, for the methods and theory tables, from the code's registries).

The site build (``mkdocs build``, through ``docs/hooks.py``) renders the pages in memory; none is committed, so none
can drift from its source. ``--write DIR`` writes them to DIR to read them without building the site.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reproduce.common import PAPER_FIGURES

ROOT = Path(__file__).resolve().parent.parent
#: experiments whose design is written in another module's docstring
DESIGN_MODULE = {"countdown_replication": "countdown_evidence"}
#: folders of timing measurements: rendered on the speed page, not as a results page
SPEED = ("overhead", "gpu_check")
#: top-level files of paper_figures/ and the page each becomes
TOP_PAGES = {
    "claims.md": "results/claims.md",
    "theory_report.md": "theory/report.md",
    "paper_arithmetic.md": "theory/paper_arithmetic.md",
}
#: tables with more rows than this are linked, not rendered
MAX_ROWS = 400
DATA_SUFFIXES = (".csv", ".json", ".gz", ".png", ".md")
MARKER = re.compile(r"<!-- render: ([\w./-]+) -->")
_VERDICT_COLUMNS = ["G", "decoding", "claim", "metric", "n", "mean", "t_lo", "t_hi", "p_holm", "family", "verdict"]


@dataclass
class Site:
    """What the renderer adds to the site: pages (path -> markdown) and copied files (path -> source file)."""

    pages: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)


def experiments(figures: Path = PAPER_FIGURES) -> list[str]:
    """Names of the result folders in `figures` (every folder holding a file, except the `SPEED` ones), sorted."""
    return [d.name for d in _folders(figures) if d.name not in SPEED]


def _folders(figures: Path) -> list[Path]:
    if not figures.is_dir():
        raise FileNotFoundError(f"no paper_figures folder at {figures}")
    return sorted(d for d in figures.iterdir() if d.is_dir() and not d.name.startswith(".") and _data_files(d))


def _data_files(folder: Path) -> list[Path]:
    """The published files of `folder` and its subfolders (hidden files left out), sorted."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and not any(s.startswith(".") for s in p.relative_to(folder).parts)
    )


def _copied(folder: Path) -> list[Path]:
    """The files of `folder` the site serves as they are: data and figures (summary files are inlined)."""
    return [p for p in _data_files(folder) if p.suffix != ".md"]


def design(name: str, root: Path = ROOT) -> str | None:
    """The docstring of the experiment's module (``reproduce/<name>.py`` or `DESIGN_MODULE`), or None."""
    module = root / "reproduce" / f"{DESIGN_MODULE.get(name, name)}.py"
    if not module.is_file():
        return None
    text = ast.get_docstring(ast.parse(module.read_text()))
    if text is None:
        return None
    out: list[str] = []
    for line in text.splitlines():  # Markdown needs a blank line before a list that follows a paragraph
        item, prev = r"([*-]|\d+\.) ", out[-1] if out else ""
        if re.match(item, line) and prev.strip() and not re.match(item, prev) and not prev[:1].isspace():
            out.append("")
        out.append(line)
    return "\n".join(out)


def fmt(value: str) -> str:
    """A CSV cell for a table: numbers to 4 significant digits (integers as they are), text escaped for a cell."""
    try:
        x = float(value)
    except ValueError:
        return value.replace("|", "\\|")
    if math.isnan(x) or math.isinf(x):
        return value
    if re.fullmatch(r"[-+]?\d+", value.strip()):
        return value.strip()
    return f"{x:.4g}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table of already formatted cells."""
    out = ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def csv_table(path: Path, max_rows: int = MAX_ROWS) -> str | None:
    """`path` (a CSV) as a markdown table, or None when it has more than `max_rows` rows."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or len(rows) - 1 > max_rows:
        return None
    return table(rows[0], [[fmt(c) for c in r] for r in rows[1:]])


def json_tables(path: Path, max_rows: int = MAX_ROWS) -> str | None:
    """A JSON file's lists of records (at its top or one level down) and its scalar fields as tables, or None."""
    data = json.loads(path.read_text())
    parts: list[str] = []

    def records(items: list, title: str | None) -> None:
        if items and all(isinstance(r, dict) for r in items) and len(items) <= max_rows:
            keys = list(dict.fromkeys(k for r in items for k in r if not isinstance(r[k], dict | list)))
            rows = [[fmt(str(r.get(k, ""))) for k in keys] for r in items]
            parts.append((f"`{title}`\n\n" if title else "") + table(keys, rows))

    if isinstance(data, list):
        records(data, None)
    elif isinstance(data, dict):
        scalars = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
        if scalars:
            parts.append(table(["field", "value"], [[k, fmt(str(v))] for k, v in scalars.items()]))
        for k, v in data.items():
            if isinstance(v, list):
                records(v, k)
    return "\n\n".join(parts) or None


def verdicts(path: Path) -> list[dict[str, str]]:
    """The decided rows of a ``contrasts.csv`` (those in a declared family), in file order."""
    with path.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("family")]


def verdict_table(rows: list[dict[str, str]]) -> str:
    """The decided contrasts as a table: setting, claim, mean with its t-CI, Holm p in its family, verdict."""
    header = ["G", "decoding", "claim", "metric", "n", "mean", "t 95% CI", "Holm p (family)", "verdict"]
    body = [
        [
            r.get("G", "-"),
            r.get("decoding", "-"),
            r["claim"].replace("|", "\\|"),
            r["metric"],
            r["n"],
            f"{float(r['mean']):+.4f}",
            f"[{float(r['t_lo']):+.4f}, {float(r['t_hi']):+.4f}]",
            f"{fmt(r['p_holm'])} ({r['family']}, {r['family_size']})",
            f"**{r['verdict']}**" + (f" ({r['reason']})" if r.get("reason") else ""),
        ]
        for r in rows
    ]
    return table(header, body)


def per_seed_file(folder: Path) -> Path | None:
    """The folder's per-seed table: ``results.csv``, else the smallest CSV with a ``seed`` column, else None."""
    if (folder / "results.csv").is_file():
        return folder / "results.csv"
    with_seed = []
    for p in sorted(folder.glob("*.csv")):
        with p.open(newline="") as f:
            header = next(csv.reader(f), [])
            if "seed" in header:
                with_seed.append((sum(1 for _ in f), p.name, p))
    return min(with_seed)[2] if with_seed else None


def collapsed(label: str, md: str) -> str:
    """`md` in a collapsed block titled `label` (pymdownx.details)."""
    return f'??? note "{label} (open to read)"\n\n' + "\n".join(
        "    " + line if line else "" for line in md.splitlines()
    )


def demote(md: str, levels: int = 1) -> str:
    """Markdown with every ATX heading (outside code fences) moved down `levels`."""
    out, fenced = [], False
    for line in md.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,5} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def title(folder: Path) -> str:
    """The first heading of the folder's ``summary.md`` (or of its first summary file), else the folder name."""
    for md in [folder / "summary.md", *sorted(folder.glob("*.md"))]:
        if md.is_file():
            first = md.read_text().lstrip().splitlines()[:1]
            if first and first[0].startswith("# "):
                return first[0][2:].strip()
    return folder.name


def folder_block(folder: Path, base: str, level: int = 2) -> str:
    """One folder's verdicts, figures, summary files, per-seed table and file list; `base`: its files' link prefix."""
    h = "#" * level
    parts: list[str] = []
    if (folder / "contrasts.csv").is_file():
        decided = verdicts(folder / "contrasts.csv")
        parts.append(
            f"{h} Verdicts\n\nThe decided contrasts of [`contrasts.csv`]({base}contrasts.csv), each in its declared "
            "family (Holm's step-down over the family). Every contrast, descriptive ones included, is in the summary "
            f"below.\n\n" + (verdict_table(decided) if decided else "No contrast here decides a claim.")
        )
    figures = sorted(folder.glob("*.png"))
    if figures:
        lines = [f"{h} Figures"]
        for png in figures:
            data = [p for p in sorted(folder.glob(png.stem + ".*")) if p.suffix != ".png"]
            beside = ", ".join(f"[`{p.name}`]({base}{p.name})" for p in data)
            lines.append(f"![{png.stem}]({base}{png.name})\n\n`{png.name}`" + (f"; data: {beside}" if beside else ""))
        parts.append("\n\n".join(lines))
    for md in sorted(folder.glob("*.md"), key=lambda p: (p.name != "summary.md", p.name)):
        lines = md.read_text().strip().splitlines()
        head = lines.pop(0)[2:].strip() if lines and lines[0].startswith("# ") else ""
        parts.append(f"{h} `{md.name}`" + (f": {head}" if head else "") + "\n\n" + demote("\n".join(lines), level))
    seeds = per_seed_file(folder)
    if seeds is not None:
        rendered = csv_table(seeds)
        body = rendered or f"Too long to show here: [`{seeds.name}`]({base}{seeds.name})."
        parts.append(f"{h} Per-seed table\n\n" + collapsed(seeds.name, body))
    for sub in sorted(d for d in folder.iterdir() if d.is_dir() and _data_files(d)):
        parts.append(f"{h} `{sub.name}/`\n\n" + folder_block(sub, f"{base}{sub.name}/", level + 1))
    for js in sorted(folder.glob("*.json")):
        rendered = json_tables(js) if js.name != "config.json" and not js.name.startswith(".") else None
        if rendered:
            parts.append(f"{h} `{js.name}`\n\n" + collapsed(js.name, rendered))
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p in _data_files(folder)]
    if files:
        parts.append(
            f"{h} Files\n\n"
            + "\n".join(
                f"* `{p.name}` (shown above)" if p.suffix == ".md" else f"* [`{p.name}`]({base}{p.name})" for p in files
            )
        )
    return "\n\n".join(parts)


def experiment_page(name: str, figures: Path = PAPER_FIGURES, root: Path = ROOT) -> str:
    """The results page of ``paper_figures/<name>/``."""
    folder = figures / name
    text = design(name, root)
    module = DESIGN_MODULE.get(name, name)
    head = f"# {title(folder)}\n\nFolder: `paper_figures/{name}/`."
    if text:
        head += f"\n\n## Design\n\nFrom the docstring of `reproduce/{module}.py`, written before its runs:\n\n{text}"
    return head + "\n\n" + folder_block(folder, f"{name}/") + "\n"


def results_index(figures: Path = PAPER_FIGURES) -> str:
    """One row per experiment: its page, its question, the verdict counts of its decided contrasts."""
    rows = []
    for name in experiments(figures):
        folder = figures / name
        counts = ""
        if (folder / "contrasts.csv").is_file():
            tally: dict[str, int] = {}
            for r in verdicts(folder / "contrasts.csv"):
                tally[r["verdict"]] = tally.get(r["verdict"], 0) + 1
            counts = ", ".join(f"{n} {v}" for v, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append([f"[{name}]({name}.md)", title(folder).replace("|", "\\|"), counts or "-"])
    return table(["experiment", "question", "decided contrasts"], rows)


def speed_page(source: str, figures: Path = PAPER_FIGURES) -> str:
    """``docs/speed.md`` with each ``<!-- render: FOLDER -->`` marker replaced by that folder's block."""

    def block(m: re.Match) -> str:
        folder = figures / m.group(1)
        if not folder.is_dir():
            raise FileNotFoundError(f"speed page: {m.group(0)} names no folder of {figures}")
        return folder_block(folder, m.group(1).rstrip("/") + "/", level=3)

    return MARKER.sub(block, source)


def methods_table() -> str:
    """The registered diversity methods side by side (`setpo.methods`): where each enters, what it reads, defaults."""
    from setpo import methods  # torch: imported only when the methods page is built

    rows = []
    for name in methods.available_methods():
        m = methods.get_method(name)
        defaults = ", ".join(f"`{k}={v!r}`" for k, v in m.defaults.items() if not callable(v))
        rows.append(
            [
                f"`{name}`",
                m.entry,
                ", ".join(sorted(m.needs)),
                m.formula.replace("|", "\\|"),
                defaults or "-",
                m.citation,
            ]
        )
    return table(["name", "enters at", "reads", "formula", "defaults", "source"], rows)


def theory_table() -> str:
    """Each result the theory checks cover (`theory.RESULTS`): its module and what its checks prove."""
    import theory  # sympy: imported only when the theory page is built

    rows = [
        [r.title.replace("|", "\\|"), f"`theory/{r.module}.py`", r.scope().replace("|", "\\|")] for r in theory.RESULTS
    ]
    return table(["result", "checked in", "what the checks prove"], rows)


#: markers a source page may hold, each replaced by a table rendered from the code
TABLES: dict[str, Callable[[Path], str]] = {
    "<!-- render-table: experiments -->": results_index,
    "<!-- render-table: methods -->": lambda figures: methods_table(),
    "<!-- render-table: theory -->": lambda figures: theory_table(),
}


def fill(markdown: str, figures: Path = PAPER_FIGURES) -> str:
    """A source page with its ``<!-- render: FOLDER -->`` and ``<!-- render-table: ... -->`` markers rendered."""
    for marker, render in TABLES.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render(figures))
    return speed_page(markdown, figures)


def has_markers(markdown: str) -> bool:
    """Whether a source page holds a marker that `fill` replaces."""
    return bool(MARKER.search(markdown)) or any(m in markdown for m in TABLES)


def site(docs: Path, figures: Path = PAPER_FIGURES, root: Path = ROOT) -> Site:
    """Every rendered page and copied file of the site (paths relative to the docs folder). Source pages of `docs`
    that hold markers are rendered too (`Site.sources` names them: they exist in the docs folder already)."""
    out = Site()
    for name in experiments(figures):
        out.pages[f"results/{name}.md"] = experiment_page(name, figures, root)
        for p in _copied(figures / name):
            out.files[f"results/{name}/{p.relative_to(figures / name).as_posix()}"] = p
    for name, page in TOP_PAGES.items():
        if (figures / name).is_file():
            out.pages[page] = (figures / name).read_text()
    for p in figures.glob("*.csv"):
        out.files[f"results/{p.name}"] = p
    for source in sorted(docs.rglob("*.md")) if docs.is_dir() else []:
        text = source.read_text()
        if not has_markers(text):
            continue
        uri = source.relative_to(docs).as_posix()
        out.pages[uri] = fill(text, figures)
        out.sources.add(uri)
        prefix = uri.rsplit("/", 1)[0] + "/" if "/" in uri else ""
        for name in sorted(set(MARKER.findall(text))):
            for p in _copied(figures / name):
                out.files[f"{prefix}{name.rstrip('/')}/{p.relative_to(figures / name).as_posix()}"] = p
    return out


def main(argv: list[str] | None = None) -> int:
    """List the rendered pages; --write DIR writes them (and the copied files' list) to DIR."""
    p = argparse.ArgumentParser(prog="python -m reproduce.docs_pages", description=__doc__.strip().splitlines()[0])
    p.add_argument("--write", metavar="DIR", help="write the rendered pages under DIR (e.g. a temporary folder)")
    args = p.parse_args(argv)
    rendered = site(ROOT / "docs")
    for page, text in rendered.pages.items():
        print(f"{page}: {len(text.splitlines())} lines")
    print(f"{len(rendered.files)} files copied from paper_figures/")
    if args.write:
        out = Path(args.write)
        if out.resolve() == (ROOT / "docs").resolve():
            raise SystemExit("error: --write into docs/ would commit generated pages; name another folder")
        for page, text in rendered.pages.items():
            (out / page).parent.mkdir(parents=True, exist_ok=True)
            (out / page).write_text(text)
        print(f"wrote {len(rendered.pages)} pages under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
