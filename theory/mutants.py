"""Mutation battery: every check in `theory/` must fail on at least one plausible slip of the formula it checks.

A mutant is an exact source edit of one module (a wrong denominator, a dropped constant, M set to 1, a flipped
sign, a search that forgets to drop its assumption, ...). `run_mutant` loads a fresh copy of the check's module,
with the edited module in place of the original wherever the check module refers to it (a module alias such as
``S`` or a name imported from it), calls the check on small sizes and calls the mutant *killed* when a record
comes back with an unexpected outcome (FAIL, or a search whose outcome is not the expected one) or the check
raises. The same call on the unedited modules must pass, so a kill is the slip's doing.

    python -m theory.mutants            # prints "killed" / "survived" per mutant; exit 1 on any survivor

Every function named ``check_*`` in a checking module is covered by at least one mutant, except the
measurements in MEASUREMENTS (records with nothing to pass or fail).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
import types
from dataclasses import dataclass

import torch

from setpo._cli import Parser
from theory import RESULTS
from theory.records import CheckRecord

#: check functions that only measure (an INFO record by design), with the reason.
MEASUREMENTS = {
    "credit_properties.check_scale": "prints the size of s_i next to A_bar; nothing to pass or fail",
}


@dataclass(frozen=True)
class Mutant:
    """One slip: replace `old` (exactly once in `target`) by `new`; `call` runs the check on the module `m`."""

    check: str  # "<module>.<check function>", the check that must fail
    target: str  # dotted module whose source is edited
    old: str
    new: str
    slip: str  # what the slip is, in words
    call: str = ""  # an expression in `m` (the check's module); default m.<check function>()

    @property
    def module(self) -> str:
        return "theory." + self.check.split(".")[0]

    @property
    def expression(self) -> str:
        return self.call or f"m.{self.check.split('.')[1]}()"


def _fresh(name: str, source: str) -> types.ModuleType:
    """A new module object executed from `source` (the original module stays in sys.modules)."""
    original = importlib.import_module(name)
    module = types.ModuleType(name, original.__doc__)
    module.__file__ = original.__file__
    module.__package__ = name.rpartition(".")[0]
    exec(compile(source, original.__file__, "exec"), module.__dict__)
    return module


def mutated_module(mutant: Mutant | None, check_module: str) -> types.ModuleType:
    """A fresh copy of `check_module`, with the mutant's edit applied (None: unedited)."""
    check_source = inspect.getsource(importlib.import_module(check_module))
    if mutant is None:
        return _fresh(check_module, check_source)
    target = importlib.import_module(mutant.target)
    source = inspect.getsource(target)
    if source.count(mutant.old) != 1:
        raise ValueError(f"{mutant.check}: the slip's text occurs {source.count(mutant.old)} times in {mutant.target}")
    edited = source.replace(mutant.old, mutant.new)
    if mutant.target == check_module:
        return _fresh(check_module, edited)
    replacement = _fresh(mutant.target, edited)
    module = _fresh(check_module, check_source)
    rebound = 0
    for name, value in list(vars(module).items()):
        if value is target:
            setattr(module, name, replacement)
            rebound += 1
        elif not isinstance(value, types.ModuleType) and getattr(value, "__module__", None) == mutant.target:
            attr = getattr(value, "__name__", name)
            if getattr(target, attr, None) is value:
                setattr(module, name, getattr(replacement, attr))
                rebound += 1
        elif isinstance(value, dict) and any(value is v for v in vars(target).values()):
            setattr(module, name, getattr(replacement, name))  # a shared table such as EXTRA
            rebound += 1
    if rebound == 0:
        raise ValueError(f"{mutant.check}: {check_module} uses nothing from {mutant.target}")
    return module


def _records(out) -> list[CheckRecord]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def evaluate(mutant: Mutant | None, check_module: str, expression: str) -> tuple[bool, str]:
    """(all records as expected, a short description) of `expression` on the (mutated) check module."""
    module = mutated_module(mutant, check_module)
    try:
        records = _records(eval(expression, {"m": module, "torch": torch}))
    except Exception as err:  # a check that crashes on the slip cannot pass it either
        return False, f"raised {type(err).__name__}: {str(err)[:80]}"
    bad = [r for r in records if not r.ok]
    if not bad:
        return True, "; ".join(f"{r.verdict.value} ({r.metric} {r.worst:.3g})" for r in records)
    return False, "; ".join(f"{r.verdict.value}, expected {r.expected.value} ({r.metric} {r.worst:.3g})" for r in bad)


