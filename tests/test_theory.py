"""The theory checks in quick mode (every theorem of the paper), their ability to fail, and the runner."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `theory` lives at the repository root

from setpo import Shaping, influence, local_mass, loo_credits  # noqa: E402
from theory import (  # noqa: E402
    RESULTS,
    Verdict,
    consistency,
    cor_d5_weighted_gap,
    cor_d6_dilution,
    find,
    general,
    lemma_d1_removal,
    paper_arithmetic,
    report,
    thm_4_2_influence,
    thm_4_3_decomposition,
    thm_4_4_anti_redundancy,
    thm_4_5_dominance,
    thm_c5_monotonicity,
    thm_c7_finite_perturbation,
    thm_c8_certified_gain,
)
from theory import __main__ as cli  # noqa: E402
from theory.strategies import distributions, dominance_instances, kernels, property_record, shapings  # noqa: E402


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: r.key)
def test_result_checks_quick(result):
    """Every check of every result has its expected verdict; identities hold to rounding, symbolic ones exactly."""
    records = result.run(quick=True)
    assert records, f"{result.key} produced no checks"
    for rec in records:
        assert rec.ok, f"{rec.result} / {rec.check}: {rec.verdict.value} (expected {rec.expected.value}) {rec.detail}"
        assert rec.instances > 0
        if rec.kind in ("symbolic", "proof"):
            assert rec.worst == 0
        if rec.kind == "proof":
            assert rec.scope == general.ALL_G
        if rec.kind == "numeric" and rec.metric.startswith("max abs error"):
            assert rec.worst <= 1e-12 if "1e-12" in rec.metric else rec.worst <= 1e-8


def test_every_paper_result_is_covered():
    labels = {a for r in RESULTS for a in r.aliases}
    for label in (
        "4.2",
        "C.2",
        "3.2",
        "C.3",
        "C.4",
        "3.4",
        "C.5",
        "3.5",
        "C.6",
        "C.7",
        "C.8",
        "D.1",
        "4.3",
        "D.2",
        "4.4",
        "D.3",
        "4.5",
        "D.4",
        "D.5",
        "D.6",
    ):
        assert label in labels


def test_counterexamples_are_verified_instances():
    """The explicit counterexamples break their conclusion by a clear margin, not by rounding."""
    printed = thm_c5_monotonicity.check_printed_order()
    assert printed.verdict == Verdict.COUNTEREXAMPLE and printed.worst > 0.1  # 0.4493 - 0.3
    curvature = thm_c5_monotonicity.check_curvature_violated()
    assert curvature.verdict == Verdict.COUNTEREXAMPLE and curvature.worst > 0.01
    increasing = thm_4_4_anti_redundancy.check_increasing_g()
    assert increasing.verdict == Verdict.COUNTEREXAMPLE and increasing.worst == pytest.approx(2 / 9)
    flat = thm_4_5_dominance.check_flat_g()
    assert flat.verdict == Verdict.COUNTEREXAMPLE and flat.worst == 0.0
    constant = thm_c8_certified_gain.check_constant_g()
    assert constant.verdict == Verdict.COUNTEREXAMPLE


# --- the checks can fail: deliberately broken inputs ------------------------------------------------------------


def test_increasing_g_fails_anti_redundancy():
    rec = thm_4_4_anti_redundancy.check_sign(total=64, shapings=("increasing",))
    assert rec.verdict == Verdict.FAIL and not rec.ok and rec.worst > 0


def test_increasing_g_fails_dominance():
    rec = thm_4_5_dominance.check_numeric(total=64, shapings=("increasing",))
    assert rec.verdict == Verdict.FAIL and rec.worst < 0


def test_flat_g_fails_dilution_equivalence():
    rec = cor_d6_dilution.check_numeric(total=64, shapings=("flat",))
    assert rec.verdict == Verdict.FAIL and rec.worst > 0


def test_constant_g_fails_certified_gain():
    rec = thm_c8_certified_gain.check_numeric(total=64, shapings=("constant",))
    assert rec.verdict == Verdict.FAIL


WRONG_DERIVATIVE = Shaping("wrong_dg", lambda x: -torch.log1p(x), lambda x: 1.0 / (1.0 + x), lambda x: 0.0 * x)


def test_wrong_derivative_fails_influence():
    """A shaping whose g' has the wrong sign makes the core's influence() disagree with autograd."""
    rec = thm_4_2_influence.check_numeric(total=64, shapings=(WRONG_DERIVATIVE,))
    assert rec.verdict == Verdict.FAIL and rec.worst > 1e-3


def test_zero_derivative_fails_finite_perturbation_bound():
    """With g' reported as 0, M = 0 and the bound collapses to the main term: the check must notice."""
    lying = Shaping("zero_dg", lambda x: -torch.log1p(x), lambda x: 0.0 * x, lambda x: 0.0 * x)
    rec = thm_c7_finite_perturbation.check_numeric(thm_c7_finite_perturbation.sweep(64, shapings=(lying,)))
    assert rec.verdict == Verdict.FAIL and rec.worst < 0


