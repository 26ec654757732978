"""Build the three theory notebooks and execute them in notebooks/: python -m theory.build_notebooks.

They are committed with their outputs (figures and tables visible on a code host); rebuild them in the change that
alters what they show. ``--no-execute`` writes the cells only.

01_kernel_and_credits: the kernel, local mass, D and the credits on small examples.
02_influence_function: the influence function, novelty vs interaction, monotonicity in m with the C.4/C.5
bounds, and the finite-perturbation bounds of C.7/C.8.
03_discrete_results: decomposition terms, the anti-redundancy derivative, dominance and dilution, as
parameter sweeps rendered as static plots, and Thm 4.3 proven for a symbolic group size step by step.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parents[1] / "notebooks"

SETUP = """import sys
from pathlib import Path

import matplotlib

import setpo  # the installed package (pip install -e ".[notebooks]")

matplotlib.use("Agg")  # non-interactive: figures are shown as PNG by theory.plots.show
# theory/ (the repository's checks of the paper's results) is not part of the installed package: the repository
# root goes at the end of the path, where it cannot shadow the installed setpo.
root = Path.cwd().resolve()
while not (root / "theory").is_dir() and root != root.parent:
    root = root.parent
sys.path.append(str(root))
print("setpo", setpo.__version__, "from", Path(setpo.__file__).parent.name)"""

NB01 = [
    (
        "md",
        """# 01 · Kernel, local mass, set diversity and the SetPO credits

The definitions of the paper (Sec. 2, eqs. 3-5) on small groups, computed with the `setpo` core:

* kernel $k(o_i, o_j) = \\mathrm{clamp}(\\cos(e_i, e_j), 0, 1)$;
* local mass $\\hat m(o_j; S) = \\frac{1}{|S|-1} \\sum_{z \\ne j} k(o_j, z)$ (self excluded);
* set diversity $D(S) = \\frac{1}{|S|} \\sum_{y \\in S} g(\\hat m(y; S))$ with $g(x) = -\\log(1+x)$;
* credit $s_i = D(\\Omega) - D(\\Omega \\setminus \\{o_i\\})$, all $G$ of them in $O(G^2)$ by Lemma D.1.""",
    ),
    ("code", SETUP),
    (
        "code",
        """import math

import matplotlib.pyplot as plt
import torch

from setpo import cosine_kernel, local_mass, loo_credits, loo_credits_reference, set_diversity
from theory.plots import show
from theory.thm_4_3_decomposition import decomposition_terms

torch.set_num_threads(1)


def unit(degrees):
    \"\"\"2-d unit embeddings at the given angles.\"\"\"
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], -1)""",
    ),
    (
        "md",
        """## A group of six rollouts

Three near-duplicates (0°, 4°, 8°), one at 50°, one at 95° (clamped to similarity 0 with the first ones)
and one at 140°.""",
    ),
    (
        "code",
        """angles = [0, 4, 8, 50, 95, 140]
K = cosine_kernel(unit(angles))
m = local_mass(K)
s = loo_credits(K)
assert torch.allclose(s, loo_credits_reference(K), atol=1e-14)  # closed form = literal Algorithm 1
print(f"D(Omega) = {float(set_diversity(K)):.4f}")

fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
im = axes[0].imshow(K, vmin=0, vmax=1, cmap="viridis")
for i in range(6):
    for j in range(6):
        axes[0].text(j, i, f"{float(K[i, j]):.2f}", ha="center", va="center", fontsize=7, color="w")
axes[0].set_title("kernel k(o_i, o_j)")
fig.colorbar(im, ax=axes[0], fraction=0.046)
axes[1].bar(range(6), m)
axes[1].set_title("local mass m_j")
axes[2].bar(range(6), s, color=["C3" if v < 0 else "C2" for v in s])
axes[2].axhline(0, color="k", lw=0.5)
axes[2].set_title("credit s_i = D(Omega) - D(Omega minus o_i)")
for ax in axes[1:]:
    ax.set_xticks(range(6), [f"{a}°" for a in angles])
fig.tight_layout()
show(fig)""",
    ),
    (
        "md",
        """The near-duplicates get the smallest (here negative) credits, the isolated rollouts the largest.
Thm 4.3 splits each credit into a self term, a normalisation term and an interaction term:""",
    ),
    (
        "code",
        """self_term, norm_term, inter = decomposition_terms(K, "neglog1p")
