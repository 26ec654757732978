"""The "policy" embedder reuses the hidden states of TRL's old / reference log-prob pass: the reused embeddings and
their credits equal those of the policy's own extra forward (same pooling), float64, on a tiny model."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from trl_tiny import RUN as TINY_RUN
from trl_tiny import G, distinct_chars, tiny_model

from setpo.integrations.trl import SetPOConfig, SetPOTrainer
from setpo.integrations.trl.embedding import HiddenStateCapture
from setpo.methods import GroupBatch
from setpo.methods.advantage import setpo_credits
from setpo.tiny import load_tiny

RUN = {**TINY_RUN, "max_steps": 1, "setpo_lambda": 0.5, "setpo_embedder": "policy"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory, num_layers=2)


class Recording(SetPOTrainer):
    """Per batch: the embeddings the trainer used, those of an extra forward at the same moment, the kernel rows,
    and how often the production path ran its own forward."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[dict] = []
        self.extra_forwards = 0
        self._checking = False

    def _policy_forward(self, output, completion_ids_list):
        self.extra_forwards += not self._checking
        return super()._policy_forward(output, completion_ids_list)

    def _embed_local(self, output, rows, capture):
        used, seconds = super()._embed_local(output, rows, capture)
        source = self.setpo_last_embed_source
        self._checking = True
        try:
            extra = self._policy_forward(output, rows[2])
        finally:
            self._checking = False
        self.setpo_last_embed_source = source
        self.batches.append({"used": used.clone(), "extra": extra, "source": source})
        return used, seconds

    def _group_batch(self, output, rows, capture, G):
        batch, seconds = super()._group_batch(output, rows, capture, G)
        self.batches[-1]["kernel_rows"] = batch.mask.reshape(-1).cpu()
        return batch, seconds


def train(model_dir, tmp_path, peft_config=None, sources=None, **overrides) -> Recording:
    model, tok = load_tiny(model_dir, dtype=torch.float64)
    args = SetPOConfig(output_dir=str(tmp_path), **{**RUN, **overrides})
    trainer = Recording(
        model=model,
        reward_funcs=[distinct_chars],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["ab", "cd", "ef", "gh", "ij", "kl"]}),
        processing_class=tok,
        peft_config=peft_config,
    )
    if sources is not None:
        trainer.setpo_policy_hidden_sources = sources
    trainer.train()
    return trainer


def credits(emb: torch.Tensor, kernel_rows: torch.Tensor) -> torch.Tensor:
    batch = GroupBatch.from_rows(torch.zeros(emb.shape[0]), G, embeddings=emb.double(), mask=kernel_rows)
    return setpo_credits(batch)[0].reshape(-1)


CASES = {
    # num_iterations=2: TRL computes the old log-probs (the current policy); 3 steps = a second batch after 2 updates
    "old": ("old", dict(num_iterations=2, max_steps=3)),
    "ref": ("ref", dict(beta=0.1)),
    "ref, first 3 tokens": ("ref", dict(beta=0.1, setpo_embed_max_length=3)),
    "old preferred over ref": ("old", dict(num_iterations=2, beta=0.1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reused_hidden_states_equal_the_extra_forward(tmp_path, model_dir, case):
    source, overrides = CASES[case]
    trainer = train(model_dir, tmp_path, sources=("old", "ref"), **overrides)
    assert trainer.batches and trainer.extra_forwards == 0, "the policy ran a forward of its own"
    # The pass's model: the float64 policy, or TRL's reference copy (float32 in TRL < 1.16, which builds it with the
    # default dtype); pooling keeps float64 and turns anything else into float32.
    ran = trainer.ref_model if source == "ref" and trainer.ref_model is not None else trainer.model
    dtype = next(ran.parameters()).dtype
    atol = 1e-10 if dtype == torch.float64 else 1e-5
    for b in trainer.batches:
        assert b["source"] == source
        assert b["used"].dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
        keep = b["kernel_rows"]
        torch.testing.assert_close(b["used"][keep].double(), b["extra"][keep], rtol=0, atol=atol)
        s_used, s_extra = credits(b["used"], keep), credits(b["extra"], keep)
        assert float(s_extra.abs().max()) > 1e-4, "credits are all ~0: the comparison would not test anything"
        torch.testing.assert_close(s_used, s_extra, rtol=0, atol=atol)
    logs = [h for h in trainer.state.log_history if "setpo/policy_forward_reused" in h]
    assert logs and all(h["setpo/policy_forward_reused"] == 1.0 for h in logs)


def test_reference_pass_of_a_lora_policy_is_reused(tmp_path, model_dir):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = train(model_dir, tmp_path, peft_config=lora, sources=("old", "ref"), beta=0.1)
    (b,) = trainer.batches
    assert b["source"] == "ref" and trainer.extra_forwards == 0
    # At the first step the adapter is the identity (LoRA B = 0): the base model's states are the policy's.
    torch.testing.assert_close(b["used"], b["extra"], rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    ("sources", "overrides"),
    [(("old", "ref"), {}), (None, dict(beta=0.1)), ((), dict(num_iterations=2))],
    ids=["no old or ref pass runs", "default: the current policy, never the reference", "reuse off"],
)
def test_extra_forward_where_no_allowed_pass_runs(tmp_path, model_dir, sources, overrides):
    trainer = train(model_dir, tmp_path, sources=sources, **overrides)
    assert trainer.extra_forwards == len(trainer.batches) >= 1
    assert all(b["source"] == "extra" for b in trainer.batches)
    logs = [h for h in trainer.state.log_history if "setpo/policy_forward_reused" in h]
    assert logs and all(h["setpo/policy_forward_reused"] == 0.0 for h in logs)


def test_unknown_hidden_source_is_refused(tmp_path, model_dir):
    with pytest.raises(
        ValueError, match=r"unknown setpo_policy_hidden_sources entry\(s\) \['new'\]; known: \['old', 'ref'\]"
    ):
        train(model_dir, tmp_path, sources=("new",))


def test_capture_gives_none_when_the_decoder_output_is_unusable():
    class NoDecoder(torch.nn.Module):
        def forward(self, x):
            return x

    capture = HiddenStateCapture()
    with capture.recording(NoDecoder(), torch.ones(2, 5), 3):
        pass
    assert capture.pooled == [None]