def test_audit_fails_when_a_known_inconsistency_disappears():
    data = copy.deepcopy(paper_arithmetic.load())
    row = data["tables"]["1"]["rows"]["DAPO"]
    row[-1] = 51.5  # the Avg its cells give
    assert paper_arithmetic.check_audit(data).verdict == Verdict.FAIL


def test_symbolic_check_can_fail(monkeypatch):
    """Break Lemma D.1's printed form (G-1 instead of G-2): the symbolic check reports non-identities."""
    original = lemma_d1_removal.S.set_local_mass

    def off_by_one(K, j, members):
        return original(K, j, members) * (len(members) - 1) / len(members)

    monkeypatch.setattr(lemma_d1_removal.S, "set_local_mass", off_by_one)
    assert lemma_d1_removal.check_symbolic((3, 4)).verdict == Verdict.FAIL


def test_property_runner_reports_failure():
    def prop(K):
        assert float(K.sum()) < 4, "sum too large"

    rec = property_record("R", "sum below 4", kernels(), prop, 50)
    assert rec.verdict == Verdict.FAIL and rec.instances >= 1 and "sum too large" in rec.detail


# --- proofs for a symbolic group size G ------------------------------------------------------------------------

FINITE_GROUP = ("lemma_d1", "thm_4_3", "thm_4_4", "thm_4_5", "cor_d5", "cor_d6")


@pytest.mark.parametrize("key", FINITE_GROUP)
def test_finite_group_identity_proven_for_all_g(key):
    """Each finite-group result has a general proof that holds, and the report calls it proven for all G."""
    res = find(key)
    records = [r for r in res.run(quick=True) if r.kind in ("proof", "symbolic")]
    proofs = [r for r in records if r.kind == "proof"]
    assert proofs and all(r.verdict == Verdict.PASS and r.detail.startswith("proven: ") for r in proofs)
    assert report.status(records) == (report.PROVEN, "")
    assert res.scope()


def _d1():
    G, j = general.G, general.J
    literal, m_j, _, _ = lemma_d1_removal.general_forms()
    return G, literal, m_j, general.Group(1).k(0, j)


def _wrong_identities():
    """(name, lhs, rhs, nonzero): each differs from a true identity by one slip."""
    G, literal, m_j, k_ji = _d1()
    credit, rhs_43, _ = thm_4_3_decomposition.general_decomposition()
    group1 = general.Group(1)
    wrong_norm = rhs_43 - 2 * (sp.Integer(1) / G - sp.Integer(1) / (G - 1)) * group1.rest_sum(
        general.S.g(m_j)
    )  # normalisation term with the wrong sign
    derived, printed, _ = thm_4_4_anti_redundancy.general_derivative()
    t = cor_d5_weighted_gap.general_terms()
    diff, scaled = cor_d6_dilution.general_difference()
    return [
        ("D.1 normalised by G-1 instead of G-2", ((G - 1) * m_j - k_ji) / (G - 1), literal, ()),
        ("D.1 with G m_j instead of (G-1) m_j", (G * m_j - k_ji) / (G - 2), literal, ()),
        ("4.3 normalisation term with the wrong sign", credit, wrong_norm, ()),
        ("4.4 over G^2 instead of G(G-1)", derived, printed * (G - 1) / G, ()),
        ("4.4 with a wrong sign", derived, -printed, ()),
        ("D.5 over (G-1)^2", t["gap"], t["rhs"] * (G - 2) / (G - 1), [t["a0"] - t["b0"], t["aj"] - t["bj"]]),
        ("D.6 over G-1", diff, scaled * (G - 2) / (G - 1), ()),
    ]


