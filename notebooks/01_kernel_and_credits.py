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
# # 01 · Kernel, local mass, set diversity and the SetPO credits
#
# The definitions of the paper (Sec. 2, eqs. 3-5) on small groups, computed with the `setpo` core:
#
# * kernel $k(o_i, o_j) = \mathrm{clamp}(\cos(e_i, e_j), 0, 1)$;
# * local mass $\hat m(o_j; S) = \frac{1}{|S|-1} \sum_{z \ne j} k(o_j, z)$ (self excluded);
# * set diversity $D(S) = \frac{1}{|S|} \sum_{y \in S} g(\hat m(y; S))$ with $g(x) = -\log(1+x)$;
# * credit $s_i = D(\Omega) - D(\Omega \setminus \{o_i\})$, all $G$ of them in $O(G^2)$ by Lemma D.1.

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

from setpo import cosine_kernel, local_mass, loo_credits, loo_credits_reference, set_diversity
from theory.plots import show
from theory.thm_4_3_decomposition import decomposition_terms

torch.set_num_threads(1)


def unit(degrees):
    """2-d unit embeddings at the given angles."""
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], -1)


# %% [markdown]
# ## A group of six rollouts
#
# Three near-duplicates (0°, 4°, 8°), one at 50°, one at 95° (clamped to similarity 0 with the first ones)
# and one at 140°.

# %%
angles = [0, 4, 8, 50, 95, 140]
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
show(fig)

# %% [markdown]
# The near-duplicates get the smallest (here negative) credits, the isolated rollouts the largest.
# Thm 4.3 splits each credit into a self term, a normalisation term and an interaction term:

# %%
self_term, norm_term, inter = decomposition_terms(K, "neglog1p")
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
show(fig)

# %% [markdown]
# ## Moving one rollout away from the others
#
# Five fixed rollouts at 0°, 10°, 20°, 60°, 120° and a sixth at angle θ: its credit for the four registered
# shaping functions. A duplicate of an existing rollout earns the least.

# %%
thetas = torch.linspace(0, 180, 181, dtype=torch.float64)
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
show(fig)

# %% [markdown]
# ## Edge cases
#
# Exact duplicates get equal credits; a group of two has no leave-one-out diversity, and the core refuses it.

# %%
dup = cosine_kernel(unit([0, 0, 45, 90]))
s_dup = loo_credits(dup)
print("credits with o_0 = o_1:", [round(v, 4) for v in s_dup.tolist()])
assert torch.isclose(s_dup[0], s_dup[1], atol=1e-15)
try:
    loo_credits(cosine_kernel(unit([0, 30])))  # raises
except ValueError as err:
    print("G = 2:", err)
pair = cosine_kernel(unit([0, 30]))
print("G = 2 with on_small_group='zero':", loo_credits(pair, on_small_group="zero").tolist())
