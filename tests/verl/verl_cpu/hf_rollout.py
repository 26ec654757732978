"""The ``hf`` rollout backend: ``transformers.generate`` in one Ray actor per replica, weights synced from the trainer.

verl 0.9.1 ships only vLLM, SGLang and TRT-LLM rollouts, none of which runs on a plain CPU. Three pieces plug
into its registries: ``HFReplica`` (``RolloutReplicaRegistry``, launches the server actors in hybrid mode),
``HFServer`` (the actor the agent loop calls ``generate`` on, token ids in, token ids and log-probs out) and
``HFServerAdapter`` (the worker-side rollout whose ``update_weights`` receives the trainer's full tensors after
each update and loads them into the server's model). Requests are served one at a time: it is a smoke-test
backend for tiny models, not an inference engine.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

NAME = "hf"
SERVER_PREFIX = "setpo_hf_server"


def server_name(replica_rank: int) -> str:
    """The Ray actor name of a replica's server (the adapter on the trainer rank finds it by name)."""
    return f"{SERVER_PREFIX}_{replica_rank}"


def weights_fingerprint(state: dict[str, torch.Tensor]) -> float:
    """Sum of |w| over all tensors in float64: changes whenever an update changes any weight noticeably."""
    return float(sum(t.detach().double().abs().sum() for t in state.values()))


class HFServer:
    """A ``transformers`` causal LM serving verl's token-in-token-out ``generate`` (one request at a time)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(1)
        self.config = config
        self.replica_rank = replica_rank
        path = getattr(model_config, "local_path", None) or model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager")
        self.model.eval()
        self.global_steps: int | None = None
        self.dump_dir = os.environ.get("SETPO_VERL_DUMP_DIR")
        self._record_weights("load")

    def _record_weights(self, event: str) -> None:
        if not self.dump_dir:
            return
        os.makedirs(self.dump_dir, exist_ok=True)
        line = {
            "event": event,
            "global_steps": self.global_steps,
            "fingerprint": weights_fingerprint(self.model.state_dict()),
            "time": time.time(),
        }
        with open(os.path.join(self.dump_dir, f"rollout_weights_{self.replica_rank}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **_: Any
    ) -> TokenOutput:
        """Sample one response to `prompt_ids` (verl's sampling params; log-probs under logits / temperature)."""
        params = dict(sampling_params)
        max_len = self.config.max_model_len or (self.config.prompt_length + self.config.response_length)
        room = max_len - len(prompt_ids)
        if room < 1:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room within max_model_len={max_len}")
        max_new = params.get("max_tokens", params.get("max_new_tokens", self.config.response_length))
        max_new = max(1, min(int(max_new), self.config.response_length, room))
        temperature = float(params.get("temperature", 1.0))
        greedy = temperature <= 0
        top_k = int(params.get("top_k", -1) or -1)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=not greedy,
                temperature=None if greedy else temperature,
                top_p=None if greedy else float(params.get("top_p", 1.0)),
                top_k=top_k if top_k > 0 and not greedy else None,
                max_new_tokens=max_new,
                output_logits=True,
                return_dict_in_generate=True,
            )
        tokens = out.sequences[0, ids.shape[1] :]
        log_probs = None
        if params.get("logprobs"):
            logits = torch.stack(out.logits, dim=1)[0].float()
            scaled = logits if greedy else logits / temperature
            log_probs = torch.log_softmax(scaled, -1).gather(-1, tokens[:, None])[:, 0].tolist()
        return TokenOutput(
            token_ids=tokens.tolist(),
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        """Load the trainer's full tensors (names as in the HF checkpoint) into the served model."""
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if k != "lm_head.weight" or not self.model.config.tie_word_embeddings]
        if missing or unexpected:
            raise ValueError(f"weight sync mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
        if global_steps is not None:
            self.global_steps = global_steps
        self._record_weights("update")

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # lifecycle calls verl makes on every server; a transformers model holds no cache between requests
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False, **_: Any) -> dict[str, Any]:
        return {}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class HFReplica(RolloutReplica):
    """One ``HFServer`` actor per replica (tensor parallel size 1), colocated with its trainer rank's node."""

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                f"the hf rollout serves one process per replica: set tensor/data/pipeline parallel sizes to 1 "
                f"(world size {self.world_size})"
            )
        name = server_name(self.replica_rank)
        server = (
            ray.remote(HFServer)
            .options(name=name, num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


class HFServerAdapter(BaseRollout):
    """The trainer-side rollout of the ``hf`` backend: sends the trainer's weights to its replica's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ["RANK"])
        self.replica_rank = rank if replica_rank == -1 else replica_rank  # one process per replica
        self._server: Any = None

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights: Any, global_steps: int | None = None, **kwargs: Any) -> None:
        """Materialize every (name, full tensor) pair (all ranks must: FSDP gathers them) and load them."""
        wire_format = kwargs.get("wire_format", "named_tensors")
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout takes wire_format='named_tensors', got {wire_format!r}")
        state = {name: tensor.detach().to("cpu").clone() for name, tensor in weights}
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        await self._server.update_weights.remote(state, global_steps)


def register() -> None:
    """Add the ``hf`` backend to verl's rollout registries (replica and worker-side adapter)."""
    RolloutReplicaRegistry.register(NAME, lambda: HFReplica)
    rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFServerAdapter"
