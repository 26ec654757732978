# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · The discrete results as parameter sweeps
#
# Thm 4.3 (decomposition), Thm 4.4 (anti-redundancy), Thm 4.5 / Cor D.5 (dominance, weighted gap) and
# Cor D.6 (dilution vs congestion), each swept over a parameter and drawn as small multiples; Thm 4.3 is also
# proven for a symbolic group size, step by step.

# %%
import sys
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
print("setpo", setpo.__version__, "from", Path(setpo.__file__).parent.name)

# %%
import matplotlib.pyplot as plt
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
    """A G x G kernel: o_0 has similarity x to everyone, the others `background` among themselves."""
    K = torch.full((len(x), G, G), background, dtype=torch.float64)
    K[:, 0, :] = K[:, :, 0] = x.unsqueeze(-1)
    K.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return K


# %% [markdown]
# ## Thm 4.3: self, normalisation and interaction terms of $s_0$ as $o_0$ becomes redundant
#
# Rows: group size; columns: the background similarity of the other rollouts.

# %%
x = torch.linspace(0, 1, 101, dtype=torch.float64)
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
show(fig)

# %% [markdown]
# ## Thm 4.3 proven for every group size, step by step
#
# The sweeps above and the `G = 3..6` expansions of `python -m theory` sample the group size; `theory/general.py`
# proves the identity for a **symbolic** integer $G \ge 3$ and a generic $g$. The removed rollout is $o_i = o_0$
# (relabelling changes nothing), the other members form $R = \{o_1, \dots, o_{G-1}\}$ with $j$ a generic member,
# and the kernel enters through $k_0[j] = k(o_0, o_j)$ and $q[j] = \sum_{z \in R, z \ne j} k(o_j, o_z)$.
# Every sum over a set is split explicitly into the named member and a sympy `Sum` over $R$.

# %%
import sympy as sp
from IPython.display import display

from theory import general
from theory import symbolic as S

G, j = general.G, general.J
group = general.Group(1)  # one named member, o_i = o_0
m_i = group.local_mass(0, {0})  # m_hat(o_i; Omega)
m_j = group.local_mass(j, {0})  # m_hat(o_j; Omega)
m_j_without_i = group.local_mass(j, set())  # m_hat(o_j; Omega minus o_i), literally (eq. 3)
display(sp.Eq(sp.Symbol("m_i"), m_i), sp.Eq(sp.Symbol("m_j"), m_j), sp.Eq(sp.Symbol("m_j^(-i)"), m_j_without_i))

# %% [markdown]
# **Step 1 (Lemma D.1).** The printed form $m_j + (m_j - k(o_j, o_i))/(G-2)$ equals the literal reduced-set
# mass for every $G$: the difference reduces to 0, and the only denominator, $G-2$, is non-zero for $G \ge 3$.

# %%
lemma = m_j + (m_j - group.k(0, j)) / (G - 2)
step1 = general.prove(lemma, m_j_without_i, "Lemma D.1")
print(step1, "| denominators:", step1.group_denominators)
assert step1.holds

# %% [markdown]
# **Step 2.** Both sides of Thm 4.3: the credit by its definition
# $s_i = D(\Omega) - D(\Omega \setminus \{o_i\})$ (eqs. 4-5, each $D$ a named term plus a sum over $R$) and the
# printed self + normalisation + interaction terms, with $m_j^{(-i)}$ written by Lemma D.1.

# %%
definition = group.credit(0)
decomposition = (
    S.g(m_i) / G
    + (sp.Integer(1) / G - sp.Integer(1) / (G - 1)) * group.rest_sum(S.g(m_j))
    + group.rest_sum(S.g(m_j) - S.g(lemma)) / (G - 1)
)
display(sp.Eq(sp.Symbol("s_i"), definition), sp.Eq(sp.Symbol("s_i"), decomposition))

# %% [markdown]
# **Step 3.** The canonical form: each sum split by linearity with the factors free of $j$ pulled out, the
# summation index renamed canonically, every argument of $g$ a reduced fraction. The interaction sum breaks into
# $\sum_j g(m_j)$, which meets the normalisation term, and $\sum_j g(m_j^{(-i)})$, which is the second half of
# the definition.

# %%
display(general.canonical_form(definition), general.canonical_form(decomposition))

# %% [markdown]
# **Step 4.** The difference as one reduced fraction in $G$, the sums and the values of $g$: it is 0, and
# its denominators $G$, $G-1$, $G-2$ vanish at no group size. That proves Thm 4.3 for every $G \ge 3$.

# %%
proof = general.prove(definition, decomposition, "Thm 4.3")
print(proof, "| residual:", proof.residual, "| denominators:", proof.group_denominators)
assert proof.holds and proof.residual == 0

# %% [markdown]
# **Cross-check.** At $G = 4$ the same expressions, with every sum expanded and $q[j]$ written out, equal the
# explicit $4 \times 4$ expansion of the definition; and a slip, $1/(G-1)$ instead of $1/(G-2)$ in Lemma D.1,
# leaves a non-zero residual.

# %%
K = S.kernel_matrix(4)
assert S.is_identity(group.instantiate(decomposition, 4), S.credit(K, 0))
slip = general.prove(m_j + (m_j - group.k(0, j)) / (G - 1), m_j_without_i, "Lemma D.1 with G-1")
print(slip)
assert not slip.holds

# %% [markdown]
# ## Thm 4.4: $\partial s_i / \partial k(o_i, o_t) = (g'(m_i) + g'(m_t)) / (G(G-1)) < 0$
#
# The derivative by autograd through the core, swept over $k(o_0, o_1)$ on random groups, for three group
# sizes and the four shapings; dots mark the closed form.

# %%
k01 = torch.linspace(0, 1, 41, dtype=torch.float64)
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
show(fig)

# %% [markdown]
# ## Thm 4.5 and Cor D.5: dominance
#
# $o_c$ keeps random similarities; $o_r$ copies them and lowers one by δ. The gap $s_r - s_c$ grows with δ;
# the right panel shows the weights $w_0$ and $w_j$ of Cor D.5 (mean-value slopes of $-g'$), all positive.

# %%
delta = torch.linspace(0, 0.6, 61, dtype=torch.float64)
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
show(fig)

# %% [markdown]
# ## Cor D.6: dilution vs congestion
#
# For every pair $(i, j)$ of random groups: removing $o_i$ raises $m_j$ exactly when $k(o_j, o_i) < m_j$, and by
# $(m_j - k(o_j, o_i)) / (G-2)$ (Lemma D.1): points lie on lines of slope $1/(G-2)$.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
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
show(fig)