def _m(check: str, target: str, old: str, new: str, slip: str, call: str = "") -> Mutant:
    return Mutant(
        check, target if target.startswith(("theory.", "setpo.")) else f"theory.{target}", old, new, slip, call
    )


GROUP_MASS = (
    "general",
    "return self.row_sum(y, kept) / (self.size(kept) - 1)",
    "return self.row_sum(y, kept) / self.size(kept)",
)
SET_MASS = (
    "symbolic",
    "return sp.Add(*[K[j, z] for z in members if z != j]) / (len(members) - 1)",
    "return sp.Add(*[K[j, z] for z in members if z != j]) / len(members)",
)
FLAT_G = ("instances", "lambda x: (0.5 - x).clamp(min=0.0) ** 2,", "lambda x: (0.95 - x).clamp(min=0.0) ** 2,")
INFLUENCE = "setpo.core.influence"

MUTANTS: tuple[Mutant, ...] = (
    # --- Thm 4.2 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_4_2_influence.check_symbolic",
        "thm_4_2_influence",
        "interaction = sp.Add(*[p[a] * S.gp(m[a]) * K[a, tau] for a in range(N)])",
        "interaction = sp.Add(*[S.gp(m[a]) * K[a, tau] for a in range(N)])",
        "interaction term without the weights p_a",
        "m.check_symbolic((1, 2))",
    ),
    _m(
        "thm_4_2_influence.check_symbolic_split",
        "thm_4_2_influence",
        "+ (1 - eps) * sp.Add(",
        "+ (1 + eps) * sp.Add(",
        "(1 + eps) for (1 - eps) in the exact split",
        "m.check_symbolic_split((1, 2))",
    ),
    _m(
        "thm_4_2_influence.check_against_core",
        "thm_4_2_influence",
        "exprs.append(sp.diff(F_eps, eps).subs(eps, 0))",
        "exprs.append(sp.diff(F_eps, eps).subs(eps, sp.Rational(1, 10)))",
        "derivative taken at eps = 1/10 instead of 0",
        "m.check_against_core(10, shapings=('neglog1p',))",
    ),
    _m(
        "thm_4_2_influence.check_numeric",
        INFLUENCE,
        "psi = F + (w * m).sum(-1)",
        "psi = F - (w * m).sum(-1)",
        "sign of E_P[g'(m) m] in Psi",
        "m.check_numeric(200, sizes=(2, 3))",
    ),
    _m(
        "thm_4_2_influence.check_identities",
        "thm_4_2_influence",
        "shaping(m_tau + eps * (1 - m_tau))",
        "shaping(m_tau + eps * (1 + m_tau))",
        "m_Peps(tau) = m + eps(1 + m) in the split",
        "m.check_identities(200, sizes=(2, 3))",
    ),
    _m(
        "thm_4_2_influence.check_increasing_g",
        INFLUENCE,
        "w = p * fn.dg(m)",
        "w = -p * fn.dg(m).abs()",
        "the interaction written as a penalty whatever the sign of g'",
        "m.check_increasing_g(100)",
    ),
    _m(
        "thm_4_2_influence.check_kernel_range",
        INFLUENCE,
        "interaction = (w.unsqueeze(-2) @ K).squeeze(-2)",
        "interaction = (w.unsqueeze(-2) @ K.clamp(min=0)).squeeze(-2)",
        "a hidden clamp of the kernel in the interaction",
        "m.check_kernel_range(200)",
    ),
    # --- Assumption C.3 --------------------------------------------------------------------------------------------
    _m(
        "assumption_c3_smoothness.check_cosine_bound",
        "assumption_c3_smoothness",
        "BOUND = tuple(math.sqrt(2 * (1 - e)) for e in ETAS)",
        "BOUND = tuple(math.sqrt((1 - e) / 2) for e in ETAS)",
        "sqrt((1 - eta)/2): the 2 in the denominator",
        "m.check_cosine_bound(500)",
    ),
    _m(
        "assumption_c3_smoothness.check_other_kernels",
        "proxy",
        "return torch.where(inside, gap, torch.zeros_like(gap)).amax(-1)",
        "return torch.where(inside, gap, torch.zeros_like(gap)).amin(-1)",
        "delta as the smallest gap, not the largest",
        "m.check_other_kernels(300)",
    ),
    # --- Lemma C.4 -------------------------------------------------------------------------------------------------
    _m(
        "lemma_c4_proxy.check_symbolic",
        "lemma_c4_proxy",
        "phi = S.g(m_tau) + m_tau * S.gp(m_tau)",
        "phi = S.g(m_tau) + S.gp(m_tau)",
        "phi without the factor m",
        "m.check_symbolic((1, 2))",
    ),
    _m(
        "lemma_c4_proxy.check_numeric",
        "lemma_c4_proxy",
        "L = lipschitz_dg(cell.shaping) if L_override is None else L_override",
        "L = 1.0 if L_override is None else L_override",
        "L set to 1",
        "m.check_numeric(m.sweep(500))",
    ),
    _m(
        "lemma_c4_proxy.check_tightness",
        "lemma_c4_proxy",
        "L = lipschitz_dg(cell.shaping) if L_override is None else L_override",
        "L = 1.0 if L_override is None else L_override",
        "L set to 1",
        "m.check_tightness(m.sweep(500))",
    ),
    _m(
        "lemma_c4_proxy.check_tightness",
        "proxy",
        "return float(resolve(g).d2g(GRID).abs().max())",
        "return float(resolve(g).d2g(GRID).abs().max()) / 2",
        "L halved",
        "m.check_tightness(m.sweep(500))",
    ),
    _m(
        "lemma_c4_proxy.check_unclamped",
        "lemma_c4_proxy",
        'kernels=("cosine",), clamp=False)',
        'kernels=("cosine",), clamp=True)',
        "the search keeps the clamp it meant to drop",
        "m.check_unclamped(300)",
    ),
    # --- Thm C.5 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_c5_monotonicity.check_symbolic",
        "thm_c5_monotonicity",
        "sp.diff(phi, m), 2 * S.gp(m) + m * S.gpp(m)",
        "sp.diff(phi, m), S.gp(m) + m * S.gpp(m)",
        "phi' = g' + m g'' (factor 2 dropped)",
    ),
    _m(
        "thm_c5_monotonicity.check_numeric",
        "thm_c5_monotonicity",
        "bound = -c * (m1 - m2) + rr",
        "bound = -c * (m1 - m2) - rr",
        "sign of the remainder term",
        "m.check_numeric(m.sweep(500))",
    ),
    _m(
        "thm_c5_monotonicity.check_numeric",
        "proxy",
        "suffix_min = torch.flip(torch.cummin(torch.flip(-phi_prime(g, GRID), [0]), 0).values, [0])",
        "suffix_min = -phi_prime(g, GRID)",
        "c_a = -phi'(a) instead of the minimum over [a, 1]",
        "m.check_numeric(m.sweep(500))",
    ),
    _m(
        "thm_c5_monotonicity.check_conclusion",
        "thm_c5_monotonicity",
        "sure = valid & (m1 - m2 > rr / c)",
        "sure = valid & (m1 - m2 > rr / (4 * c))",
        "the margin (|r1| + |r2|)/c_a divided by 4",
        "m.check_conclusion(m.sweep(1000))",
    ),
    _m(
        "thm_c5_monotonicity.check_tightness",
        "proxy",
        "suffix_min = torch.flip(torch.cummin(torch.flip(-phi_prime(g, GRID), [0]), 0).values, [0])",
        "suffix_min = -phi_prime(g, GRID)",
        "c_a = -phi'(a) instead of the minimum over [a, 1]",
        "m.check_tightness(m.sweep(500))",
    ),
    _m(
        "thm_c5_monotonicity.check_printed_order",
        "thm_c5_monotonicity",
        "exact_rhs = sp.Rational(3, 4) * sp.Rational(2, 5)",
        "exact_rhs = sp.Rational(3, 2) * sp.Rational(2, 5)",
        "c_a = 3/2 instead of 3/4",
    ),
    _m(
        "thm_c5_monotonicity.check_curvature_violated",
        "thm_c5_monotonicity",
        'remainder(p.unsqueeze(0), K.unsqueeze(0), EXTRA["steep_exp"])',
        'remainder(p.unsqueeze(0), K.unsqueeze(0), "exp")',
        "the instance run with exp(-x), which meets the condition",
    ),
    # --- Cor C.6 ---------------------------------------------------------------------------------------------------
    _m(
        "cor_c6_neglog1p.check_symbolic",
        "cor_c6_neglog1p",
        "sp.simplify(phi_p + (m + 2) / (1 + m) ** 2) == 0",
        "sp.simplify(phi_p + (m + 1) / (1 + m) ** 2) == 0",
        "phi' = -(m+1)/(1+m)^2",
    ),
    _m(
        "cor_c6_neglog1p.check_other_shapings",
        "cor_c6_neglog1p",
        "if threshold != [2 / beta]:",
        "if threshold != [1 / beta]:",
        "threshold 1/beta instead of 2/beta",
    ),
    _m(
        "cor_c6_neglog1p.check_registry",
        "cor_c6_neglog1p",
        "(expr, sp.diff(expr, x), sp.diff(expr, x, 2))",
        "(expr, sp.diff(expr, x), sp.diff(expr, x))",
        "g'' taken as g'",
        "m.check_registry(200)",
    ),
    _m(
        "cor_c6_neglog1p.check_steep_exp",
        "cor_c6_neglog1p",
        "(x * steep.d2g(x) + 2 * steep.dg(x)) >= 0",
        "(x * steep.d2g(x) + 4 * steep.dg(x)) >= 0",
        "condition m g'' < -4 g'",
    ),
    # --- Thm C.7 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_c7_finite_perturbation.check_symbolic",
        "thm_c7_finite_perturbation",
        "(S.g(m[a] + eps * (K[a, tau] - m[a])) - S.g(m[a]))",
        "(S.g(m[a] + eps * (K[a, tau] + m[a])) - S.g(m[a]))",
        "d = k + m instead of k - m",
        "m.check_symbolic((1, 2))",
    ),
    _m(
        "thm_c7_finite_perturbation.check_numeric",
        "thm_c7_finite_perturbation",
        "M = max_abs_dg(shaping) if M is None else M",
        "M = 1.0 if M is None else M",
        "M set to 1",
        "m.check_numeric(m.sweep(700))",
    ),
    _m(
        "thm_c7_finite_perturbation.check_numeric",
        "thm_c7_finite_perturbation",
        "return delta_F, main, M * e * (m_tau + kappa)",
        "return delta_F, main, M * e * m_tau",
        "kappa dropped from the error term",
        "m.check_numeric(m.sweep(700))",
    ),
    _m(
        "thm_c7_finite_perturbation.check_numeric",
        "thm_c7_finite_perturbation",
        "main = e * (shaping((1 - e) * m_tau + e) - F)",
        "main = e * (shaping((1 - e) * m_tau) - F)",
        "the injected point's own mass eps dropped",
        "m.check_numeric(m.sweep(700))",
    ),
    _m(
        "thm_c7_finite_perturbation.check_tightness",
        "thm_c7_finite_perturbation",
        "M = max_abs_dg(shaping) if M is None else M",
        "M = 1.0 if M is None else M",
        "M set to 1",
        "m.check_tightness(m.sweep(700))",
    ),
    _m(
        "thm_c7_finite_perturbation.check_negative_kernel",
        "thm_c7_finite_perturbation",
        'kernels=("cosine",), clamp=False)',
        'kernels=("cosine",), clamp=True)',
        "the search keeps the clamp it meant to drop",
        "m.check_negative_kernel(300)",
    ),
    _m(
        "thm_c7_finite_perturbation.check_diagonal",
        "thm_c7_finite_perturbation",
        "K.diagonal(dim1=-2, dim2=-1).fill_(diagonal)",
        "K.diagonal(dim1=-2, dim2=-1).fill_(1.0)",
        "the diagonal never changed",
        "m.check_diagonal(300)",
    ),
    # --- Thm C.8 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_c8_certified_gain.check_symbolic",
        "thm_c8_certified_gain",
        "sp.expand(dJ.subs(u, M) + eps**2 * M) == 0",
        "sp.expand(dJ.subs(u, M) + eps * M) == 0",
        "-eps M for -eps^2 M",
    ),
    _m(
        "thm_c8_certified_gain.check_numeric",
        "thm_c8_certified_gain",
        "return m, eps * (shaping((1 - eps) * m + eps) - F) - M * eps * (m + kappa)",
        "return m, eps * (shaping((1 - eps) * m + eps) - F) + M * eps * (m + kappa)",
        "sign of the error term",
        "m.check_numeric(500)",
    ),
    _m(
        "thm_c8_certified_gain.check_increasing_g",
        "thm_c8_certified_gain",
        "    M = max_abs_dg(shaping)\n",
        "    M = 1.0\n",
        "M set to 1",
        "m.check_increasing_g(300)",
    ),
    _m(
        "thm_c8_certified_gain.check_constant_g",
        "thm_c8_certified_gain",
        "    M = max_abs_dg(shaping)\n",
        "    M = 1.0\n",
        "M set to 1",
    ),
    # --- Lemma D.1 -------------------------------------------------------------------------------------------------
    _m(
        "lemma_d1_removal.check_general",
        "lemma_d1_removal",
        "m_j + (m_j - k_ji) / (G - 2)",
        "m_j + (m_j - k_ji) / (G - 1)",
        "(G-1) for (G-2)",
    ),
    _m(
        "lemma_d1_removal.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S| (eq. 3 denominator)",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "lemma_d1_removal.check_symbolic",
        "lemma_d1_removal",
        "(((G - 1) * m_j - K[j, i]) / (G - 2),",
        "(((G - 1) * m_j - K[j, i]) / (G - 1),",
        "(G-1) for (G-2)",
        "m.check_symbolic((3, 4))",
    ),
    _m(
        "lemma_d1_removal.check_numeric",
        "lemma_d1_removal",
        "m + (m - K[..., :, i]) / (G - 2)",
        "m + (m - K[..., :, i]) / (G - 1)",
        "(G-1) for (G-2)",
        "m.check_numeric(300)",
    ),
    _m(
        "lemma_d1_removal.check_property",
        "lemma_d1_removal",
        "m + (m - K[..., :, i]) / (G - 2)",
        "m + (m - K[..., :, i]) / (G - 1)",
        "(G-1) for (G-2)",
        "m.check_property(30)",
    ),
    _m(
        "lemma_d1_removal.check_unclamped",
        "lemma_d1_removal",
        "m + (m - K[..., :, i]) / (G - 2)",
        "m + (m - K[..., :, i].clamp(min=0)) / (G - 2)",
        "a hidden clamp of k_ji",
        "m.check_unclamped(300)",
    ),
    _m(
        "lemma_d1_removal.check_small_group",
        "setpo.core.credits",
        'if on_small_group == "zero" and G < 3:',
        'if on_small_group == "zero" and G < 2:',
        "on_small_group='zero' not honoured at G = 2",
    ),
    # --- Thm 4.3 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_4_3_decomposition.check_general",
        "thm_4_3_decomposition",
        "+ (sp.Integer(1) / G - sp.Integer(1) / (G - 1)) * group.rest_sum(S.g(m_j))",
        "+ (sp.Integer(1) / G - sp.Integer(1) / (G - 2)) * group.rest_sum(S.g(m_j))",
        "normalisation 1/G - 1/(G-2)",
    ),
    _m(
        "thm_4_3_decomposition.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S|",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "thm_4_3_decomposition.check_symbolic",
        "thm_4_3_decomposition",
        "norm_term = (sp.Rational(1, G) - sp.Rational(1, G - 1))",
        "norm_term = (sp.Rational(1, G) - sp.Rational(1, G + 1))",
        "normalisation 1/G - 1/(G+1)",
        "m.check_symbolic((3, 4))",
    ),
    _m(
        "thm_4_3_decomposition.check_locality",
        "thm_4_3_decomposition",
        "- S.g(S.set_local_mass(K, j, rest))",
        "- S.g(S.set_local_mass(K, j, rest) + S.set_local_mass(K, i, rest) / G)",
        "an interaction summand that also reads row i",
        "m.check_locality((3, 4))",
    ),
    _m(
        "thm_4_3_decomposition.check_against_core",
        *SET_MASS,
        "m_hat = row sum / |S| in the sympy definition",
        "m.check_against_core(10, sizes=(3,))",
    ),
    _m(
        "thm_4_3_decomposition.check_numeric",
        "thm_4_3_decomposition",
        "norm_term = (1.0 / G - 1.0 / (G - 1)) * others",
        "norm_term = (1.0 / G - 1.0 / (G - 2)) * others",
        "normalisation 1/G - 1/(G-2)",
        "m.check_numeric(300)",
    ),
    _m(
        "thm_4_3_decomposition.check_property",
        "thm_4_3_decomposition",
        "norm_term = (1.0 / G - 1.0 / (G - 1)) * others",
        "norm_term = (1.0 / G - 1.0 / (G - 2)) * others",
        "normalisation 1/G - 1/(G-2)",
        "m.check_property(30)",
    ),
    # --- Thm 4.4 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_4_4_anti_redundancy.check_general",
        "thm_4_4_anti_redundancy",
        "printed = (S.gp(group.local_mass(0, {0, 1})) + S.gp(group.local_mass(1, {0, 1}))) / (G * (G - 1))",
        "printed = (S.gp(group.local_mass(0, {0, 1})) + S.gp(group.local_mass(1, {0, 1}))) / (G * G)",
        "1/G^2 for 1/(G(G-1))",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_symbolic",
        "thm_4_4_anti_redundancy",
        "printed = (S.gp(m[i]) + S.gp(m[t])) / (G * (G - 1))",
        "printed = (S.gp(m[i]) + S.gp(m[t])) / (G * G)",
        "1/G^2 for 1/(G(G-1))",
        "m.check_symbolic((3,))",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S|",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_numeric",
        "thm_4_4_anti_redundancy",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * (G - 1))",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * G)",
        "1/G^2 for 1/(G(G-1))",
        "m.check_numeric(200)",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_finite_difference",
        "thm_4_4_anti_redundancy",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * (G - 1))",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * G)",
        "1/G^2 for 1/(G(G-1))",
        "m.check_finite_difference(50)",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_sign",
        "thm_4_4_anti_redundancy",
        "rows.append(grad[..., i, :] + grad[..., :, i])",
        "rows.append(grad[..., i, :] - grad[..., :, i])",
        "the derivative along E_it - E_ti",
        "m.check_sign(200)",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_against_core",
        *SET_MASS,
        "m_hat = row sum / |S| in the sympy definition",
        "m.check_against_core(10)",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_property",
        "thm_4_4_anti_redundancy",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * (G - 1))",
        "return (dg.unsqueeze(-1) + dg.unsqueeze(-2)) / (G * G)",
        "1/G^2 for 1/(G(G-1))",
        "m.check_property(30)",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_increasing_g",
        "thm_4_4_anti_redundancy",
        "rows.append(grad[..., i, :] + grad[..., :, i])",
        "rows.append(grad[..., i, :] - grad[..., :, i])",
        "the derivative along E_it - E_ti",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_flat_g",
        "symbolic",
        '"flat": lambda x: sp.Max(0, sp.Rational(1, 2) - x) ** 2,',
        '"flat": lambda x: sp.Max(0, sp.Rational(9, 10) - x) ** 2,',
        "the flat g's kink at 9/10 instead of 1/2",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_cubic_g",
        "instances",
        "lambda x: -3.0 * (x - 0.5) ** 2,",
        "lambda x: -3.0 * (x - 0.4) ** 2,",
        "g'(x) = -3(x - 0.4)^2, not the derivative of -(x - 1/2)^3",
    ),
    _m(
        "thm_4_4_anti_redundancy.check_unclamped",
        "thm_4_4_anti_redundancy",
        'shapings=("linear", "exp"), kernels=("cosine",), clamp=False',
        'shapings=("linear", "flat"), kernels=("cosine",), clamp=False',
        "a g that is only non-increasing in the search",
        "m.check_unclamped(300)",
    ),
    # --- Thm 4.5 ---------------------------------------------------------------------------------------------------
    _m(
        "thm_4_5_dominance.check_general",
        "thm_4_5_dominance",
        "gap_0 = group.rest_sum(group.k(0, GN.Z) - group.k(1, GN.Z), GN.Z) / (G - 2)",
        "gap_0 = group.rest_sum(group.k(0, GN.Z) - group.k(1, GN.Z), GN.Z) / (G - 1)",
        "(G-1) for (G-2)",
    ),
    _m(
        "thm_4_5_dominance.check_symbolic",
        "thm_4_5_dominance",
        "aj - bj - (K[j, r] - K[j, c]) / (G - 2)",
        "aj - bj - (K[j, r] - K[j, c]) / (G - 1)",
        "(G-1) for (G-2)",
        "m.check_symbolic((3, 4))",
    ),
    _m(
        "thm_4_5_dominance.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S|",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "thm_4_5_dominance.check_numeric",
        "thm_4_5_dominance",
        "K[:, c, others], K[:, others, c] = kc, kc\n    K[:, r, others], K[:, others, r] = kr, kr",
        "K[:, r, others], K[:, others, r] = kc, kc\n    K[:, c, others], K[:, others, c] = kr, kr",
        "dominance imposed the wrong way round",
        "m.check_numeric(300)",
    ),
    _m(
        "thm_4_5_dominance.check_property",
        "thm_4_5_dominance",
        "return s[..., r] - s[..., c]",
        "return s[..., c] - s[..., r]",
        "s_c - s_r for s_r - s_c",
        "m.check_property(30)",
    ),
    _m("thm_4_5_dominance.check_flat_g", *FLAT_G, "the flat g's kink at 0.95 instead of 1/2"),
    _m(
        "thm_4_5_dominance.check_increasing_g",
        "thm_4_5_dominance",
        "return s[..., r] - s[..., c]",
        "return s[..., c] - s[..., r]",
        "s_c - s_r for s_r - s_c",
        "m.check_increasing_g(100)",
    ),
    _m(
        "thm_4_5_dominance.check_unclamped",
        "thm_4_5_dominance",
        "K[:, c, others], K[:, others, c] = kc, kc\n    K[:, r, others], K[:, others, r] = kr, kr",
        "K[:, r, others], K[:, others, r] = kc, kc\n    K[:, c, others], K[:, others, c] = kr, kr",
        "dominance imposed the wrong way round",
        "m.check_unclamped(300)",
    ),
    # --- Cor D.5 ---------------------------------------------------------------------------------------------------
    _m(
        "cor_d5_weighted_gap.check_general",
        "cor_d5_weighted_gap",
        't["rhs"] = group.rest_sum((t["w0"] + t["wj"]) * t["d"]) / ((G - 1) * (G - 2))',
        't["rhs"] = group.rest_sum((t["w0"] + t["wj"]) * t["d"]) / ((G - 1) * G)',
        "(G-1)G for (G-1)(G-2)",
    ),
    _m(
        "cor_d5_weighted_gap.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S|",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "cor_d5_weighted_gap.check_symbolic",
        "cor_d5_weighted_gap",
        "return sp.Add(*terms) / ((G - 1) * (G - 2))",
        "return sp.Add(*terms) / (G * (G - 2))",
        "G(G-2) for (G-1)(G-2)",
        "m.check_symbolic((3,))",
    ),
    _m(
        "cor_d5_weighted_gap.check_numeric",
        "cor_d5_weighted_gap",
        "rhs = ((w0.unsqueeze(-1) + wj) * diff).sum(-1) / ((G - 1) * (G - 2))",
        "rhs = ((w0.unsqueeze(-1) + wj) * diff).sum(-1) / ((G - 1) * G)",
        "(G-1)G for (G-1)(G-2)",
        "m.check_numeric(m.sweep(200, sizes=(3, 4)))",
    ),
    _m(
        "cor_d5_weighted_gap.check_weights",
        "cor_d5_weighted_gap",
        "-(shaping(a) - shaping(b)) / safe)",
        "(shaping(a) - shaping(b)) / safe)",
        "slope of g for slope of -g",
        "m.check_weights(m.sweep(200, sizes=(3, 4)))",
    ),
    _m(
        "cor_d5_weighted_gap.check_property",
        "cor_d5_weighted_gap",
        "rhs = ((w0.unsqueeze(-1) + wj) * diff).sum(-1) / ((G - 1) * (G - 2))",
        "rhs = ((w0.unsqueeze(-1) + wj) * diff).sum(-1) / ((G - 1) * G)",
        "(G-1)G for (G-1)(G-2)",
        "m.check_property(30)",
    ),
    _m("cor_d5_weighted_gap.check_flat_g", *FLAT_G, "the flat g's kink at 0.95 instead of 1/2"),
    # --- Cor D.6 ---------------------------------------------------------------------------------------------------
    _m(
        "cor_d6_dilution.check_general",
        "cor_d6_dilution",
        "return group.local_mass(j, set()) - m_j, (m_j - group.k(0, j)) / (G - 2)",
        "return group.local_mass(j, set()) - m_j, (m_j - group.k(0, j)) / (G - 1)",
        "(G-1) for (G-2)",
    ),
    _m(
        "cor_d6_dilution.check_general_vs_expansion",
        *GROUP_MASS,
        "m_hat = row sum / |S|",
        "m.check_general_vs_expansion((3, 4))",
    ),
    _m(
        "cor_d6_dilution.check_symbolic",
        "cor_d6_dilution",
        "- m_j - (m_j - K[j, i]) / (G - 2)) != 0",
        "- m_j - (m_j - K[j, i]) / (G - 1)) != 0",
        "(G-1) for (G-2)",
        "m.check_symbolic((3, 4))",
    ),
    _m(
        "cor_d6_dilution.check_numeric",
        "cor_d6_dilution",
        "gap = drop_entry(m - K[..., :, i], i)",
        "gap = drop_entry(K[..., :, i] - m, i)",
        "k_ji - m_j for m_j - k_ji",
        "m.check_numeric(200)",
    ),
    _m(
        "cor_d6_dilution.check_property",
        "cor_d6_dilution",
        "gap = drop_entry(m - K[..., :, i], i)",
        "gap = drop_entry(K[..., :, i] - m, i)",
        "k_ji - m_j for m_j - k_ji",
        "m.check_property(30)",
    ),
    _m("cor_d6_dilution.check_flat_g", *FLAT_G, "the flat g's kink at 0.95 instead of 1/2"),
    # --- D(S) consistency ------------------------------------------------------------------------------------------
    _m(
        "consistency.check_consistency",
        "consistency",
        "err = D - population_diversity(dist.p, dist.K, g)",
        "err = D - population_diversity(torch.full_like(dist.p, 1 / len(dist.p)), dist.K, g)",
        "F(P) with uniform weights instead of p",
        "m.check_consistency(100)",
    ),
    _m(
        "consistency.check_bias_order",
        "consistency",
        "err = D - population_diversity(dist.p, dist.K, g)",
        "err = D - population_diversity(torch.full_like(dist.p, 1 / len(dist.p)), dist.K, g)",
        "F(P) with uniform weights instead of p",
        "m.check_bias_order(m.check_consistency(100).table)",
    ),
    # --- Credit properties -----------------------------------------------------------------------------------------
    _m(
        "credit_properties.check_permutation",
        "credit_properties",
        "loo_credits(K, cell.shaping)[:, pi]",
        "loo_credits(K, cell.shaping)[:, pi.argsort()]",
        "the inverse permutation",
        "m.check_permutation(200, sizes=(4, 6))",
    ),
    _m(
        "credit_properties.check_duplicates",
        "credit_properties",
        "K[:, 1, :], K[:, :, 1] = K[:, 0, :], K[:, 0, :]",
        "K[:, 1, :], K[:, :, 1] = K[:, 2, :], K[:, 2, :]",
        "the copy taken from the wrong row",
        "m.check_duplicates(200, sizes=(4, 6))",
    ),
    # --- Paper arithmetic ------------------------------------------------------------------------------------------
    _m(
        "paper_arithmetic.check_audit",
        "paper_arithmetic",
        'if abs(printed - exact) <= TENTH else "inconsistent"',
        'if abs(printed - exact) <= 10 * TENTH else "inconsistent"',
        "a tolerance of 1.0 instead of 0.1",
    ),
)