assert torch.allclose(self_term + norm_term + inter, s, atol=1e-14)
fig, ax = plt.subplots(figsize=(7, 3.4))
x = torch.arange(6)
for k, (name, term) in enumerate([("self", self_term), ("normalisation", norm_term), ("interaction", inter)]):
    ax.bar(x + 0.25 * (k - 1), term, width=0.25, label=name)
ax.plot(x, s, "k*", ms=10, label="s_i (sum)")
ax.axhline(0, color="k", lw=0.5)
ax.set_xticks(range(6), [f"{a}°" for a in angles])
ax.legend(fontsize=8)
ax.set_title("Thm 4.3: the three terms of each credit")
show(fig)""",
    ),
    (
        "md",
        """## Moving one rollout away from the others

Five fixed rollouts at 0°, 10°, 20°, 60°, 120° and a sixth at angle θ: its credit for the four registered
shaping functions. A duplicate of an existing rollout earns the least.""",
    ),
    (
        "code",
        """thetas = torch.linspace(0, 180, 181, dtype=torch.float64)
fixed = [0, 10, 20, 60, 120]
groups = torch.stack([unit([*fixed, float(t)]) for t in thetas])
Ks = cosine_kernel(groups)
fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
for g in ("neglog1p", "linear", "exp", "inverse"):
    axes[0].plot(thetas, loo_credits(Ks, g)[:, -1], label=g)
    axes[1].plot(thetas, set_diversity(Ks, g) - set_diversity(Ks[:1], g), label=g)
for a in fixed:
    axes[0].axvline(a, color="grey", lw=0.5, ls=":")
axes[0].set_title("credit of the moving rollout")
axes[1].set_title("D(Omega) - D(Omega at θ = 0)")
for ax in axes:
    ax.set_xlabel("θ (degrees)")
    ax.legend(fontsize=8)
show(fig)""",
    ),
    (
        "md",
        """## Edge cases

Exact duplicates get equal credits; a group of two has no leave-one-out diversity, and the core refuses it.""",
    ),
    (
        "code",
        """dup = cosine_kernel(unit([0, 0, 45, 90]))
s_dup = loo_credits(dup)
print("credits with o_0 = o_1:", [round(v, 4) for v in s_dup.tolist()])
assert torch.isclose(s_dup[0], s_dup[1], atol=1e-15)
try:
    loo_credits(cosine_kernel(unit([0, 30])))  # raises
except ValueError as err:
    print("G = 2:", err)
pair = cosine_kernel(unit([0, 30]))
print("G = 2 with on_small_group='zero':", loo_credits(pair, on_small_group="zero").tolist())""",
    ),
]

NB02 = [
    (
        "md",
        """# 02 · The diversity influence function

For a finite-support $P$ and an injected trajectory $\\tau$ (Thm 4.2 = C.2, "Theorem 3.2"):
$I(\\tau; P) = g(m_P(\\tau)) + E_P[g'(m_P(y)) k(y, \\tau)] - \\Psi(P)$, intrinsic novelty plus a (negative)
interaction penalty. Lemma C.4 reduces the uncentred score $\\tilde I$ to $\\phi(m_P(\\tau))$,
$\\phi(m) = g(m) + m g'(m)$, up to a remainder; Thm C.5 turns that into monotonicity in $m$; Thms C.7/C.8
bound finite injections.""",
    ),
    ("code", SETUP),
    (
        "code",
        """import math

import matplotlib.pyplot as plt
import torch

from setpo import cosine_kernel, influence, population_diversity
from theory.lemma_c4_proxy import tightest_bound
from theory.plots import show
from theory.proxy import curvature_constant, lipschitz_dg, phi, remainder
from theory.thm_4_2_influence import autograd_influence
from theory.thm_c7_finite_perturbation import bound_terms

torch.set_num_threads(1)


def unit(degrees):
    \"\"\"Unit embeddings in 3-d: on a circle, tilted so that opposite points keep a small positive cosine.\"\"\"
    rad = torch.as_tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin(), torch.full_like(rad, 0.6)], -1)""",
    ),
    (
        "md",
        """## P: a crowded mode and a few scattered atoms; τ swept around the circle

Eight atoms of $P$ (five within 20° of 0°, three spread out) and 360 candidate points τ of weight 0.""",
    ),
    (
        "code",
        """atoms = [0, 5, 10, 15, 20, 120, 200, 270]
