"""The list-selection task: vocabulary, prompts, splits, answer extraction, validity and the SFT teacher."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from reproduce.tasks.lists import (
    ListSelectionTask,
    biased_choice,
    item_tokenizer,
    sft_examples,
    validate_vocabulary,
    zipf_weights,
)
from setpo import normalize_answer
from setpo.tasks.list_selection import VOCABULARY, extract_answer, is_valid, list_prompt, open_prompt, parse_list_prompt
from setpo.tiny import DEFAULT_ALPHABET


def test_vocabulary_is_large_short_ascii_and_disjoint():
    validate_vocabulary(VOCABULARY)
    assert len(VOCABULARY) >= 10
    words = [w for items in VOCABULARY.values() for w in items]
    assert len(words) == len(set(words))
    assert all(len(items) >= 20 for items in VOCABULARY.values())
    assert max(len(w) for w in words) <= 10
    assert set("".join(words)) <= set("abcdefghijklmnopqrstuvwxyz")


@pytest.mark.parametrize(
    "vocab, match",
    [
        ({}, "empty"),
        ({"fruit": ["a" * 3] * 20}, "twice"),
        ({"fruit": [f"w{'x' * i}" for i in range(5)]}, "needs >= 20"),
        ({"fruit": ["Apple"] + [f"f{'x' * i}" for i in range(19)]}, "lowercase ASCII"),
        ({"fruit": ["big apple"] + [f"f{'x' * i}" for i in range(19)]}, "lowercase ASCII"),
        ({"a": [f"a{'x' * i}" for i in range(20)], "b": [f"a{'x' * i}" for i in range(20)]}, "in both"),
        ({"Fruit": [f"f{'x' * i}" for i in range(20)]}, "category name"),
    ],
)
def test_validate_vocabulary_rejects(vocab, match):
    with pytest.raises(ValueError, match=match):
        validate_vocabulary(vocab)


def test_prompts_are_in_the_char_alphabet():
    assert list_prompt("fruit", ["apple", "fig"]) == "Pick a fruit from apple, fig:"
    assert list_prompt("animal", ["cat", "dog"]) == "Pick an animal from cat, dog:"
    assert open_prompt("fruit") == "Name a fruit:"
    assert open_prompt("instrument") == "Name an instrument:"
    task = ListSelectionTask()
    r = random.Random(0)
    texts = [task.train_prompt(r).text for _ in range(50)] + [p.text for p in task.eval_lists(10)]
    assert set("".join(texts)) <= set(DEFAULT_ALPHABET)


def test_train_lists_sizes_and_no_heldout_items():
    task = ListSelectionTask(seed=3)
    r = random.Random(0)
    sizes = Counter()
    for _ in range(2000):
        p = task.train_prompt(r)
        assert 4 <= len(p.items) <= 12
        assert len(set(p.items)) == len(p.items)
        assert p.valid == p.items and not p.open_ended
        assert not set(p.items) & set(task.heldout[p.category])
        assert set(p.items) <= set(VOCABULARY[p.category])
        sizes[len(p.items)] += 1
    assert set(sizes) == set(range(4, 13))


def test_eval_lists_are_unseen_eight_item_lists():
    task = ListSelectionTask()
    lists = task.eval_lists(10)
    assert len(lists) == 10
    assert len({p.category for p in lists}) == 10
    train_combos = set()
    r = random.Random(0)
    for _ in range(5000):
        train_combos.add(frozenset(task.train_prompt(r).items))
    for p in lists:
        assert len(p.items) == 8 and len(set(p.items)) == 8
        assert len(set(p.items) & set(task.heldout[p.category])) == 2
        assert frozenset(p.items) not in train_combos
        assert p.text == list_prompt(p.category, p.items)
    assert task.eval_lists(10) == lists  # deterministic
    assert task.eval_lists(10, seed=7) != lists


def test_eval_lists_exclude_training_combinations():
    task = ListSelectionTask(n_heldout=0, heldout_per_eval_list=0)
    first = task.eval_lists(4)
    banned = {frozenset(first[0].items), frozenset(first[2].items)}
    redrawn = task.eval_lists(4, exclude=banned)
    assert not {frozenset(p.items) for p in redrawn} & banned
    assert len({frozenset(p.items) for p in redrawn}) == 4
    tiny = {"a": tuple(f"a{'x' * i}" for i in range(20))}
    t = ListSelectionTask(tiny, n_heldout=0, heldout_per_eval_list=0, eval_list_size=20, train_list_sizes=(4, 12))
    with pytest.raises(ValueError, match="no unseen"):
        t.eval_lists(2)  # only one 20-item set exists


def test_parse_list_prompt_round_trip():
    task = ListSelectionTask()
    r = random.Random(5)
    for _ in range(50):
        p = task.train_prompt(r)
        assert parse_list_prompt(p.text) == (p.category, p.items)
    assert parse_list_prompt(list_prompt("animal", ["cat", "dog"])) == ("animal", ("cat", "dog"))
    assert parse_list_prompt(open_prompt("fruit")) is None
    assert parse_list_prompt("Pick a fruit from apple") is None


def test_heldout_split_is_a_partition():
    task = ListSelectionTask(n_heldout=4, seed=11)
    for c, items in VOCABULARY.items():
        assert len(task.heldout[c]) == 4
        assert set(task.heldout[c]) | set(task.train_items[c]) == set(items)
        assert not set(task.heldout[c]) & set(task.train_items[c])
    assert ListSelectionTask(seed=11).heldout == task.heldout
    assert ListSelectionTask(seed=12).heldout != task.heldout


def test_open_prompts_valid_set_is_the_whole_category():
    task = ListSelectionTask()
    prompts = task.open_eval_prompts(10)
    assert [p.category for p in prompts] == list(VOCABULARY)[:10]
    for p in prompts:
        assert p.open_ended and p.items == ()
        assert p.valid == VOCABULARY[p.category]
        assert not any(w in p.text for w in p.valid if len(w) > 3)  # the prompt shows no list
    p = task.open_train_prompt(random.Random(0), "fruit")
    assert p.valid == task.train_items["fruit"] and p.text == "Name a fruit:"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"train_list_sizes": (1, 4)}, "train_list_sizes"),
        ({"train_list_sizes": (6, 5)}, "train_list_sizes"),
        ({"n_heldout": 13}, "n_heldout"),
        ({"n_heldout": 2, "heldout_per_eval_list": 3}, "heldout_per_eval_list"),
        ({"eval_list_size": 30}, "eval_list_size"),
    ],
)
def test_task_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ListSelectionTask(**kwargs)


def test_task_bad_calls():
    task = ListSelectionTask()
    with pytest.raises(ValueError, match="unknown category"):
        task.train_prompt(random.Random(0), "planet")
    with pytest.raises(ValueError, match="n_lists"):
        task.eval_lists(0)
    with pytest.raises(ValueError, match="n_categories"):
        task.open_eval_prompts(len(VOCABULARY) + 1)


@pytest.mark.parametrize(
    "completion, expected",
    [
        (" pear", "pear"),
        (" Pear.\nsomething else", "pear"),
        ("\n\n  KIWI  \nfig", "kiwi"),
        ("", None),
        ("   \n ", None),
        (None, None),
        (" big  apple!", "big apple"),
    ],
)
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_is_valid_normalised_exact_match():
    items = ("apple", "fig")
    assert is_valid("Apple", items)
    assert is_valid(" fig. ", items)
    assert not is_valid("apples", items)
    assert not is_valid("pineapple", items)
    assert not is_valid(None, items)
    assert not is_valid("", items)
    assert is_valid(extract_answer(" FIG\n"), items)
    assert normalize_answer(extract_answer(" FIG\n")) == "fig"


def test_biased_choice_frequencies():
    rank = {w: i for i, w in enumerate("abcdef")}
    r = random.Random(0)
    items = ["c", "a", "e", "b"]
    n = 20000
    first = Counter(biased_choice(items, r, "first", 0.8, rank) for _ in range(n))
    assert first["c"] / n == pytest.approx(0.8 + 0.2 / 4, abs=0.01)
    fav = Counter(biased_choice(items, r, "favourite", 0.8, rank) for _ in range(n))
    assert fav["a"] / n == pytest.approx(0.8 + 0.2 / 4, abs=0.01)
    uni = Counter(biased_choice(items, r, "uniform", 0.8, rank) for _ in range(n))
    assert all(uni[w] / n == pytest.approx(0.25, abs=0.015) for w in items)
    with pytest.raises(ValueError, match="bias"):
        biased_choice(items, r, "last", 0.5, rank)
    with pytest.raises(ValueError, match="strength"):
        biased_choice(items, r, "first", 1.5, rank)
    with pytest.raises(ValueError, match="empty"):
        biased_choice([], r, "first", 0.5, rank)


def test_zipf_weights():
    w = zipf_weights(3, 1.0)
    assert w == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    with pytest.raises(ValueError):
        zipf_weights(0, 1.0)


def test_sft_examples_teacher_is_biased_and_valid():
    task = ListSelectionTask()
    ex = sft_examples(task, 3000, seed=0, bias="first", strength=0.9, open_fraction=0.25)
    assert ex == sft_examples(task, 3000, seed=0, bias="first", strength=0.9, open_fraction=0.25)
    n_open = n_first = n_list = 0
    for prompt, completion in ex:
        assert completion.startswith(" ") and completion == completion.rstrip()
        ans = extract_answer(completion)
        if prompt.startswith("Name "):
            n_open += 1
            cat = prompt[len("Name ") :].split(" ", 1)[1].rstrip(":")
            assert ans in task.train_items[cat]
        else:
            n_list += 1
            items = prompt.split(" from ", 1)[1].rstrip(":").split(", ")
            assert ans in items
            n_first += ans == items[0]
    assert n_open / len(ex) == pytest.approx(0.25, abs=0.03)
    assert n_first / n_list > 0.88
    with pytest.raises(ValueError, match="open_fraction"):
        sft_examples(task, 10, open_fraction=2.0)
    with pytest.raises(ValueError, match="n must be"):
        sft_examples(task, 0)


def test_item_tokenizer_one_token_per_item_and_exact_round_trip():
    tok = item_tokenizer()
    words = [w for items in VOCABULARY.values() for w in items]
    for w in words:
        assert tok(" " + w, add_special_tokens=False)["input_ids"][1:] == [tok.convert_tokens_to_ids(w)]
    task = ListSelectionTask()
    r = random.Random(0)
    texts = [task.train_prompt(r).text for _ in range(30)] + ["Name a fruit:", " peach\n", "peaches, pea", "cash"]
    for t in texts:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids, skip_special_tokens=True) == t
    # whole words only: "pea" inside "peaches" stays characters, "peach" is not read as "pea" + "ch"
    assert tok.convert_ids_to_tokens(tok("peaches pea", add_special_tokens=False)["input_ids"])[-1] == "pea"
    assert len(tok("peaches", add_special_tokens=False)["input_ids"]) == 7
    assert tok.convert_ids_to_tokens(tok(" peach", add_special_tokens=False)["input_ids"]) == [" ", "peach"]
    small = item_tokenizer({"fruit": VOCABULARY["fruit"]})
    assert len(small) == len(tok) - (len(words) - len(VOCABULARY["fruit"]))
