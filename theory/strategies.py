"""Hypothesis strategies for the discrete results (Lemma D.1, Thms 4.3-4.5, Cors D.5-D.6) and for P.

Kernel entries are drawn on the grid {0, 1/16, ..., 1}: exact binary fractions, so ties are exact and a
"strict" dominance gap is at least 1/16 (no rounding can fake or hide a sign), and hypothesis shrinks
towards 0/1 kernels with many ties, the edge cases of the statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from theory.instances import DTYPE, SHAPINGS
from theory.records import CheckRecord, count_record

GRID = 16


def _kernel(G: int, upper: list[int]) -> torch.Tensor:
    K = torch.eye(G, dtype=DTYPE)
    it = iter(upper)
    for a in range(G):
        for b in range(a + 1, G):
            K[a, b] = K[b, a] = next(it) / GRID
    return K


@st.composite
def kernels(draw, min_size: int = 3, max_size: int = 7) -> torch.Tensor:
    """A (G, G) float64 kernel on the 1/16 grid: symmetric, unit diagonal, values in [0, 1]."""
    G = draw(st.integers(min_size, max_size))
    upper = draw(st.lists(st.integers(0, GRID), min_size=G * (G - 1) // 2, max_size=G * (G - 1) // 2))
    return _kernel(G, upper)


@dataclass(frozen=True)
class Dominance:
    """A kernel where o_r is dominated by o_c: k(o_r, o_j) <= k(o_c, o_j) for j not in {r, c}, strict for one."""

    K: torch.Tensor
    r: int
    c: int


@st.composite
def dominance_instances(draw, min_size: int = 3, max_size: int = 7) -> Dominance:
    """Thm 4.5's hypothesis, with exact ties allowed on every j but one."""
    K = draw(kernels(min_size, max_size)).clone()
    G = K.shape[0]
    r, c = draw(st.permutations(range(G)))[:2]
    others = [j for j in range(G) if j not in (r, c)]
    strict = draw(st.sampled_from(others))
    for j in others:
        kc = draw(st.integers(1 if j == strict else 0, GRID))
        kr = kc - draw(st.integers(1 if j == strict else 0, kc))
        K[c, j] = K[j, c] = kc / GRID
        K[r, j] = K[j, r] = kr / GRID
    return Dominance(K, r, c)


@st.composite
def distributions(draw, min_atoms: int = 1, max_atoms: int = 6, outside: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, K): a finite-support P on the grid plus `outside` zero-weight points tau."""
    N = draw(st.integers(min_atoms, max_atoms))
    raw = draw(st.lists(st.integers(0, 8), min_size=N, max_size=N).filter(lambda w: sum(w) > 0))
    p = torch.tensor(raw + [0] * outside, dtype=DTYPE)
    n = N + outside
    upper = draw(st.lists(st.integers(0, GRID), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    return p / p.sum(), _kernel(n, upper)


shapings = st.sampled_from(SHAPINGS)


def property_record(
    result: str, check: str, strategy: st.SearchStrategy, prop: Callable[..., None], examples: int
) -> CheckRecord:
    """A 'property' record: `prop` on `examples` derandomized hypothesis examples; the detail is the shrunk failure."""
    count = [0]

    @settings(
        max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def wrapped(example):
        count[0] += 1
        prop(example)

    failure = ""
    try:
        wrapped()
    except Exception as err:  # noqa: BLE001 - an assertion, or an error raised by the code under test
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        failure = f"{type(err).__name__}: {first}"[:300]
    return count_record(result, check, "property", count[0], int(bool(failure)), "failing examples", failure)
