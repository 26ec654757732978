"""The tiny CPU set-up the TRL trainer tests share: run arguments, a tiny model, prompts, rewards, a char embedder."""

from __future__ import annotations

import torch
from datasets import Dataset

from setpo.tiny import build_tiny_model

G = 4
ROWS = 8  # two prompts of G completions per step
RUN = dict(
    max_steps=2,
    per_device_train_batch_size=ROWS,
    num_generations=G,
    max_completion_length=8,
    learning_rate=1e-2,
    seed=0,
    report_to="none",
    use_cpu=True,
    bf16=False,
    gradient_checkpointing=False,
    save_strategy="no",
    logging_steps=1,
    disable_tqdm=True,
)


def tiny_model(tmp_path_factory, num_layers: int = 1):
    """A tiny char-level causal LM (hidden size 32) in a fresh temporary folder."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=32, num_layers=num_layers)


def dataset(prompts=("ab", "cd", "ef", "gh"), valid: str | None = None) -> Dataset:
    """The prompts, with a ``valid_answers`` column (every character of ``valid``) when given."""
    cols = {"prompt": list(prompts)}
    if valid is not None:
        cols["valid_answers"] = [list(valid)] * len(prompts)
    return Dataset.from_dict(cols)


def distinct_chars(completions, **kwargs) -> list[float]:
    """Reward: the number of distinct characters of the completion."""
    return [float(len(set(c))) for c in completions]


def first_char(text: str) -> str | None:
    """Answer extractor: the first character (None for an empty completion)."""
    return text[:1] or None


class CharHistogram:
    """Counts of printable ASCII characters: non-negative, so cosines lie in [0, 1] and credits are not all zero."""

    def __call__(self, texts):
        out = torch.zeros(len(texts), 96)
        for i, t in enumerate(texts):
            for ch in t:
                out[i, min(max(ord(ch) - 32, 0), 95)] += 1
        return out


def gapo_group_reward(answer_extractor, valid_set_key: str = "valid_answers", **options):
    """GAPO's R~ (eq. 3, `setpo.rewards.gapo_rewards`) of the extracted answers as a group reward: a reward that reads
    every member of a group (the dataset column ``valid_set_key`` holds each row's valid answers)."""
    from setpo.integrations.trl import GroupRewardFunction, completion_text
    from setpo.rewards import gapo_rewards

    def gapo(prompts, completions, group_size, **kwargs) -> list[float]:
        if valid_set_key not in kwargs:
            raise ValueError(f"GAPO reward needs the dataset column {valid_set_key!r}")
        answers = [answer_extractor(completion_text(c)) for c in completions]
        return gapo_rewards(answers, kwargs[valid_set_key], group_size, **options, dtype=torch.float64).tolist()

    return GroupRewardFunction(gapo, name="gapo")
