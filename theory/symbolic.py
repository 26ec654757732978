"""Sympy building blocks: fully symbolic kernels, weights and a generic shaping function g.

These restate the paper's definitions symbolically (eqs. 2-5) so that every identity can be derived
independently of the torch core; each module compares the sympy result with the core numerically too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import sympy as sp

g = sp.Function("g")  # a generic shaping function
gp = sp.Function("gp")  # its derivative g'
gpp = sp.Function("gpp")  # its second derivative g''


def kernel_matrix(n: int, name: str = "k", unit_diagonal: bool = True) -> sp.Matrix:
    """A symmetric n x n matrix of real symbols k_ab = k_ba (a < b), with ones on the diagonal."""
    K = sp.zeros(n, n)
    for a in range(n):
        K[a, a] = sp.Integer(1) if unit_diagonal else sp.Symbol(f"{name}_{a}{a}", real=True)
        for b in range(a + 1, n):
            K[a, b] = K[b, a] = sp.Symbol(f"{name}_{a}{b}", real=True)
    return K


def removals(sizes: Sequence[int]) -> Iterator[tuple[int, sp.Matrix, int, int, list[int], list[int]]]:
    """(G, K, i, j, Omega, Omega minus o_i) for every G in `sizes`, removed o_i and remaining o_j; K symbolic."""
    for G in sizes:
        K = kernel_matrix(G)
        everyone = list(range(G))
        for i in everyone:
            rest = [z for z in everyone if z != i]
            for j in rest:
                yield G, K, i, j, everyone, rest


def weights(n: int, name: str = "p") -> list[sp.Symbol]:
    """Symbolic weights p_0..p_{n-1} of a finite-support distribution."""
    return list(sp.symbols(f"{name}_0:{n}", nonnegative=True))


def set_local_mass(K: sp.Matrix, j: int, members: Sequence[int]) -> sp.Expr:
    """m_hat(o_j; S) = 1/(|S|-1) sum_{z in S, z != j} k(o_j, z) (eq. 3), S given by `members`."""
    return sp.Add(*[K[j, z] for z in members if z != j]) / (len(members) - 1)


def set_diversity(K: sp.Matrix, members: Sequence[int], shaping: Callable = g) -> sp.Expr:
    """D(S) = 1/|S| sum_{y in S} g(m_hat(y; S)) (eq. 4)."""
    return sp.Add(*[shaping(set_local_mass(K, j, members)) for j in members]) / len(members)


def credit(K: sp.Matrix, i: int, shaping: Callable = g) -> sp.Expr:
    """s_i = D(Omega) - D(Omega minus o_i) (eq. 5), by the definition (no closed form used)."""
    everyone = range(K.shape[0])
    return set_diversity(K, everyone, shaping) - set_diversity(K, [j for j in everyone if j != i], shaping)


def population_mass(K: sp.Matrix, p: Sequence[sp.Expr], a: int) -> sp.Expr:
    """m_P(y_a) = sum_b p_b k(y_a, y_b) for P = sum_b p_b delta_{y_b} (Sec. 3)."""
    return sp.Add(*[p[b] * K[a, b] for b in range(len(p))])


def population_diversity(K: sp.Matrix, p: Sequence[sp.Expr], shaping: Callable = g) -> sp.Expr:
    """F(P) = sum_a p_a g(m_P(y_a)) (eq. 2)."""
    return sp.Add(*[p[a] * shaping(population_mass(K, p, a)) for a in range(len(p))])


def mixture(p: Sequence[sp.Expr], eps: sp.Expr, t: int | None = None) -> list[sp.Expr]:
    """Weights of P_eps = (1-eps) P + eps delta_{y_t} (Thm 4.2); t None appends the injected tau after P's atoms."""
    w = [(1 - eps) * pa + (eps if a == t else 0) for a, pa in enumerate(p)]
    return w if t is not None else [*w, eps]


def named_derivatives(expr: sp.Expr) -> sp.Expr:
    """Rewrite the derivatives of g that sympy produces (Subs/Derivative forms) as gp(arg) and gpp(arg)."""

    def order_and_arg(d: sp.Derivative):
        fn = d.expr
        if not (isinstance(fn, sp.core.function.AppliedUndef) and fn.func == g):
            return None
        return sum(c for _, c in d.variable_count), fn.args[0]

    def rewrite_subs(s: sp.Subs):
        if isinstance(s.expr, sp.Derivative) and order_and_arg(s.expr) is not None:
            order, var = order_and_arg(s.expr)
            point = s.point[s.variables.index(var)]
            return (gp if order == 1 else gpp)(point)
        return s

    def rewrite_derivative(d: sp.Derivative):
        info = order_and_arg(d)
        if info is None:
            return d
        return (gp if info[0] == 1 else gpp)(info[1])

    expr = expr.replace(lambda e: isinstance(e, sp.Subs), rewrite_subs)
    return expr.replace(lambda e: isinstance(e, sp.Derivative), rewrite_derivative)


def canonical(expr: sp.Expr) -> sp.Expr:
    """Expand every argument of g, gp, gpp and then the whole expression, so equal terms cancel."""
    expr = expr.replace(
        lambda e: isinstance(e, sp.core.function.AppliedUndef) and e.func in (g, gp, gpp),
        lambda e: e.func(sp.expand(e.args[0])),
    )
    return sp.expand(expr)


def is_identity(lhs: sp.Expr, rhs: sp.Expr) -> bool:
    """True when lhs - rhs reduces to exactly zero for a generic g (after canonical argument expansion)."""
    diff = canonical(named_derivatives(lhs) - named_derivatives(rhs))
    if diff == 0:
        return True
    return sp.simplify(diff) == 0


def concrete(expr: sp.Expr, g_expr: Callable[[sp.Expr], sp.Expr]) -> sp.Expr:
    """Substitute a concrete shaping (a sympy lambda) for the generic g, gp, gpp."""
    x = sp.Symbol("x", real=True)
    body = g_expr(x)
    d1, d2 = sp.diff(body, x), sp.diff(body, x, 2)
    return named_derivatives(expr).replace(
        lambda e: isinstance(e, sp.core.function.AppliedUndef) and e.func in (g, gp, gpp),
        lambda e: {g: body, gp: d1, gpp: d2}[e.func].subs(x, e.args[0]),
    )


# The registry's shapings written in sympy, to cross-check the core's g, g', g'' and for exact sign proofs.
SYMPY_SHAPINGS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "neglog1p": lambda x: -sp.log(1 + x),
    "linear": lambda x: 1 - x,
    "exp": lambda x: sp.exp(-x),
    "inverse": lambda x: 1 / (1 + x),
    "steep_exp": lambda x: sp.exp(-5 * x),
    "increasing": lambda x: sp.log(1 + x),
    "flat": lambda x: sp.Max(0, sp.Rational(1, 2) - x) ** 2,
    "constant": lambda x: sp.Integer(0) * x,
}


def entry_symbols(K: sp.Matrix) -> list[tuple[sp.Symbol, int, int]]:
    """(symbol, a, b) for every symbolic entry of K (upper triangle, plus the diagonal when symbolic)."""
    out = []
    for a in range(K.shape[0]):
        for b in range(a, K.shape[1]):
            if isinstance(K[a, b], sp.Symbol):
                out.append((K[a, b], a, b))
    return out


def evaluate(exprs: Sequence[sp.Expr], bindings: dict[sp.Symbol, np.ndarray]) -> np.ndarray:
    """Evaluate sympy expressions on batches: each symbol bound to an array of shape (batch,); -> (batch, len)."""
    syms = list(bindings)
    fn = sp.lambdify(syms, list(exprs), "numpy")
    batch = len(next(iter(bindings.values())))
    cols = [np.broadcast_to(np.asarray(v, dtype=np.float64), (batch,)) for v in fn(*[bindings[s] for s in syms])]
    return np.stack(cols, -1)


def kernel_bindings(K: sp.Matrix, values: np.ndarray) -> dict[sp.Symbol, np.ndarray]:
    """Bind the entry symbols of K to a batch of numeric kernels `values` of shape (batch, n, n)."""
    return {s: values[:, a, b] for s, a, b in entry_symbols(K)}