@pytest.mark.parametrize("case", _wrong_identities(), ids=lambda c: c[0])
def test_general_prover_rejects_wrong_identity(case):
    name, lhs, rhs, nonzero = case
    proof = general.prove(lhs, rhs, name, nonzero=nonzero)
    assert not proof.holds and proof.residual != 0 and "residual" in str(proof)


def test_general_prover_rejects_identity_true_only_at_one_size():
    """m_j + 2(m_j - k_ji)/(G-2)^2 equals the reduced mass at G = 4 only: a fixed-size check passes, the proof not."""
    G, literal, m_j, k_ji = _d1()
    wrong = m_j + 2 * (m_j - k_ji) / (G - 2) ** 2
    group = general.Group(1)
    compared, bad = general.agrees_with_expansion(
        group,
        [(wrong, lambda size, j: general.S.set_local_mass(general.S.kernel_matrix(size), j, range(1, size)))],
        [4],
    )
    assert compared == 3 and bad == []
    assert general.prove(wrong, literal).holds is False
    assert general.prove(m_j + (m_j - k_ji) / (G - 2), literal).holds


def test_general_check_fails_and_report_falls_back(monkeypatch):
    """A wrong printed form makes check_general FAIL, and the status names the fixed sizes instead of 'all G'."""
    G, literal, m_j, k_ji = _d1()
    monkeypatch.setattr(lemma_d1_removal, "general_forms", lambda: (literal, m_j, (G * m_j - k_ji) / (G - 2), literal))
    rec = lemma_d1_removal.check_general()
    assert rec.verdict == Verdict.FAIL and rec.worst == 1 and "FAILED" in rec.detail
    fixed = lemma_d1_removal.check_symbolic((3, 4))
    numeric = lemma_d1_removal.check_numeric(64)
    text, reason = report.status([rec, fixed, numeric])
    assert text == "checked for G = 3, 4 and numerically" and reason.startswith("general proof failed")
    table = "\n".join(report.status_table([rec, fixed, numeric], {"Lemma D.1": "why"}))
    assert "| Lemma D.1 | checked for G = 3, 4 and numerically |" in table


def test_general_proof_needs_nonvanishing_denominators():
    G, x = general.G, sp.Symbol("x")
    assert general.prove((G * x - 2 * x) / (G - 2), x).holds
    vanishing = general.prove((G * x - 3 * x) / (G - 3), x)  # equal only where G != 3
    assert vanishing.residual == 0 and not vanishing.holds and vanishing.unjustified == (G - 3,)
    t = cor_d5_weighted_gap.general_terms()
    assert not general.prove(t["gap"], t["rhs"]).holds  # the divided differences need the case split
    assert general.prove(t["gap"], t["rhs"], nonzero=[t["a0"] - t["b0"], t["aj"] - t["bj"]]).holds


def test_positive_for_all_g():
    G = general.G
    assert general.positive_for_all_g(1 / (G - 2)) and general.positive_for_all_g(G * (G - 1))
    assert not general.positive_for_all_g(1 / (G - 3)) and not general.positive_for_all_g(G - 4)


def test_canonical_form_sums():
    """Linearity and renamed indices are identified; a product of sums is not a sum of products."""
    a, b, j, z = sp.IndexedBase("a"), sp.IndexedBase("b"), general.J, general.Z
    G = general.G

    def R(body, idx=j):
        return sp.Sum(body, (idx, 1, G - 1))

    assert general.reduce(R(a[j] + 2 * G * b[j]) - R(a[z], z) - 2 * G * R(b[j])) == 0
    assert general.reduce(R(sp.Integer(3)) - 3 * (G - 1)) == 0
    assert general.reduce(R(a[j] * b[j]) - R(a[j]) * R(b[j])) != 0
    assert general.reduce(R(a[j] * R(b[z], z)) - R(a[j]) * R(b[j])) == 0


def test_group_model_input_errors():
    with pytest.raises(ValueError, match="n \\(distinguished members\\)"):
        general.Group(3)
    with pytest.raises(ValueError, match="size must be >= 3"):
        general.Group(1).instantiate(general.G, 2)
    with pytest.raises(ValueError, match="row sum q"):
        general.Group(1).k(general.J, general.Z)