weights = torch.tensor([0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.05, 0.05], dtype=torch.float64)
taus = torch.arange(0, 360, 1.0, dtype=torch.float64)
emb = torch.cat([unit(atoms), unit(taus)])
K = cosine_kernel(emb)
p = torch.cat([weights, torch.zeros(len(taus), dtype=torch.float64)])
inf = influence(p, K, "neglog1p")
assert torch.allclose(autograd_influence(p.unsqueeze(0), K.unsqueeze(0), "neglog1p")[0], inf.influence, atol=1e-12)
sl = slice(len(atoms), None)
fig, ax = plt.subplots(figsize=(10, 3.8))
ax.plot(taus, inf.novelty[sl], label="intrinsic novelty g(m_P(τ))")
ax.plot(taus, inf.interaction[sl], label="interaction penalty E_P[g'(m) k(y, τ)]")
ax.plot(taus, inf.influence[sl], "k", lw=2, label="influence I(τ; P)")
for a in atoms:
    ax.axvline(a, color="grey", lw=0.5, ls=":")
ax.set_xlabel("τ (degrees)")
ax.legend(fontsize=8)
ax.set_title(f"Thm 4.2 (F(P) = {float(inf.F):.3f}, Psi(P) = {float(inf.psi):.3f})")
show(fig)""",
    ),
    (
        "md",
        """## Proxy reduction (Lemma C.4) and monotonicity in m (Thm C.5)

Each τ as a point $(m_P(\\tau), \\tilde I(\\tau))$ against the curve $\\phi(m)$; the bars are the Lemma C.4 bound
$L(\\delta m_\\tau + \\eta)$ at the best η. The dashed line has the slope $-c_a$ of Thm C.5 for
$a = \\min m_P(\\tau)$: two points further apart in $m$ than $(|r_1| + |r_2|)/c_a$ are ordered.""",
    ),
    (
        "code",
        """m, score, r = remainder(p.unsqueeze(0), K.unsqueeze(0), "neglog1p")
bound = tightest_bound(p.unsqueeze(0), K.unsqueeze(0), m, lipschitz_dg("neglog1p"))[0]
m, score, r = m[0], score[0], r[0]
assert bool((r.abs() <= bound + 1e-12).all())
grid = torch.linspace(float(m.min()) - 0.02, 1.0, 200, dtype=torch.float64)
a = float(m[sl].min())
c_a = float(curvature_constant("neglog1p", torch.tensor(a, dtype=torch.float64)))
fig, axes = plt.subplots(1, 2, figsize=(13, 4))
axes[0].plot(grid, phi("neglog1p", grid), "k", label="phi(m) = g(m) + m g'(m)")
axes[0].errorbar(m[sl][::6], score[sl][::6], yerr=bound[sl][::6], fmt=".", ms=4, lw=0.6, label="I~(τ) ± C.4 bound")
phi_a = float(phi("neglog1p", torch.tensor(a, dtype=torch.float64)))
axes[0].plot(grid, phi_a - c_a * (grid - a), "C3--", label=f"slope -c_a = {-c_a:.2f}")
axes[0].set_xlabel("m_P(τ)")
axes[0].legend(fontsize=8)
axes[0].set_title("Lemma C.4 / Thm C.5")
axes[1].plot(taus, r[sl].abs(), label="|r_τ|")
axes[1].plot(taus, bound[sl], label="L(δ m_τ + η), best η")
axes[1].set_xlabel("τ (degrees)")
axes[1].legend(fontsize=8)
axes[1].set_title("remainder and its bound")
show(fig)""",
    ),
    (
        "md",
        """## Finite injections (Thms C.7, C.8)

$F(P_\\varepsilon) - F(P)$ for a rare τ (225°) and a crowded one (10°), with the main term and the band
$\\pm E$ of Thm C.7; the lower edge is the certified gain $J$ of Thm C.8, larger for the rarer τ.""",
    ),
    (
        "code",
        """eps = torch.linspace(0, 1, 101, dtype=torch.float64).unsqueeze(-1)
B = len(eps)
fig, ax = plt.subplots(figsize=(8, 4))
for deg, colour in ((225.0, "C0"), (10.0, "C1")):
    t = len(atoms) + int(deg)
    dF, main, E = bound_terms(p.expand(B, -1), K.expand(B, -1, -1), "neglog1p", t, eps)
    assert bool(((dF - main).abs() <= E + 1e-12).all())
    x = eps[:, 0]
    ax.plot(x, dF, colour, lw=2, label=f"F(P_eps) - F(P), τ = {deg:.0f}° (m = {float(m[t]):.2f})")
    ax.fill_between(x, main - E, main + E, color=colour, alpha=0.15)
    ax.plot(x, main - E, colour, ls="--", lw=1, label=f"certified gain J, τ = {deg:.0f}°")
