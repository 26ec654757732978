"""Proofs for a symbolic group size G >= 3: the group as a few distinguished members plus sums over the rest.

Model of a group (eqs. 3-5). Omega = {o_0, ..., o_{n-1}} u R with R = {o_n, ..., o_{G-1}}, |R| = G - n, G an
integer symbol. Eqs. 3-5 are equivariant under relabelling, so the members a statement names (i; i and t;
r and c) are o_0..o_{n-1} without loss of generality, and a generic member of R is the summation index j.
The kernel enters only through
    k_ab                                        a < b < n    (sympy Symbol, the same name as S.kernel_matrix)
    k_a[z] = k(o_a, o_z)                        a < n, z in R (IndexedBase k_a)
    q[j]   = sum_{z in R, z != j} k(o_j, o_z)   j in R        (IndexedBase q: the only rest-rest quantity needed)
Every sum over a set S splits explicitly into its distinguished part and a sympy Sum over R:
    sum_{z in S, z != y} k(y, z) = sum_{a in S, a < n, a != y} k(y, a) + [Sum_{z in R} k(y, z)  if y < n, else q[y]],
    sum_{y in S} g(m_hat(y; S)) = sum_{a in S, a < n} g(m_hat(o_a; S)) + Sum_{j in R} g(m_hat(o_j; S)),
and S always contains all of R (only distinguished members are ever removed), so |S| = #kept + G - n.

`prove` reduces lhs - rhs to a canonical form: finite sums are split by linearity with the factors that do not
depend on the summation index pulled out, bound indices renamed canonically, every argument of g, g', g''
and every summand brought to a reduced rational function, and the whole difference to one reduced fraction.
Each step is an equality for every integer G >= 3, provided no denominator vanishes: `prove` also lists the
denominators and accepts only polynomials in G with no root >= 3 and the non-zero conditions of the case
being proven. A zero difference is then a proof for every G >= 3 and a generic g.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import sympy as sp
from sympy.core.function import AppliedUndef

from theory import symbolic as S
from theory.records import CheckRecord, count_record, sizes_scope

G = sp.Symbol("G", integer=True, positive=True)
H = sp.Symbol("H", integer=True, nonnegative=True)  # G = H + 3 encodes G >= 3 for sign questions
J = sp.Symbol("j", integer=True)  # a generic member of R, index of the sums over members
Z = sp.Symbol("z", integer=True)  # the neighbour index of a row sum
Q = sp.IndexedBase("q")
SHAPED = (S.g, S.gp, S.gpp)
_CANONICAL_INDEX = [sp.Symbol(f"j{h}", integer=True) for h in range(4)]

Member = int | sp.Expr  # a distinguished label 0..n-1, or a symbolic member of R


@dataclass(frozen=True)
class Group:
    """Omega with `n` distinguished members o_0..o_{n-1} and the symbolic rest R = {o_n, ..., o_{G-1}}."""

    n: int

    def __post_init__(self) -> None:
        if not 1 <= self.n <= 2:
            raise ValueError(
                f"n (distinguished members) must be 1 or 2 so that R is non-empty for G >= 3, got {self.n}"
            )

    @property
    def everyone(self) -> frozenset[int]:
        """The distinguished labels (R is always included in full)."""
        return frozenset(range(self.n))

    def rest_sum(self, body: sp.Expr, index: sp.Symbol = J) -> sp.Sum:
        """Sum_{index in R} body."""
        return sp.Sum(body, (index, self.n, G - 1))

    def size(self, kept: Iterable[int]) -> sp.Expr:
        """|S| for S = kept distinguished members u R."""
        return len(frozenset(kept)) + G - self.n

    def k(self, a: Member, b: Member) -> sp.Expr:
        """k(o_a, o_b) with k symmetric and k(o, o) = 1; a pair inside R has no symbol of its own (use q)."""
        if isinstance(a, int) and isinstance(b, int):
            if a == b:
                return sp.Integer(1)
            lo, hi = sorted((a, b))
            return sp.Symbol(f"k_{lo}{hi}", real=True)
        if isinstance(b, int):
            a, b = b, a
        if not isinstance(a, int):
            raise ValueError("k(o_j, o_z) for two members of R enters only through the row sum q[j]")
        return sp.IndexedBase(f"k_{a}")[b]

    def row_sum(self, y: Member, kept: Iterable[int]) -> sp.Expr:
        """sum_{z in S, z != y} k(o_y, o_z), split into the distinguished part and the part in R."""
        kept = frozenset(kept)
        head = sp.Add(*[self.k(y, a) for a in sorted(kept) if a != y])
        tail = self.rest_sum(self.k(y, Z), Z) if isinstance(y, int) else Q[y]
        return head + tail

    def local_mass(self, y: Member, kept: Iterable[int]) -> sp.Expr:
        """m_hat(o_y; S) = 1/(|S|-1) sum_{z in S, z != y} k(o_y, o_z) (eq. 3)."""
        return self.row_sum(y, kept) / (self.size(kept) - 1)

    def diversity(self, kept: Iterable[int], shaping: Callable = S.g) -> sp.Expr:
        """D(S) = 1/|S| sum_{y in S} g(m_hat(y; S)) (eq. 4), the sum split into distinguished members and R."""
        kept = frozenset(kept)
        head = sp.Add(*[shaping(self.local_mass(a, kept)) for a in sorted(kept)])
        return (head + self.rest_sum(shaping(self.local_mass(J, kept)))) / self.size(kept)

    def credit(self, i: int, shaping: Callable = S.g) -> sp.Expr:
        """s_i = D(Omega) - D(Omega minus o_i) (eq. 5), by the definition."""
        return self.diversity(self.everyone, shaping) - self.diversity(self.everyone - {i}, shaping)

    def instantiate(self, expr: sp.Expr, size: int) -> sp.Expr:
        """`expr` at G = size, written in the explicit symbols of S.kernel_matrix(size) (for the cross-check)."""
        if size < 3:
            raise ValueError(f"size must be >= 3, got {size}")
        K = S.kernel_matrix(size)
        rest = range(self.n, size)

        def entry(e: sp.Indexed) -> sp.Expr:
            z = int(e.indices[0])
            if e.base == Q:
                return sp.Add(*[K[z, w] for w in rest if w != z])
            return K[int(str(e.base.label).removeprefix("k_")), z]  # k_a[z] -> K[a, z]

        out = S.named_derivatives(expr).subs(G, size).doit()
        return out.replace(lambda e: isinstance(e, sp.Indexed), entry)


# --- canonical form ----------------------------------------------------------------------------------------------


def _height(expr: sp.Expr) -> int:
    """0 for an expression without sums, else 1 + the largest height of a sum inside it."""
    return max((1 + _height(s.function) for s in expr.atoms(sp.Sum)), default=0)


def _rational(expr: sp.Expr) -> sp.Expr:
    """One reduced fraction, sums and g-applications as generators."""
    return sp.cancel(sp.together(expr))


def _shaped_args(expr: sp.Expr) -> sp.Expr:
    """Bring every argument of g, g', g'' to a reduced fraction (after an expansion has split it)."""
    return expr.replace(
        lambda e: isinstance(e, AppliedUndef) and e.func in SHAPED,
        lambda e: e.func(_rational(e.args[0])),
    )