# --- hypothesis properties on the discrete results ---------------------------------------------------------------


@given(kernels(), shapings)
def test_lemma_d1_property(K, g):
    m = local_mass(K)
    for i in range(K.shape[0]):
        formula = lemma_d1_removal.removal_formula(m, K, i)
        assert torch.allclose(formula, local_mass(lemma_d1_removal.without(K, i)), atol=1e-12)


@given(dominance_instances(), shapings)
def test_dominance_property(inst, g):
    s = loo_credits(inst.K, g)
    assert s[inst.r] > s[inst.c]


@given(kernels(), shapings, st.data())
def test_anti_redundancy_property(K, g, data):
    i, t = data.draw(st.permutations(range(K.shape[0])))[:2]
    auto = thm_4_4_anti_redundancy.autograd_derivative(K, g)[i, t]
    pred = thm_4_4_anti_redundancy.predicted_derivative(K, g)[i, t]
    assert abs(float(auto - pred)) <= 1e-12 and float(auto) < 0


@settings(max_examples=30)
@given(distributions(), shapings)
def test_influence_property(case, g):
    p, K = case
    auto = thm_4_2_influence.autograd_influence(p, K, g)
    assert torch.allclose(auto, influence(p, K, g).influence, atol=1e-12)


# --- paper arithmetic --------------------------------------------------------------------------------------------


def test_paper_arithmetic_findings():
    found = set(paper_arithmetic.inconsistent(paper_arithmetic.audit()))
    assert found == {
        "Table 1 Avg DAPO",
        "Table 2 Avg SetPO+GSPO",
        "Table 1 gain SetPO+GRPO vs GRPO AIME24",
        "Table 1 gain SetPO+DAPO vs DAPO College",
        "Text on Table 1: GRPO AIME24 quoted as 15.7",
        "Table 7 rollout temperature",
    }
    items = {it.label: it for it in paper_arithmetic.audit()}
    assert items["Table 1 Avg DAPO"].recomputed == "51.5333"
    assert items["Table 2 Avg SetPO+GRPO"].status == "consistent"  # 46.65 -> 46.7 rounding half up


def test_paper_tables_are_complete():
    data = json.loads(paper_arithmetic.DATA.read_text())
    for tid in ("1", "2"):
        table = data["tables"][tid]
        assert len(table["rows"]) == 7 and all(len(v) == 7 for v in table["rows"].values())


# --- runner, report, notebooks -----------------------------------------------------------------------------------


def test_find_by_label():
    assert find("3.4").key == "lemma_c4" and find("D.3").key == "thm_4_4" and find("thm_c7").key == "thm_c7"
    with pytest.raises(ValueError, match="unknown result"):
        find("Thm 9.9")


def test_cli_only_quick(capsys, tmp_path):
    code = cli.main(["--only", "D.1,cor_c6", "--quick", "--report", str(tmp_path / "r.md")])
    out = capsys.readouterr().out
    assert code == 0 and "Lemma D.1" in out and "Cor C.6" in out
    text = (tmp_path / "r.md").read_text()
    assert "| Lemma D.1 |" in text and "unexpected outcomes" in text


def test_report_bias_table_comes_from_this_run(tmp_path):
    """The D(S) bias table is built from the records of the run itself, not left over from an earlier run."""
    first, second = tmp_path / "consistency.md", tmp_path / "c6.md"
    assert cli.main(["--only", "consistency", "--quick", "--report", str(first)]) == 0
    assert "D(S) versus F(P)" in first.read_text()
    assert cli.main(["--only", "C.6", "--quick", "--report", str(second)]) == 0
    assert "D(S) versus F(P)" not in second.read_text()


def test_bias_order_needs_consistency_rows():
    with pytest.raises(ValueError, match="check_consistency"):
        consistency.check_bias_order(())


def test_cli_rejects_unknown_name():
    with pytest.raises(SystemExit):
        cli.main(["--only", "nope", "--quick"])


def test_report_flags_unexpected():
    bad = thm_4_4_anti_redundancy.check_sign(total=16, shapings=("increasing",))
    assert "!!" in report.text_table([bad])
