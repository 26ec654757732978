"""The claims table: it reads the published contrasts, its verdicts follow the CIs, and the committed file is its
render."""

from __future__ import annotations

import csv

import pytest

from reproduce import claims
from reproduce.common import PAPER_FIGURES

FIELDS = "G decoding claim metric mean lo hi p_signflip seeds_up seeds verdict at_ceiling".split()


def test_committed_table_is_the_render_of_the_published_contrasts():
    assert (PAPER_FIGURES / claims.OUT).read_text() == claims.render()
    assert len(claims.rows()) == len(claims.CLAIMS)


def _figures(tmp_path, lo: float, hi: float, at_ceiling: str = ""):
    for exp in {c.experiment for c in claims.CLAIMS}:
        (tmp_path / exp).mkdir(exist_ok=True)
        with (tmp_path / exp / "contrasts.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            for c in claims.CLAIMS:
                if c.experiment == exp:
                    row = [c.G, c.decoding, c.contrast, c.metric, (lo + hi) / 2, lo, hi, 0.5, 3, 5, "ignored"]
                    w.writerow([*row, at_ceiling])
    return tmp_path


@pytest.mark.parametrize(("lo", "hi", "want"), [(0.01, 0.2, "confirmed"), (-0.2, -0.01, "refuted"),
                                                (-0.1, 0.1, "inconclusive")])  # fmt: skip
def test_verdicts_follow_the_ci_not_the_stored_verdict(tmp_path, lo, hi, want):
    rows = claims.rows(_figures(tmp_path, lo, hi))
    assert {r["verdict"] for r in rows} == {want}
    assert all(r["lo"] == lo and r["hi"] == hi and r["seeds"] == "3/5" for r in rows)


@pytest.mark.parametrize(("at_ceiling", "want", "seeds"), [("5.0", "untestable (at ceiling)", "3/5 (5 at ceiling)"),
                                                          ("2.0", "refuted", "3/5 (2 at ceiling)")])  # fmt: skip
def test_a_frontier_at_its_maximum_on_every_seed_makes_the_claim_untestable(tmp_path, at_ceiling, want, seeds):
    rows = claims.rows(_figures(tmp_path, 0.0, 0.0, at_ceiling))
    assert {r["verdict"] for r in rows} == {want} and {r["seeds"] for r in rows} == {seeds}


def test_a_claim_missing_from_the_published_results_is_named(tmp_path):
    figures = _figures(tmp_path, 0.1, 0.2)
    first = claims.CLAIMS[0]
    path = figures / first.experiment / "contrasts.csv"
    kept = [line for line in path.read_text().splitlines() if first.contrast not in line or first.decoding not in line]
    path.write_text("\n".join(kept) + "\n")
    with pytest.raises(KeyError, match="has no contrast"):
        claims.rows(figures)
