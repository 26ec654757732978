"""The claims table and the README's answer: they read the published contrasts, each verdict comes from the decision
rule with Holm over the claim's declared family, and the committed files are their render."""

from __future__ import annotations

import csv
import shutil

import pytest

from reproduce import claims, verdicts
from reproduce.common import PAPER_FIGURES

FIELDS = "G decoding claim metric n mean t_lo t_hi p_exact boot_lo boot_hi seeds_up seeds_down at_ceiling".split()


def test_committed_table_is_the_render_of_the_published_contrasts():
    assert (PAPER_FIGURES / claims.OUT).read_text() == claims.render()
    assert len(claims.rows()) == sum(len(c.rows) for c in claims.CLAIMS)


def test_readme_answer_is_the_render_of_the_claims():
    text = claims.README.read_text()
    assert text == claims.readme_with_answer(text)
    block = text.split(claims.BEGIN)[1].split(claims.END)[0].strip().splitlines()
    assert 3 <= len(block) <= 12


def test_published_summaries_are_their_render_from_the_per_problem_files():
    # smollm2_primes: 12 test windows, fast to recompute; the others are rendered by the same functions
    con = verdicts.recompute("smollm2_primes")
    committed = (PAPER_FIGURES / "smollm2_primes" / "contrasts.csv").read_text()
    assert con.to_csv(index=False) == committed


def _figures(tmp_path, n: int, p: float, lo: float, hi: float, up: int, down: int, at_ceiling: str = ""):
    rows = [r for c in claims.CLAIMS for r in c.rows]
    for exp in {r[0] for r in rows}:
        (tmp_path / exp).mkdir(exist_ok=True)
        with (tmp_path / exp / "contrasts.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            for e, G, dec, contrast, metric in rows:
                if e == exp:
                    w.writerow([G, dec, contrast, metric, n, (lo + hi) / 2, lo, hi, p, lo, hi, up, down, at_ceiling])
    return tmp_path


def test_verdicts_come_from_the_rule_with_holm_over_the_family(tmp_path):
    # p 0.002 in every row: Holm multiplies by the family size (8 frontier settings -> 0.016 < 0.05)
    rows = claims.rows(_figures(tmp_path, 10, 0.002, 0.01, 0.2, 10, 0))
    decided = [r for r in rows if r["family"]]
    assert {r["verdict"] for r in decided} == {"confirmed"}
    frontier = [r for r in rows if r["key"] == "frontier"]
    assert all(r["p_holm"] == pytest.approx(0.016) and r["family"] == 8 for r in frontier)
    assert {r["verdict"] for r in rows if not r["family"]} == {"-"}  # descriptive rows decide nothing
    rows = claims.rows(_figures(tmp_path, 10, 0.01, 0.01, 0.2, 10, 0))  # 0.01 x 8 = 0.08: not confirmed
    assert {r["verdict"] for r in rows if r["key"] == "frontier"} == {"inconclusive"}


def test_five_seeds_and_all_zero_gaps(tmp_path):
    rows = claims.rows(_figures(tmp_path, 5, 0.0625, 0.01, 0.2, 5, 0))
    assert {r["verdict"] for r in rows if r["family"]} == {"too few seeds"}
    rows = claims.rows(_figures(tmp_path, 5, 1.0, 0.0, 0.0, 0, 0))
    assert {r["verdict"] for r in rows if r["family"]} == {"no difference"}  # never "refuted"
    rows = claims.rows(_figures(tmp_path, 5, 1.0, 0.0, 0.0, 0, 0, "5"))
    assert {r["verdict"] for r in rows if r["key"] == "frontier"} == {"untestable (at ceiling)"}


def test_a_claim_missing_from_the_published_results_is_named(tmp_path):
    figures = _figures(tmp_path, 10, 0.5, -0.1, 0.1, 5, 5)
    exp, _, _, contrast, _ = claims.CLAIMS[0].rows[0]
    path = figures / exp / "contrasts.csv"
    path.write_text("\n".join(line for line in path.read_text().splitlines() if contrast not in line) + "\n")
    with pytest.raises(KeyError, match="has no contrast"):
        claims.rows(figures)


def test_corrections_list_every_earlier_row(tmp_path):
    figures = _figures(tmp_path, 10, 0.5, -0.1, 0.1, 5, 5)
    shutil.copy(PAPER_FIGURES / claims.PREVIOUS, figures / claims.PREVIOUS)
    fixes = claims.corrections(claims.rows(figures), figures)
    assert len(fixes) == 25 and all(" -> " in f for f in fixes)
