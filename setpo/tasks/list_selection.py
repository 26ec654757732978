"""GAPO's list-selection task (Anschel et al., arXiv 2511.12596, training prompts): "pick one item from this list".

Prompts over many categories of short ASCII words, so a character-level model can emit every answer:

* list prompts, ``"Pick a fruit from apple, fig, kiwi, pear:"``, valid answers = the listed items;
  training lists hold 4-12 items, evaluation lists 8 items of which some are held out of training;
* open-ended prompts, ``"Name a fruit:"``, valid answers = the whole category vocabulary, known to the
  evaluator only (the prompt shows no list).

The completion is the answer after one space (``" pear"``); `extract_answer` takes its first line. The splits,
the item tokenizer and the biased SFT teacher of the `gapo_lists` experiment live in `reproduce.tasks.lists`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from setpo.rewards.gapo import normalize_answer

# Built-in vocabulary: lowercase ASCII words, each in exactly one category, >= 20 per category.
VOCABULARY: dict[str, tuple[str, ...]] = {
    "fruit": (
        "apple", "pear", "plum", "peach", "mango", "kiwi", "grape", "lemon", "lime", "fig", "date", "melon",
        "cherry", "guava", "papaya", "banana", "apricot", "quince", "lychee", "durian", "pomelo", "coconut",
        "damson", "yuzu",
    ),
    "city": (
        "paris", "rome", "oslo", "lima", "cairo", "tokyo", "delhi", "dubai", "seoul", "milan", "kyiv", "baku",
        "doha", "quito", "accra", "dakar", "hanoi", "perth", "dublin", "berlin", "madrid", "vienna", "prague",
        "lisbon",
    ),
    "colour": (
        "red", "blue", "green", "yellow", "purple", "pink", "brown", "black", "white", "grey", "orange", "violet",
        "indigo", "teal", "cyan", "magenta", "beige", "maroon", "navy", "olive", "ivory", "crimson", "scarlet",
        "lilac",
    ),
    "animal": (
        "cat", "dog", "horse", "cow", "sheep", "goat", "pig", "lion", "tiger", "bear", "wolf", "fox", "deer",
        "zebra", "camel", "llama", "otter", "mouse", "rabbit", "monkey", "panda", "koala", "moose", "bison",
    ),
    "bird": (
        "robin", "crow", "eagle", "hawk", "owl", "swan", "duck", "goose", "heron", "stork", "crane", "finch",
        "wren", "raven", "parrot", "pigeon", "falcon", "gull", "puffin", "magpie", "sparrow", "egret", "ibis",
        "dove",
    ),
    "fish": (
        "cod", "tuna", "salmon", "trout", "carp", "pike", "perch", "bass", "eel", "sole", "hake", "haddock",
        "herring", "sardine", "anchovy", "halibut", "plaice", "tilapia", "catfish", "minnow", "marlin", "snapper",
        "mullet", "shad",
    ),
    "country": (
        "france", "spain", "italy", "japan", "china", "india", "peru", "chile", "brazil", "mexico", "canada",
        "egypt", "kenya", "ghana", "norway", "sweden", "poland", "greece", "nepal", "iran", "cuba", "fiji",
        "laos", "mali",
    ),
    "vegetable": (
        "carrot", "potato", "onion", "garlic", "leek", "pea", "bean", "corn", "kale", "celery", "radish", "turnip",
        "beet", "squash", "pumpkin", "cabbage", "lettuce", "spinach", "okra", "yam", "parsnip", "endive",
        "shallot", "chard",
    ),
    "sport": (
        "tennis", "golf", "rugby", "soccer", "hockey", "boxing", "judo", "karate", "cricket", "rowing", "skiing",
        "surfing", "cycling", "running", "diving", "fencing", "archery", "sailing", "polo", "netball", "handball",
        "baseball", "curling", "bowling",
    ),
    "instrument": (
        "piano", "violin", "cello", "flute", "guitar", "drum", "harp", "oboe", "tuba", "banjo", "lute", "sitar",
        "organ", "bugle", "fiddle", "viola", "trumpet", "bassoon", "cornet", "zither", "ukulele", "gong", "lyre",
        "kazoo",
    ),
    "metal": (
        "iron", "gold", "silver", "copper", "tin", "lead", "zinc", "nickel", "cobalt", "chrome", "platinum",
        "titanium", "tungsten", "lithium", "sodium", "cadmium", "bismuth", "gallium", "indium", "osmium",
        "iridium", "radium", "barium", "uranium",
    ),
    "tree": (
        "oak", "ash", "elm", "pine", "fir", "birch", "maple", "cedar", "willow", "beech", "yew", "larch",
        "spruce", "alder", "poplar", "hazel", "holly", "aspen", "cypress", "juniper", "sequoia", "rowan", "teak",
        "banyan",
    ),
    "drink": (
        "tea", "coffee", "milk", "juice", "water", "soda", "cocoa", "beer", "wine", "cider", "sake", "mead",
        "kefir", "lassi", "punch", "latte", "mocha", "espresso", "chai", "tonic", "smoothie", "sherry", "brandy",
        "gin",
    ),
    "tool": (
        "hammer", "saw", "drill", "wrench", "chisel", "pliers", "axe", "spade", "rake", "hoe", "file", "level",
        "clamp", "ladder", "shovel", "trowel", "mallet", "sander", "awl", "vice", "scissors", "knife", "crowbar",
        "pickaxe",
    ),
    "garment": (
        "shirt", "skirt", "dress", "coat", "jacket", "scarf", "glove", "sock", "shoe", "boot", "hat", "cap",
        "belt", "tie", "vest", "jeans", "shorts", "sweater", "hoodie", "blouse", "gown", "robe", "apron", "poncho",
    ),
    "vehicle": (
        "car", "bus", "train", "tram", "truck", "van", "bike", "boat", "ship", "yacht", "taxi", "jeep", "canoe",
        "kayak", "ferry", "subway", "scooter", "tractor", "wagon", "sled", "barge", "rocket", "glider", "limo",
    ),
    "gem": (
        "ruby", "pearl", "opal", "jade", "topaz", "garnet", "diamond", "emerald", "sapphire", "onyx", "quartz",
        "agate", "beryl", "jasper", "zircon", "peridot", "spinel", "amethyst", "lapis", "jet", "obsidian",
        "citrine", "moonstone", "amber",
    ),
    "herb": (
        "basil", "mint", "sage", "thyme", "dill", "parsley", "oregano", "cumin", "nutmeg", "clove", "ginger",
        "pepper", "paprika", "saffron", "vanilla", "cinnamon", "turmeric", "chili", "mustard", "anise", "fennel",
        "caraway", "chive", "rosemary",
    ),
}  # fmt: skip


def article(word: str) -> str:
    """ "an" before a vowel, else "a" (for "Name an animal:")."""
    return "an" if word[:1] in "aeiou" else "a"


def list_prompt(category: str, items: Sequence[str]) -> str:
    """The list-selection prompt: ``"Pick a fruit from apple, fig, kiwi:"``."""
    return f"Pick {article(category)} {category} from {', '.join(items)}:"


def open_prompt(category: str) -> str:
    """The open-ended prompt, no list shown: ``"Name a fruit:"``."""
    return f"Name {article(category)} {category}:"


_LIST_PROMPT = re.compile(r"^Pick an? ([a-z]+) from (.+):$")


def parse_list_prompt(text: str) -> tuple[str, tuple[str, ...]] | None:
    """(category, items) of a `list_prompt` text; None for any other text (e.g. an open-ended prompt)."""
    m = _LIST_PROMPT.match(text)
    return (m.group(1), tuple(m.group(2).split(", "))) if m else None


def extract_answer(completion: str | None) -> str | None:
    """The answer in a completion: its first non-empty line, normalised (`setpo.normalize_answer`); None if empty."""
    if completion is None:
        return None
    for line in str(completion).splitlines():
        ans = normalize_answer(line)
        if ans:
            return ans
    return None


def is_valid(answer: str | None, valid: Iterable[str]) -> bool:
    """True when the normalised answer exactly matches a normalised valid item."""
    a = normalize_answer(answer)
    return bool(a) and a in {normalize_answer(v) for v in valid}


def validity_reward(prompts, completions, valid_answers, **_) -> list[float]:
    """TRL reward: 1 when the completion's answer is one of the row's valid items (the listed items), else 0."""
    return [1.0 if is_valid(extract_answer(c), v) else 0.0 for c, v in zip(completions, valid_answers)]
