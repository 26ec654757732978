"""Tiny, fully offline causal LMs and a character tokenizer for tests and CPU experiments."""

from setpo.tiny.model import TinyModelConfig, build_tiny_model, init_tiny_model, load_tiny
from setpo.tiny.tokenizer import CHAT_TEMPLATE, DEFAULT_ALPHABET, build_char_tokenizer

__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_ALPHABET",
    "TinyModelConfig",
    "build_char_tokenizer",
    "build_tiny_model",
    "init_tiny_model",
    "load_tiny",
]