check = population_diversity(p, K, "neglog1p")
ax.set_xlabel("eps")
ax.legend(fontsize=8)
ax.set_title(f"Thm C.7 band (shaded) and Thm C.8 lower bound; F(P) = {float(check):.3f}")
show(fig)""",
    ),
]

NB03 = [
    (
        "md",
        """# 03 · The discrete results as parameter sweeps

Thm 4.3 (decomposition), Thm 4.4 (anti-redundancy), Thm 4.5 / Cor D.5 (dominance, weighted gap) and
Cor D.6 (dilution vs congestion), each swept over a parameter and drawn as small multiples; Thm 4.3 is also
proven for a symbolic group size, step by step.""",
    ),
    ("code", SETUP),
    (
        "code",
        """import matplotlib.pyplot as plt
import torch

from setpo import local_mass, loo_credits
from theory.cor_d5_weighted_gap import weighted_gap
from theory.instances import generator, random_kernel, without
from theory.plots import show
from theory.thm_4_3_decomposition import decomposition_terms
from theory.thm_4_4_anti_redundancy import autograd_derivative, predicted_derivative
from theory.thm_4_5_dominance import credit_gap

torch.set_num_threads(1)
SHAPINGS = ("neglog1p", "linear", "exp", "inverse")


def group(G, x, background=0.5):
    \"\"\"A G x G kernel: o_0 has similarity x to everyone, the others `background` among themselves.\"\"\"
    K = torch.full((len(x), G, G), background, dtype=torch.float64)
    K[:, 0, :] = K[:, :, 0] = x.unsqueeze(-1)
    K.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return K""",
    ),
    (
        "md",
        """## Thm 4.3: self, normalisation and interaction terms of $s_0$ as $o_0$ becomes redundant

Rows: group size; columns: the background similarity of the other rollouts.""",
    ),
    (
        "code",
        """x = torch.linspace(0, 1, 101, dtype=torch.float64)
fig, axes = plt.subplots(2, 3, figsize=(13, 6), sharex=True)
for row, G in enumerate((4, 8)):
    for col, bg in enumerate((0.2, 0.5, 0.8)):
        K = group(G, x, bg)
        terms = decomposition_terms(K, "neglog1p")
        ax = axes[row, col]
        for name, term in zip(("self", "normalisation", "interaction"), terms):
            ax.plot(x, term[:, 0], label=name)
        ax.plot(x, loo_credits(K)[:, 0], "k", lw=2, label="s_0")
        assert torch.allclose(sum(terms)[:, 0], loo_credits(K)[:, 0], atol=1e-14)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_title(f"G = {G}, background k = {bg}", fontsize=9)
axes[0, 0].legend(fontsize=7)
for ax in axes[1]:
    ax.set_xlabel("k(o_0, o_j) for all j")
fig.tight_layout()
show(fig)""",
    ),
    (
        "md",
        """## Thm 4.3 proven for every group size, step by step

The sweeps above and the `G = 3..6` expansions of `python -m theory` sample the group size; `theory/general.py`
proves the identity for a **symbolic** integer $G \\ge 3$ and a generic $g$. The removed rollout is $o_i = o_0$
(relabelling changes nothing), the other members form $R = \\{o_1, \\dots, o_{G-1}\\}$ with $j$ a generic member,
and the kernel enters through $k_0[j] = k(o_0, o_j)$ and $q[j] = \\sum_{z \\in R, z \\ne j} k(o_j, o_z)$.
Every sum over a set is split explicitly into the named member and a sympy `Sum` over $R$.""",
    ),
    (
        "code",
        """import sympy as sp
from IPython.display import display

from theory import general
from theory import symbolic as S

G, j = general.G, general.J
group = general.Group(1)  # one named member, o_i = o_0
m_i = group.local_mass(0, {0})  # m_hat(o_i; Omega)
m_j = group.local_mass(j, {0})  # m_hat(o_j; Omega)
m_j_without_i = group.local_mass(j, set())  # m_hat(o_j; Omega minus o_i), literally (eq. 3)
display(sp.Eq(sp.Symbol("m_i"), m_i), sp.Eq(sp.Symbol("m_j"), m_j), sp.Eq(sp.Symbol("m_j^(-i)"), m_j_without_i))""",
    ),
    (
        "md",
        """**Step 1 (Lemma D.1).** The printed form $m_j + (m_j - k(o_j, o_i))/(G-2)$ equals the literal reduced-set
