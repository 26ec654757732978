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


def test_confirmatory_rows_lead_the_answer_with_their_own_verdicts(tmp_path):
    figures = _figures(tmp_path, 10, 0.5, -0.1, 0.1, 5, 5)
    exp = claims.CONFIRMATORY[0][0]
    (figures / exp).mkdir()
    cols = ["arm", "claim", "metric", "n", "mean", "t_lo", "t_hi", "p_exact", "boot_lo", "boot_hi", "seeds_up",
            "rel", "rel_lo", "rel_hi", "p_holm", "verdict"]  # fmt: skip
    with (figures / exp / "contrasts.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerow(["setpo_r0.3", "H1: setpo_r0.3 lies above GRPO's frontier", "pass@32 gap", 20, -0.05, -0.08,
                    -0.02, 0.001, -0.09, -0.01, 2, -0.1, -0.2, 0.0, 0.002, "refuted"])  # fmt: skip
        h2 = "H2: setpo_r0.3 beats placebo_r0.3 at matched pass@1"
        w.writerow(["setpo_r0.3", h2, "pass@32 gap minus placebo's", 20, 0.04, 0.01, 0.07, 0.01, 0.005, 0.08, 15,
                    "", "", "", 0.01, "confirmed"])  # fmt: skip
        w.writerow(["setpo_r0.3", "H3: setpo_r0.3 minus GRPO end point", "pass@1", 20, -0.01, -0.03, 0.01, 0.3,
                    -0.03, 0.01, 8, -0.05, -0.15, 0.05, "", "-"])  # fmt: skip
        w.writerow(["placebo_r0.3", "placebo_r0.3 minus GRPO end point", "pass@1", 20, 0.0, -0.01, 0.01, 1.0, -0.01,
                    0.01, 10, "", "", "", "", "-"])  # fmt: skip
    conf = claims.confirmatory(figures)
    assert [r["hypothesis"] for r in conf] == ["H1", "H2", "H3"]  # the placebo's own row is not a hypothesis
    assert [r["verdict"] for r in conf] == ["refuted", "confirmed", "reported"]
    lines = claims.answer(figures).splitlines()
    assert "H1" in lines[1] and "**refuted**" in lines[1] and "**confirmed**" in lines[1] and "20 seeds" in lines[1]
    assert "no results published yet" in lines[2]  # the other confirmatory experiment
    assert "## Pre-registered confirmatory experiments" in claims.render(figures)