def all_checks() -> list[str]:
    """'<module>.<function>' of every check function of every checking module."""
    out = []
    for res in RESULTS:
        module = res.load()
        out += [f"{res.module}.{n}" for n, f in vars(module).items() if n.startswith("check_") and inspect.isfunction(f)
                and f.__module__ == module.__name__]  # fmt: skip
    return out


def uncovered() -> list[str]:
    """Checks with neither a mutant nor a place in MEASUREMENTS."""
    covered = {m.check for m in MUTANTS} | set(MEASUREMENTS)
    return [c for c in all_checks() if c not in covered]


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    baseline_ok: bool
    baseline: str
    killed: bool
    detail: str


def run_mutant(mutant: Mutant) -> Outcome:
    """The check on the unedited modules (must pass), then on the mutant (must fail)."""
    base_ok, base = evaluate(None, mutant.module, mutant.expression)
    try:
        ok, detail = evaluate(mutant, mutant.module, mutant.expression)
    except ValueError as err:  # the slip does not apply: a stale mutant, reported as not killed
        return Outcome(mutant, base_ok, base, False, f"BAD MUTANT: {err}")
    return Outcome(mutant, base_ok, base, not ok, detail)


def battery(only: str = "") -> list[Outcome]:
    """Every mutant (those whose check contains `only`), in order."""
    torch.set_num_threads(1)
    return [run_mutant(m) for m in MUTANTS if only in m.check]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m theory.mutants", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutants whose check contains this text")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    outcomes = battery(args.only)
    for o in outcomes:
        word = "killed" if o.killed and o.baseline_ok else ("BASELINE FAILS" if not o.baseline_ok else "survived")
        print(f"{word:14s} {o.mutant.check:55s} {o.mutant.slip}  [{o.detail}]")
    missing = [] if args.only else uncovered()
    for c in missing:
        print(f"{'NO MUTANT':14s} {c}")
    for c, why in MEASUREMENTS.items():
        print(f"{'measurement':14s} {c:55s} {why}")
    bad = [o for o in outcomes if not (o.killed and o.baseline_ok)]
    print(f"\n{len(outcomes)} mutants, {len(outcomes) - len(bad)} killed, {len(bad)} survived or with a failing "
          f"baseline, {len(missing)} checks without a mutant, {time.perf_counter() - start:.0f} s")  # fmt: skip
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