mass for every $G$: the difference reduces to 0, and the only denominator, $G-2$, is non-zero for $G \\ge 3$.""",
    ),
    (
        "code",
        """lemma = m_j + (m_j - group.k(0, j)) / (G - 2)
step1 = general.prove(lemma, m_j_without_i, "Lemma D.1")
print(step1, "| denominators:", step1.group_denominators)
assert step1.holds""",
    ),
    (
        "md",
        """**Step 2.** Both sides of Thm 4.3: the credit by its definition
$s_i = D(\\Omega) - D(\\Omega \\setminus \\{o_i\\})$ (eqs. 4-5, each $D$ a named term plus a sum over $R$) and the
printed self + normalisation + interaction terms, with $m_j^{(-i)}$ written by Lemma D.1.""",
    ),
    (
        "code",
        """definition = group.credit(0)
decomposition = (
    S.g(m_i) / G
    + (sp.Integer(1) / G - sp.Integer(1) / (G - 1)) * group.rest_sum(S.g(m_j))
    + group.rest_sum(S.g(m_j) - S.g(lemma)) / (G - 1)
)
display(sp.Eq(sp.Symbol("s_i"), definition), sp.Eq(sp.Symbol("s_i"), decomposition))""",
    ),
    (
        "md",
        """**Step 3.** The canonical form: each sum split by linearity with the factors free of $j$ pulled out, the
summation index renamed canonically, every argument of $g$ a reduced fraction. The interaction sum breaks into
$\\sum_j g(m_j)$, which meets the normalisation term, and $\\sum_j g(m_j^{(-i)})$, which is the second half of
the definition.""",
    ),
    (
        "code",
        """display(general.canonical_form(definition), general.canonical_form(decomposition))""",
    ),
    (
        "md",
        """**Step 4.** The difference as one reduced fraction in $G$, the sums and the values of $g$: it is 0, and
its denominators $G$, $G-1$, $G-2$ vanish at no group size. That proves Thm 4.3 for every $G \\ge 3$.""",
    ),
    (
        "code",
        """proof = general.prove(definition, decomposition, "Thm 4.3")
print(proof, "| residual:", proof.residual, "| denominators:", proof.group_denominators)
assert proof.holds and proof.residual == 0""",
    ),
    (
        "md",
        """**Cross-check.** At $G = 4$ the same expressions, with every sum expanded and $q[j]$ written out, equal the
explicit $4 \\times 4$ expansion of the definition; and a slip, $1/(G-1)$ instead of $1/(G-2)$ in Lemma D.1,
leaves a non-zero residual.""",
    ),
    (
        "code",
        """K = S.kernel_matrix(4)
assert S.is_identity(group.instantiate(decomposition, 4), S.credit(K, 0))
slip = general.prove(m_j + (m_j - group.k(0, j)) / (G - 1), m_j_without_i, "Lemma D.1 with G-1")
print(slip)
assert not slip.holds""",
    ),
    (
        "md",
        """## Thm 4.4: $\\partial s_i / \\partial k(o_i, o_t) = (g'(m_i) + g'(m_t)) / (G(G-1)) < 0$

The derivative by autograd through the core, swept over $k(o_0, o_1)$ on random groups, for three group
sizes and the four shapings; dots mark the closed form.""",
    ),
    (
        "code",
        """k01 = torch.linspace(0, 1, 41, dtype=torch.float64)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=False)
for ax, G in zip(axes, (3, 6, 12)):
    base = random_kernel("cosine", 1, G, generator(G))[0]
    K = base.repeat(len(k01), 1, 1)
    K[:, 0, 1] = K[:, 1, 0] = k01
    for g in SHAPINGS:
        auto = autograd_derivative(K, g)[:, 0, 1]
        pred = predicted_derivative(K, g)[:, 0, 1]
        assert torch.allclose(auto, pred, atol=1e-14) and bool((auto < 0).all())
        line = ax.plot(k01, auto, label=g)[0]
        ax.plot(k01[::8], pred[::8], "o", color=line.get_color(), ms=3)
    ax.set_title(f"G = {G}")
    ax.set_xlabel("k(o_0, o_1)")
axes[0].set_ylabel("d s_0 / d k(o_0, o_1)")
axes[0].legend(fontsize=7)
fig.tight_layout()
show(fig)""",
    ),
    (
        "md",
        """## Thm 4.5 and Cor D.5: dominance

