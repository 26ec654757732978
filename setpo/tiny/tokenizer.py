"""A character-level tokenizer: one token per character, so any text in its alphabet round-trips exactly."""

from __future__ import annotations

import string
from collections.abc import Sequence

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from setpo._validate import check_choice, check_str, check_strings

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)

#: Printable ASCII (letters, digits, punctuation, space) plus newline and tab.
DEFAULT_ALPHABET = "".join(dict.fromkeys(string.printable.replace("\r", "").replace("\x0b", "").replace("\x0c", "")))

#: A plain chat template ("role: content" lines) so conversational prompts work with the tiny models.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_char_tokenizer(
    alphabet: str | None = None,
    extra_tokens: Sequence[str] = (),
    chat_template: str | None = CHAT_TEMPLATE,
    padding_side: str = "left",
) -> PreTrainedTokenizerFast:
    """Character-level fast tokenizer: ids 0-3 are <pad>, <s>, </s>, <unk>, then `extra_tokens` (multi-character
    tokens such as "<think>", each one id), then one id per character of `alphabet`.

    Nothing is added around encoded text (no BOS/EOS), and decoding joins characters with nothing in
    between, so ``decode(encode(text)) == text`` for every text over the alphabet (spaces and newlines
    included). Characters outside the alphabet become <unk>. Padding is on the left by default, as batched
    generation with a decoder-only model needs.
    """
    alphabet = DEFAULT_ALPHABET if alphabet is None else alphabet
    check_str(alphabet, "alphabet", blank=True)
    check_choice(padding_side, "padding_side", ("left", "right"))
    extra = check_strings(extra_tokens, "extra_tokens")
    if any(len(token) < 2 for token in extra):
        raise ValueError(f"extra tokens must have 2+ characters (single ones go in the alphabet): {extra}")
    clash = set(extra) & set(SPECIAL_TOKENS)
    if clash or len(set(extra)) != len(extra):
        raise ValueError(f"extra_tokens repeat each other or the built-in special tokens {SPECIAL_TOKENS}: {extra}")

    chars = list(dict.fromkeys(alphabet))  # de-duplicate, keep order
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *extra, *chars])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    tok.decoder = decoders.Fuse()  # join tokens with no separator
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    tok.add_tokens(extra)  # matched whole, but ordinary text: decode(skip_special_tokens=True) keeps them

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 30,
        padding_side=padding_side,
        model_input_names=["input_ids", "attention_mask"],  # transformers 4.x would add token_type_ids
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast
