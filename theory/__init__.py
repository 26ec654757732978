"""Machine checks of every theorem of the SetPO paper: symbolic (sympy; the finite-group identities proven for
a symbolic group size G in `theory.general`), numeric (torch float64, >= 10,000 random instances per result,
reusing the setpo core), counterexample searches with an assumption dropped, tightness of the bounds,
consistency of D(S), and an audit of the paper's printed arithmetic.

Run everything with ``python -m theory`` (``--quick``, ``--only NAME``); each check is a function returning a
`CheckRecord`, so tests call them directly.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from theory.records import CheckRecord, Verdict


@dataclass(frozen=True)
class Result:
    """A result of the paper (or a project-level claim) and the module that checks it."""

    key: str
    title: str
    module: str
    aliases: tuple[str, ...] = ()

    def load(self):
        """The checking module."""
        return importlib.import_module(f"theory.{self.module}")

    def scope(self) -> str:
        """What the module's proof for a symbolic group size covers (GENERAL_SCOPE), or why it has none."""
        module = self.load()
        return getattr(module, "GENERAL_SCOPE", "") or getattr(module, "NO_GENERAL_PROOF", "")

    def run(self, quick: bool = False) -> list[CheckRecord]:
        """Every check of this result."""
        return self.load().run(quick)


RESULTS: tuple[Result, ...] = (
    Result(
        "thm_4_2",
        'Thm 4.2 = C.2 ("Theorem 3.2"): diversity influence function',
        "thm_4_2_influence",
        ("4.2", "C.2", "3.2"),
    ),
    Result(
        "assumption_c3", "Assumption C.3: local smoothness at a kernel threshold", "assumption_c3_smoothness", ("C.3",)
    ),
    Result(
        "lemma_c4", 'Lemma C.4 ("Lemma 3.4"): proxy reduction with explicit remainder', "lemma_c4_proxy", ("C.4", "3.4")
    ),
    Result(
        "thm_c5", 'Thm C.5 ("Theorem 3.5"): local monotonicity via curvature', "thm_c5_monotonicity", ("C.5", "3.5")
    ),
    Result("cor_c6", "Cor C.6: -log(1+m) satisfies the curvature condition", "cor_c6_neglog1p", ("C.6",)),
    Result("thm_c7", "Thm C.7: finite perturbation bounds", "thm_c7_finite_perturbation", ("C.7",)),
    Result("thm_c8", "Thm C.8: monotone certified gain", "thm_c8_certified_gain", ("C.8",)),
    Result("lemma_d1", "Lemma D.1: density update under removal", "lemma_d1_removal", ("D.1",)),
    Result("thm_4_3", "Thm 4.3 = D.2: exact decomposition of s_i", "thm_4_3_decomposition", ("4.3", "D.2")),
    Result("thm_4_4", "Thm 4.4 = D.3: strict anti-redundancy", "thm_4_4_anti_redundancy", ("4.4", "D.3")),
    Result("thm_4_5", "Thm 4.5 = D.4: dominance ordering", "thm_4_5_dominance", ("4.5", "D.4")),
    Result("cor_d5", "Cor D.5: weighted gap", "cor_d5_weighted_gap", ("D.5",)),
    Result("cor_d6", "Cor D.6: dilution vs congestion", "cor_d6_dilution", ("D.6",)),
    Result("consistency", "D(S) as a consistent estimator of F(P)", "consistency", ()),
    Result(
        "credit_properties",
        "Credit properties not stated in the paper (equivariance, duplicates, scale)",
        "credit_properties",
        (),
    ),
    Result(
        "arithmetic",
        "Audit of the paper's printed arithmetic (Tables 1-3, gains, text)",
        "paper_arithmetic",
        ("tables",),
    ),
)


def find(name: str) -> Result:
    """The result whose key, module name or label (e.g. 'D.3', '3.4') is `name` (case-insensitive)."""
    want = name.strip().lower()
    for res in RESULTS:
        if want in (res.key, res.module, *[a.lower() for a in res.aliases]):
            return res
    raise ValueError(f"unknown result {name!r}; choose from {[r.key for r in RESULTS]} or a label such as 'D.3'")


__all__ = ["RESULTS", "CheckRecord", "Result", "Verdict", "find"]