$o_c$ keeps random similarities; $o_r$ copies them and lowers one by δ. The gap $s_r - s_c$ grows with δ;
the right panel shows the weights $w_0$ and $w_j$ of Cor D.5 (mean-value slopes of $-g'$), all positive.""",
    ),
    (
        "code",
        """delta = torch.linspace(0, 0.6, 61, dtype=torch.float64)
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for G in (3, 6, 12):
    base = random_kernel("clustered", 1, G, generator(100 + G))[0]
    base[1, 2] = base[2, 1] = 0.8
    base[0, 2:] = base[2:, 0] = base[1, 2:]  # r = 0 copies c = 1 ...
    K = base.repeat(len(delta), 1, 1)
    K[:, 0, 2] = K[:, 2, 0] = (base[1, 2] - delta).clamp(min=0)  # ... and is lower on j = 2
    for g, ls in (("neglog1p", "-"), ("linear", ":")):
        gap = credit_gap(K, 0, 1, g)
        assert bool((gap[1:] > 0).all()) and abs(float(gap[0])) < 1e-14
        axes[0].plot(delta, gap, ls, label=f"G = {G}, {g}")
    _, w0, wj, _ = weighted_gap(K, 0, 1, "neglog1p")
    axes[1].plot(delta, w0, label=f"w_0, G = {G}")
    axes[1].plot(delta, wj[:, 0], "--", label=f"w_2, G = {G}")
axes[0].set_xlabel("δ (drop of k(o_r, o_2))")
axes[0].set_title("s_r - s_c")
axes[0].legend(fontsize=7)
axes[1].set_xlabel("δ")
axes[1].set_title("Cor D.5 weights (g = -log(1+x))")
axes[1].legend(fontsize=7)
show(fig)""",
    ),
    (
        "md",
        """## Cor D.6: dilution vs congestion

For every pair $(i, j)$ of random groups: removing $o_i$ raises $m_j$ exactly when $k(o_j, o_i) < m_j$, and by
$(m_j - k(o_j, o_i)) / (G-2)$ (Lemma D.1): points lie on lines of slope $1/(G-2)$.""",
    ),
    (
        "code",
        """fig, ax = plt.subplots(figsize=(7, 4))
for G in (3, 5, 10):
    K = random_kernel("uniform", 50, G, generator(200 + G))
    m = local_mass(K)
    xs, ys = [], []
    for i in range(G):
        keep = [j for j in range(G) if j != i]
        xs.append((m - K[..., :, i])[:, keep].flatten())
        ys.append((local_mass(without(K, i)) - m[:, keep]).flatten())
    xs, ys = torch.cat(xs), torch.cat(ys)
    assert bool(((ys > 0) == (xs > 0)).all())
    ax.scatter(xs, ys, s=3, label=f"G = {G} (slope 1/{G - 2})")
ax.axhline(0, color="k", lw=0.5)
ax.axvline(0, color="k", lw=0.5)
ax.set_xlabel("m_j - k(o_j, o_i)")
ax.set_ylabel("m_j^(-i) - m_j")
ax.legend(fontsize=8)
show(fig)""",
    ),
]

NOTEBOOKS = {
    "01_kernel_and_credits.ipynb": NB01,
    "02_influence_function.ipynb": NB02,
    "03_discrete_results.ipynb": NB03,
}


def build() -> dict[str, nbformat.NotebookNode]:
    """The notebooks, unexecuted, with deterministic cell ids."""
    out = {}
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook()
        nb.metadata = {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
        for k, (kind, source) in enumerate(cells):
            cell = new_markdown_cell(source) if kind == "md" else new_code_cell(source)
            cell["id"] = f"{name[:2]}-{k:02d}"
            nb.cells.append(cell)
        out[name] = nb
    return out


def execute(nb: nbformat.NotebookNode, timeout: int = 1200) -> nbformat.NotebookNode:
    """Run every cell in a fresh python3 kernel with notebooks/ as working directory (no timing metadata)."""
    from nbclient import NotebookClient

    resources = {"metadata": {"path": str(OUT)}}
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False, resources=resources).execute()
    return nb


def main(argv: list[str] | None = None) -> None:
    """Write every notebook into notebooks/, executed unless ``--no-execute``."""
    parser = argparse.ArgumentParser(prog="python -m theory.build_notebooks", description=__doc__.splitlines()[0])
    parser.add_argument("--no-execute", action="store_true", help="write the cells without running them")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    for name, nb in build().items():
        if not args.no_execute:
            execute(nb)
        nbformat.write(nb, OUT / name)
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
