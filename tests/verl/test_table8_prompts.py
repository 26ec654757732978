"""Table 8's prompts reach the model as TinyZero fed them: the raw "base" prompt, no chat template.

TinyZero tokenizes the prompt text itself, ``tokenizer(prompt, add_special_tokens=False)``
(Jiayi-Pan/TinyZero @ 95df88f, ``verl/utils/dataset/rl_dataset.py`` and ``verl/utils/torch_functional.py``).
verl 0.9.1 renders every prompt through the tokenizer's chat template
(``verl/utils/tokenizer/continuous_token.py``). The check runs verl's own path on a Qwen2.5-style tokenizer built
here, offline: byte-level BPE, ``<|endoftext|>``/``<|im_start|>``/``<|im_end|>``, a one-token newline (verl's Qwen
builder requires it) and Qwen2.5's ChatML template (its branch without tools, default system message).
"""

from __future__ import annotations

import json

import pytest

from reproduce.scale.settings import SETTINGS, overrides
from setpo.integrations.verl.runner import compose_config
from setpo.tasks.countdown import countdown_prompt

QWEN25_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.fixture(scope="module")
def qwen_style_model(tmp_path_factory) -> str:
    """A folder with a Qwen2 config and a Qwen2.5-style byte-level BPE tokenizer (trained here on prompts)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    folder = tmp_path_factory.mktemp("qwen_style")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    corpus = [countdown_prompt([a, b, c], a + b * c) for a in range(1, 9) for b in range(1, 9) for c in (3, 7)]
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", additional_special_tokens=SPECIAL[1:]
    )
    fast.chat_template = QWEN25_CHAT_TEMPLATE
    fast.save_pretrained(folder)
    Qwen2Config(
        vocab_size=len(fast), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, eos_token_id=fast.eos_token_id, architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(folder)  # fmt: skip
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen2"
    return str(folder)


def _verl_prompt_ids(setting: str, model_dir: str, messages: list[dict]) -> tuple[list[int], object]:
    """The prompt ids verl 0.9.1's agent loop builds for `messages` under a rendered launch's model config."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    args = [
        o
        for o in overrides(SETTINGS[setting], "/data", 1, "/runs/x")
        if not o.startswith("actor_rollout_ref.model.path=")
    ]
    cfg = compose_config([*args, f"actor_rollout_ref.model.path={model_dir}"])
    model = omega_conf_to_dataclass(cfg.actor_rollout_ref.model)
    builder = create_continuous_token_builder(model.tokenizer, hf_model_type="qwen2")
    return builder.build_initial_tokens(messages), model.tokenizer


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.startswith("table8_")])
def test_table8_prompts_reach_the_model_unwrapped(setting, qwen_style_model):
    prompt = countdown_prompt([44, 19, 35], 98)  # the row setpo.data.prepare writes: one user message
    ids, tok = _verl_prompt_ids(setting, qwen_style_model, [{"role": "user", "content": prompt}])
    tinyzero = tok(prompt, add_special_tokens=False)["input_ids"]
    assert ids == tinyzero
    assert tok.decode(ids) == prompt and prompt.endswith("Assistant: Let me solve this step by step.\n<think>")


def test_without_the_raw_template_verl_wraps_the_prompt(qwen_style_model):
    """The control: a launch without the override (Table 4's) gets the ChatML wrapping, so the check above can fail."""
    prompt = countdown_prompt([44, 19, 35], 98)
    ids, tok = _verl_prompt_ids("table4_setpo_grpo_math1.5b", qwen_style_model, [{"role": "user", "content": prompt}])
    text = tok.decode(ids)
    assert ids != tok(prompt, add_special_tokens=False)["input_ids"]
    assert text.startswith("<|im_start|>system\nYou are Qwen") and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids
