"""The lab half of GAPO's list-selection task (`gapo_lists`): splits with held-out items, the item tokenizer, and
the biased SFT teacher whose mode collapse the RL methods are asked to undo.

Prompts, answer extraction and the validity reward, which a user's training run needs, live in
`setpo.tasks.list_selection`.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from setpo._validate import check_choice
from setpo.rewards.gapo import normalize_answer
from setpo.tasks.list_selection import VOCABULARY, list_prompt, open_prompt

MIN_ITEMS_PER_CATEGORY = 20


def item_tokenizer(vocab: dict[str, Sequence[str]] | None = None):
    """`setpo.tiny.build_char_tokenizer` plus one whole-word token per vocabulary item.

    The items are ordinary (not special) added tokens matched as whole words only, so decoding keeps them
    and ``decode(encode(text)) == text`` still holds; everything else stays one token per character. With
    items as single tokens a tiny model learns to copy from the list in a few hundred steps (character by
    character it needs far longer). Items absent from training keep their untrained embeddings.
    """
    from tokenizers import AddedToken

    from setpo.tiny import build_char_tokenizer

    vocab = VOCABULARY if vocab is None else vocab
    validate_vocabulary(vocab)
    tok = build_char_tokenizer()
    words = [w for items in vocab.values() for w in items]
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in words])
    return tok


def validate_vocabulary(vocab: dict[str, Sequence[str]], min_items: int = MIN_ITEMS_PER_CATEGORY) -> None:
    """Raise ValueError unless every category has >= min_items distinct short ASCII words, none shared."""
    if not vocab:
        raise ValueError("vocabulary is empty")
    owner: dict[str, str] = {}
    for cat, items in vocab.items():
        if not cat or not cat.isascii() or not cat.isalpha() or cat != cat.lower():
            raise ValueError(f"category name {cat!r} must be a lowercase ASCII word")
        if len(set(items)) != len(items):
            raise ValueError(f"category {cat!r} lists an item twice")
        if len(items) < min_items:
            raise ValueError(f"category {cat!r} has {len(items)} items, needs >= {min_items}")
        for w in items:
            if not w or not w.isascii() or not w.isalpha() or normalize_answer(w) != w:
                raise ValueError(f"item {w!r} in {cat!r} must be a lowercase ASCII word")
            if w in owner:
                raise ValueError(f"item {w!r} is in both {owner[w]!r} and {cat!r}")
            owner[w] = cat


@dataclass(frozen=True)
class Prompt:
    """One prompt with what the evaluator needs: its category, shown items (empty when open) and valid set."""

    text: str
    category: str
    items: tuple[str, ...]
    valid: tuple[str, ...]

    @property
    def open_ended(self) -> bool:
        return not self.items


@dataclass
class ListSelectionTask:
    """Train/eval splits over a vocabulary: per category, ``n_heldout`` items never appear in training lists.

    Evaluation lists hold ``eval_list_size`` items with ``heldout_per_eval_list`` of them held out, so their
    item combinations (and those items) are unseen in training.
    """

    vocab: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(VOCABULARY))
    n_heldout: int = 4
    train_list_sizes: tuple[int, int] = (4, 12)
    eval_list_size: int = 8
    heldout_per_eval_list: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        validate_vocabulary(self.vocab)
        lo, hi = self.train_list_sizes
        n_min = min(len(v) for v in self.vocab.values())
        if not 2 <= lo <= hi:
            raise ValueError(f"train_list_sizes must satisfy 2 <= lo <= hi, got {self.train_list_sizes}")
        if not 0 <= self.n_heldout <= n_min - hi:
            raise ValueError(f"n_heldout={self.n_heldout} leaves fewer than {hi} training items in some category")
        if not 0 <= self.heldout_per_eval_list <= min(self.n_heldout, self.eval_list_size):
            raise ValueError(
                f"heldout_per_eval_list={self.heldout_per_eval_list} must be in [0, min(n_heldout, eval_list_size)]"
            )
        if self.eval_list_size - self.heldout_per_eval_list > n_min - self.n_heldout:
            raise ValueError(f"eval_list_size={self.eval_list_size} exceeds the items available")
        rng = random.Random(self.seed)
        self.heldout = {c: tuple(sorted(rng.sample(items, self.n_heldout))) for c, items in self.vocab.items()}
        self.train_items = {c: tuple(w for w in items if w not in self.heldout[c]) for c, items in self.vocab.items()}

    @property
    def categories(self) -> list[str]:
        return list(self.vocab)

    def _pick(self, rng: random.Random, category: str | None) -> str:
        if category is None:
            return rng.choice(self.categories)
        if category not in self.vocab:
            raise ValueError(f"unknown category {category!r}; known: {self.categories}")
        return category

    def train_prompt(self, rng: random.Random, category: str | None = None) -> Prompt:
        """A training list prompt: 4-12 distinct training items of one category, in random order."""
        cat = self._pick(rng, category)
        n = rng.randint(*self.train_list_sizes)
        items = tuple(rng.sample(self.train_items[cat], n))
        return Prompt(list_prompt(cat, items), cat, items, items)

    def open_train_prompt(self, rng: random.Random, category: str | None = None) -> Prompt:
        """An open-ended prompt whose valid set is the category's training items (for SFT / RL mixing)."""
        cat = self._pick(rng, category)
        return Prompt(open_prompt(cat), cat, (), self.train_items[cat])

    def eval_lists(
        self, n_lists: int = 10, seed: int = 1234, exclude: Collection[frozenset[str]] = (), max_tries: int = 1000
    ) -> list[Prompt]:
        """``n_lists`` evaluation lists, categories taken in turn, each with ``heldout_per_eval_list`` held-out items.

        Lists whose item set is in ``exclude`` (e.g. every training list, see `parse_list_prompt`) are redrawn,
        so the evaluation combinations are unseen even when no item is held out.
        """
        if n_lists < 1:
            raise ValueError(f"n_lists must be >= 1, got {n_lists}")
        rng = random.Random(seed)
        exclude = set(exclude)
        out = []
        for i in range(n_lists):
            cat = self.categories[i % len(self.categories)]
            for _ in range(max_tries):
                held = rng.sample(self.heldout[cat], self.heldout_per_eval_list)
                seen = rng.sample(self.train_items[cat], self.eval_list_size - len(held))
                items = seen + held
                rng.shuffle(items)
                if frozenset(items) not in exclude and all(set(items) != set(p.items) for p in out):
                    break
            else:
                raise ValueError(f"no unseen {self.eval_list_size}-item list of {cat!r} in {max_tries} draws")
            items = tuple(items)
            out.append(Prompt(list_prompt(cat, items), cat, items, items))
        return out

    def open_eval_prompts(self, n_categories: int = 10) -> list[Prompt]:
        """Open-ended prompts for the first ``n_categories`` categories; valid = the full category vocabulary."""
        if not 1 <= n_categories <= len(self.categories):
            raise ValueError(f"n_categories must be in [1, {len(self.categories)}], got {n_categories}")
        return [Prompt(open_prompt(c), c, (), self.vocab[c]) for c in self.categories[:n_categories]]


BiasKind = Literal["first", "favourite", "uniform"]


def biased_choice(items: Sequence[str], rng: random.Random, bias: BiasKind, strength: float, rank: dict[str, int]):
    """The SFT teacher's pick: with probability ``strength`` the first / favourite (lowest rank) item, else uniform."""
    if not items:
        raise ValueError("cannot choose from an empty list")
    check_choice(bias, "bias", ("first", "favourite", "uniform"))
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"bias strength must be in [0, 1], got {strength}")
    if bias != "uniform" and rng.random() < strength:
        return items[0] if bias == "first" else min(items, key=lambda w: rank[w])
    return rng.choice(list(items))


def zipf_weights(n: int, exponent: float) -> list[float]:
    """Normalised weights proportional to 1 / rank**exponent, rank = 1..n."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    w = [1.0 / (r**exponent) for r in range(1, n + 1)]
    s = sum(w)
    return [x / s for x in w]


def sft_examples(
    task: ListSelectionTask,
    n: int,
    seed: int = 0,
    bias: BiasKind = "first",
    strength: float = 0.9,
    open_fraction: float = 0.3,
    open_zipf: float = 1.5,
) -> list[tuple[str, str]]:
    """(prompt, completion) pairs from a biased teacher, the mode collapse GAPO reports for instruct models.

    List prompts are answered by `biased_choice`; open-ended prompts by a Zipf(``open_zipf``) draw over the
    category's training items in vocabulary order (so "Name a fruit:" is mostly "apple").
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 <= open_fraction <= 1.0:
        raise ValueError(f"open_fraction must be in [0, 1], got {open_fraction}")
    rng = random.Random(seed)
    rank = {w: i for items in task.vocab.values() for i, w in enumerate(items)}
    out = []
    for _ in range(n):
        if rng.random() < open_fraction:
            p = task.open_train_prompt(rng)
            ans = rng.choices(p.valid, weights=zipf_weights(len(p.valid), open_zipf))[0]
        else:
            p = task.train_prompt(rng)
            ans = biased_choice(p.items, rng, bias, strength, rank)
        out.append((p.text, " " + ans))
    return out
