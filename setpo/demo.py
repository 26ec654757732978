"""A one-screen demo of the SetPO credit on a single group: `python -m setpo.demo`."""

from __future__ import annotations

import torch

from setpo import cosine_kernel, group_advantages, local_mass, loo_credits, set_diversity, setpo_advantages
from setpo.embedders.hashed import HashedNgramEmbedder

# One prompt's group of G = 6 rollouts for the Countdown problem "make 13 from 3, 5, 2" (TinyZero reward:
# 1.0 correct, 0.1 well-formed but wrong, 0 without an answer): the same correct expression twice, a
# commuted copy of it, a genuinely different correct one, a wrong one and one without an answer.
GROUP = [
    ("<answer>5 * 2 + 3</answer>", 1.0),
    ("<answer>5 * 2 + 3</answer>", 1.0),
    ("<answer>2 * 5 + 3</answer>", 1.0),
    ("<answer>3 * 5 - 2</answer>", 1.0),
    ("<answer>3 * 5 + 2</answer>", 0.1),
    ("I think the answer is 13", 0.0),
]
LAMBDA = 0.5  # the paper's Countdown value (Table 8)


def main() -> None:
    texts = [t for t, _ in GROUP]
    rewards = torch.tensor([r for _, r in GROUP], dtype=torch.float64)
    embeddings = HashedNgramEmbedder()(texts).double()
    K = cosine_kernel(embeddings)
    s = loo_credits(K)
    a_bar = group_advantages(rewards, group_size=len(GROUP))
    a_hat = setpo_advantages(a_bar, s, LAMBDA)
    print(f"D(Omega) = {set_diversity(K).item():.4f}   (g = -log(1+x), hashed n-gram embedder, lambda = {LAMBDA})")
    print(f"{'rollout':<34} {'r':>4} {'m_i':>7} {'s_i':>8} {'A_bar':>7} {'A_hat':>7}")
    for i, text in enumerate(texts):
        print(
            f"{text:<34} {rewards[i].item():>4.1f} {local_mass(K)[i].item():>7.3f} {s[i].item():>8.4f} "
            f"{a_bar[i].item():>7.3f} {a_hat[i].item():>7.3f}"
        )
    dup = s[:2].mean().item()
    print(f"\nThe duplicated correct answer gets credit {dup:.4f}; the different correct one {s[3].item():.4f}.")
    print("Every rollout gets its credit, correct or not; lambda keeps it small beside the reward advantage.")


if __name__ == "__main__":
    main()