def _canon_sum(s: sp.Sum) -> sp.Expr:
    """Split a finite sum by linearity: sum of (factor free of the index) * Sum(rest), index renamed by height."""
    if len(s.limits) != 1:
        raise ValueError(f"only single-index sums are supported, got {s}")
    idx, lo, hi = s.limits[0]
    body = canonical_form(s.function)
    h = _height(body)
    new = _CANONICAL_INDEX[h]
    body = _shaped_args(sp.expand(_rational(body.xreplace({idx: new}))))
    out = sp.Integer(0)
    for term in sp.Add.make_args(body):
        coeff, dep = term.as_independent(new, as_Add=False)
        if dep == 1:
            out += coeff * (hi - lo + 1)
        else:  # the index named by the height of what is left, so equal sums are equal objects
            out += coeff * sp.Sum(
                dep.xreplace({new: _CANONICAL_INDEX[_height(dep)]}), (_CANONICAL_INDEX[_height(dep)], lo, hi)
            )
    return out


def canonical_form(expr: sp.Expr) -> sp.Expr:
    """Sums split by linearity with canonical indices, arguments of g, g', g'' as reduced fractions."""
    expr = S.named_derivatives(sp.sympify(expr))
    if expr.is_Atom or isinstance(expr, (sp.Indexed, sp.IndexedBase)):
        return expr
    if isinstance(expr, sp.Sum):
        return _canon_sum(expr)
    if isinstance(expr, AppliedUndef) and expr.func in SHAPED:
        return expr.func(_rational(canonical_form(expr.args[0])))
    return expr.func(*[canonical_form(a) for a in expr.args])


def reduce(expr: sp.Expr) -> sp.Expr:
    """The canonical reduced fraction of `expr`: 0 exactly when `expr` vanishes identically."""
    return _rational(canonical_form(expr))


# --- proofs ------------------------------------------------------------------------------------------------------


def denominators(expr: sp.Expr) -> set[sp.Expr]:
    """Every base raised to a negative power anywhere in `expr` (inside sums and arguments of g too)."""
    return {
        e.base
        for e in sp.preorder_traversal(S.named_derivatives(sp.sympify(expr)))
        if isinstance(e, sp.Pow) and e.exp.is_number and e.exp < 0
    }


def safe_for_all_g(den: sp.Expr) -> bool:
    """True when `den` is a polynomial in G alone that vanishes at no G >= 3 (so never at a group size)."""
    if not den.free_symbols <= {G}:
        return False
    poly = sp.Poly(den, G)
    if poly.is_zero:
        return False
    return all(not (root.is_real and root >= 3) for root in sp.roots(poly, multiple=True)) and (
        poly.degree() == len(sp.roots(poly, multiple=True))
    )


