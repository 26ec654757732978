"""The mutation battery of theory/: every check fails on at least one plausible slip of its formula (0 survivors),
every check function has a mutant (or is a listed measurement), and no counterexample search lacks an expectation."""

from __future__ import annotations

import pytest

from theory import mutants, records


@pytest.fixture(scope="module")
def outcomes() -> list[mutants.Outcome]:
    return mutants.battery()


def test_every_mutant_is_killed_and_its_baseline_passes(outcomes, capsys):
    with capsys.disabled():
        print()
        for o in outcomes:
            word = "killed" if o.killed and o.baseline_ok else "survived"
            print(f"{word:9s} {o.mutant.check:55s} {o.mutant.slip}")
    assert len(outcomes) == len(mutants.MUTANTS)
    survived = [f"{o.mutant.check}: {o.mutant.slip} [{o.detail}]" for o in outcomes if not o.killed]
    failing_baseline = [f"{o.mutant.check}: {o.baseline}" for o in outcomes if not o.baseline_ok]
    assert not survived, survived
    assert not failing_baseline, failing_baseline


def test_every_check_has_a_mutant_or_is_a_listed_measurement():
    assert mutants.uncovered() == []
    checks = set(mutants.all_checks())
    assert set(mutants.MEASUREMENTS) <= checks
    assert len(checks) >= 80  # the discovery itself found the checks


def test_a_harmless_edit_survives_and_a_stale_slip_is_reported():
    """The battery can report a survivor: an edit to a docstring leaves the check passing."""
    harmless = mutants.Mutant(
        "lemma_d1_removal.check_numeric",
        "theory.lemma_d1_removal",
        "Lemma D.1's right-hand side",
        "Lemma D.1's right hand side",
        "a docstring edit",
        "m.check_numeric(100)",
    )
    outcome = mutants.run_mutant(harmless)
    assert outcome.baseline_ok and not outcome.killed
    stale = mutants.Mutant("lemma_d1_removal.check_numeric", "theory.lemma_d1_removal", "no such text", "x", "stale")
    assert "BAD MUTANT" in mutants.run_mutant(stale).detail


def test_a_search_without_an_expected_outcome_is_refused():
    with pytest.raises(ValueError, match="expected outcome"):
        records.search_record("R", "check", 1, True, 0.0, "", None)
    found = records.search_record("R", "check", 1, True, 0.0, "", expect_found=False)
    assert not found.ok
