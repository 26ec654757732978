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
# # 02 · The diversity influence function
#
# For a finite-support $P$ and an injected trajectory $\tau$ (Thm 4.2 = C.2, "Theorem 3.2"):
# $I(\tau; P) = g(m_P(\tau)) + E_P[g'(m_P(y)) k(y, \tau)] - \Psi(P)$, intrinsic novelty plus a (negative)
# interaction penalty. Lemma C.4 reduces the uncentred score $\tilde I$ to $\phi(m_P(\tau))$,
# $\phi(m) = g(m) + m g'(m)$, up to a remainder; Thm C.5 turns that into monotonicity in $m$; Thms C.7/C.8
# bound finite injections.

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
import math

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
    """Unit embeddings in 3-d: on a circle, tilted so that opposite points keep a small positive cosine."""
    rad = torch.as_tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin(), torch.full_like(rad, 0.6)], -1)


# %% [markdown]
# ## P: a crowded mode and a few scattered atoms; τ swept around the circle
#
# Eight atoms of $P$ (five within 20° of 0°, three spread out) and 360 candidate points τ of weight 0.

# %%
atoms = [0, 5, 10, 15, 20, 120, 200, 270]
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
show(fig)

# %% [markdown]
# ## Proxy reduction (Lemma C.4) and monotonicity in m (Thm C.5)
#
# Each τ as a point $(m_P(\tau), \tilde I(\tau))$ against the curve $\phi(m)$; the bars are the Lemma C.4 bound
# $L(\delta m_\tau + \eta)$ at the best η. The dashed line has the slope $-c_a$ of Thm C.5 for
# $a = \min m_P(\tau)$: two points further apart in $m$ than $(|r_1| + |r_2|)/c_a$ are ordered.

# %%
m, score, r = remainder(p.unsqueeze(0), K.unsqueeze(0), "neglog1p")
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
show(fig)

# %% [markdown]
# ## Finite injections (Thms C.7, C.8)
#
# $F(P_\varepsilon) - F(P)$ for a rare τ (225°) and a crowded one (10°), with the main term and the band
# $\pm E$ of Thm C.7; the lower edge is the certified gain $J$ of Thm C.8, larger for the rarer τ.

# %%
eps = torch.linspace(0, 1, 101, dtype=torch.float64).unsqueeze(-1)
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
show(fig)
