"""MkDocs hooks: the results, speed and theory-report pages are rendered from paper_figures/ at build time."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, ROOT)

from reproduce import docs_pages  # noqa: E402

_SITE: docs_pages.Site | None = None


def _site(config) -> docs_pages.Site:
    global _SITE
    if _SITE is None:
        _SITE = docs_pages.site(Path(config["docs_dir"]))
    return _SITE


def on_config(config):
    """Start each build afresh and list every experiment's page under Results in the navigation."""
    global _SITE
    _SITE = None
    if ROOT not in sys.path:  # MkDocs drops what a hook module put on sys.path while it loaded
        sys.path.insert(0, ROOT)
    for item in config["nav"] or []:
        if isinstance(item, dict) and "Results" in item:
            listed = {p for p in item["Results"] if isinstance(p, str)}
            item["Results"] += [
                {name: f"results/{name}.md"} for name in docs_pages.experiments() if f"results/{name}.md" not in listed
            ]
    return config


def on_files(files, config):
    """Add the rendered pages and the figures and data files they show."""
    site = _site(config)
    for uri, text in site.pages.items():
        if uri in site.sources:
            continue  # a source page: its markers are replaced in on_page_markdown
        files.append(File.generated(config, uri, content=text))
    for uri, path in site.files.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    """A source page with markers: its rendered text (its blocks of paper_figures/ and its tables)."""
    site = _site(config)
    return site.pages[page.file.src_uri] if page.file.src_uri in site.sources else markdown
