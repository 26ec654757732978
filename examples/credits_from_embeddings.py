"""SetPO credits for a batch of groups from their embeddings, added to GRPO's advantages.

    python examples/credits_from_embeddings.py

Each prompt has G rollouts; `setpo.group_credits` builds each group's clamped-cosine kernel and returns every
rollout's leave-one-out credit s_i = D(Omega) - D(Omega \\ {o_i}) (eq. 5). Replace the random embeddings with your
embedder's output, (prompts * G, d) or (prompts, G, d).
"""

import torch

import setpo

G = 6
torch.manual_seed(0)
E = torch.randn(4, G, 32)  # 4 prompts x G rollouts x 32-d embeddings
E[0, 1:] = E[0, 0] + 0.01 * torch.randn(G - 1, 32)  # group 0: five near-copies of one answer ...
E[0, 0] = torch.randn(32)  # ... and one different rollout

credits, diversity = setpo.group_credits(E, G, return_diversity=True)  # (4, G) credits, (4,) D(Omega)
rewards = torch.tensor([1.0, 1, 1, 1, 1, 1] + [1.0, 0, 1, 0, 1, 0] * 3)
A_bar = setpo.group_advantages(rewards, G)  # GRPO: (r - group mean) / (group std + eps)
A_hat = setpo.setpo_advantages(A_bar, credits.flatten(), lam=0.5)  # eq. 6

print("credits of group 0 (rollout 0 is the different one):", [round(x, 4) for x in credits[0].tolist()])
print("set diversity D per group:", [round(x, 4) for x in diversity.tolist()])
print("advantages of group 0, GRPO -> SetPO:", A_bar[:G].tolist(), "->", [round(x, 4) for x in A_hat[:G].tolist()])

# the different rollout gets the largest credit; in a group of equal rewards it is the only signal
assert credits[0].argmax().item() == 0 and (credits[0, 0] > credits[0, 1:]).all()
assert A_bar[:G].abs().max() == 0 and A_hat[0] == A_hat[:G].max()
# the fast closed form (Lemma D.1) equals the paper's literal Algorithm 1 on the same kernels
K = setpo.cosine_kernel(E)
torch.testing.assert_close(credits, setpo.loo_credits_reference(K))
print("ok")