@dataclass(frozen=True)
class Proof:
    """The outcome of reducing lhs - rhs for symbolic G: holds when the residual is 0 and no denominator can vanish."""

    claim: str
    residual: sp.Expr
    group_denominators: tuple[sp.Expr, ...]
    case_denominators: tuple[sp.Expr, ...]
    unjustified: tuple[sp.Expr, ...] = field(default=())

    @property
    def holds(self) -> bool:
        """A proof for every integer G >= 3 (within the stated case)."""
        return self.residual == 0 and not self.unjustified

    def __str__(self) -> str:
        if self.holds:
            return f"{self.claim}: proven"
        if self.unjustified:
            return f"{self.claim}: denominators not shown non-zero: {list(self.unjustified)}"
        return f"{self.claim}: residual {self.residual}"


def prove(lhs: sp.Expr, rhs: sp.Expr, claim: str = "", nonzero: Sequence[sp.Expr] = ()) -> Proof:
    """Prove lhs = rhs for symbolic G >= 3 and a generic g, in the case where every `nonzero` expression is != 0.

    The residual is the canonical reduced form of lhs - rhs; every denominator of lhs and rhs must be either a
    polynomial in G without a root >= 3 or, up to a constant factor, one of `nonzero`.
    """
    conds = [reduce(c) for c in nonzero]
    group, case, bad = [], [], []
    for den in sorted(denominators(lhs) | denominators(rhs), key=sp.default_sort_key):
        if safe_for_all_g(den):
            group.append(den)
        elif any(_proportional(reduce(den), c) for c in conds):
            case.append(den)
        else:
            bad.append(den)
    return Proof(claim, reduce(lhs - rhs), tuple(group), tuple(case), tuple(bad))


def _proportional(a: sp.Expr, b: sp.Expr) -> bool:
    """a = c * b for a non-zero constant c (or a polynomial in G without a root >= 3)."""
    if b == 0:
        return False
    ratio = _rational(a / b)
    num, den = sp.fraction(ratio)
    return all(x.is_number and x != 0 or safe_for_all_g(x) for x in (num, den))


def positive_for_all_g(expr: sp.Expr, least: int = 3) -> bool:
    """True when sympy shows `expr` > 0 for every integer G >= least (by writing G = H + least, H >= 0)."""
    return bool(sp.simplify(expr.subs(G, H + least)).is_positive)


def positive_at(expr: sp.Expr, size: int) -> bool:
    """True when sympy shows `expr` > 0 at G = size (sums over R expanded)."""
    return bool(sp.simplify(expr.subs(G, size).doit()).is_positive)


Pair = tuple[sp.Expr, Callable[[int, int | None], sp.Expr]]  # (general expression, explicit one at (G, j))


def agrees_with_expansion(
    group: Group, pairs: Sequence[Pair], sizes: Sequence[int]
) -> tuple[int, list[tuple[int, int, int | None]]]:
    """(comparisons, [(G, pair, j) where a general expression at G differs from its explicit expansion]).

    An expression with the generic member j of R free is compared for every concrete j in R.
    """
    bad, compared = [], 0
    for size in sizes:
        for n, (general, explicit) in enumerate(pairs):
            for j in range(group.n, size) if J in general.free_symbols else [None]:
                compared += 1
                at_j = general if j is None else general.subs(J, j)  # subs leaves bound indices alone
                if not S.is_identity(group.instantiate(at_j, size), explicit(size, j)):
                    bad.append((size, n, j))
    return compared, bad


# --- records -----------------------------------------------------------------------------------------------------

ALL_G = "all G >= 3"


def proof_record(
    result: str, check: str, proofs: Sequence[Proof], facts: Sequence[tuple[str, bool]] = ()
) -> CheckRecord:
    """One 'proof' record: every identity in `proofs` holds for symbolic G and every named fact (a sign) is shown."""
    failed = [str(p) for p in proofs if not p.holds] + [f"{name}: not shown" for name, ok in facts if not ok]
    shown = [p.claim for p in proofs] + [name for name, _ in facts]
    return count_record(
        result,
        check,
        "proof",
        len(shown),
        len(failed),
        metric="unproven steps",
        detail=("FAILED: " + "; ".join(failed)) if failed else "proven: " + "; ".join(shown),
        scope=ALL_G,
    )


def expansion_record(result: str, check: str, group: Group, pairs: Sequence[Pair], sizes: Sequence[int]) -> CheckRecord:
    """A 'symbolic' record: the general expressions at G = sizes equal the explicit expansions (S.kernel_matrix)."""
    compared, bad = agrees_with_expansion(group, pairs, sizes)
    return count_record(
        result,
        f"{check}, {sizes_scope(sizes)}",
        "symbolic",
        compared,
        bad,
        metric="mismatches",
        scope=sizes_scope(sizes),
    )
