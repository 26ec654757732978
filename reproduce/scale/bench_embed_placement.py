"""Measure what the SetPO embedder costs per training step on the driver's CPU (and on a GPU when one is visible).

    python -m reproduce.scale.bench_embed_placement [--out runs/scale_bench] [--tokens 256] [--batch 8]
    python -m reproduce.scale.bench_embed_placement --memory [--json FILE]   # GPU memory of one Table 7 batch

Builds a randomly initialised model with Qwen3-Embedding-0.6B's shapes (28 layers, hidden 1024, the paper's
embedder; no download, the cost of a forward pass does not depend on the weights), times forward passes over
batches of random token ids, and turns the measured tokens/s into seconds per training step for every
full-scale setting (response tokens per step = batch x G x half the response cap, as in the GPU-hour
estimate). Results are recorded under OUT/embed_placement/ (config, versions, one JSON per step; resumable).

``--memory`` (CUDA only) embeds one batch of the largest setting instead: Table 7's embedding batch
(``settings.EMBED_BATCH``) of responses at its full 4,096-token cap, in bf16 and in fp32, and records the peak
allocated and the reserved GPU memory (before and after ``torch.cuda.empty_cache``), the numbers that decide
whether the embedder fits beside vLLM and the FSDP worker on GPU 0 (docs/scale.md, section 6).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from tqdm import tqdm

from reproduce.common import RunDir
from reproduce.scale.settings import EMBED_BATCH, ESTIMATE, SETTINGS

QWEN3_EMBEDDING_06B = dict(
    vocab_size=151_669,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=32_768,
)


def build_model(device: str, dtype: torch.dtype):
    from transformers import AutoModel, Qwen3Config

    torch.manual_seed(0)
    model = AutoModel.from_config(Qwen3Config(**QWEN3_EMBEDDING_06B), dtype=dtype)
    return model.to(device).eval()


def tokens_per_second(model, batch: int, tokens: int, repeats: int, device: str) -> float:
    """Forward-pass throughput on (batch, tokens) random ids, after one warm-up pass."""
    ids = torch.randint(0, QWEN3_EMBEDDING_06B["vocab_size"], (batch, tokens), device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in tqdm(range(repeats), desc=f"forward on {device}", leave=False):
            model(input_ids=ids, attention_mask=mask)
        if device == "cuda":
            torch.cuda.synchronize()
    return repeats * batch * tokens / (time.perf_counter() - start)


def table7_batch() -> tuple[int, int]:
    """(responses, tokens) of one embedding batch of Table 7's SetPO run: its embedder batch at the response cap."""
    s = SETTINGS["table7_setpo_grpo_qwen32b"]
    return EMBED_BATCH[s.train], s.max_response


def embed_memory(batch: int, tokens: int, dtype: torch.dtype) -> dict[str, float]:
    """GiB on cuda:0 of one forward pass over (batch, tokens): weights, peak allocated, reserved before and after
    ``empty_cache``."""
    if not torch.cuda.is_available():
        raise RuntimeError("--memory measures GPU memory and needs a CUDA device; none is visible")
    gib = 2**30
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    model = build_model("cuda", dtype)
    weights = torch.cuda.memory_allocated() - base
    ids = torch.randint(0, QWEN3_EMBEDDING_06B["vocab_size"], (batch, tokens), device="cuda")
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    torch.cuda.synchronize()
    out = {
        "batch": batch,
        "tokens": tokens,
        "dtype": str(dtype).removeprefix("torch."),
        "weights_gib": weights / gib,
        "peak_allocated_gib": (torch.cuda.max_memory_allocated() - base) / gib,
        "reserved_gib": torch.cuda.memory_reserved() / gib,
    }
    del model, ids
    torch.cuda.empty_cache()
    out["reserved_after_empty_cache_gib"] = torch.cuda.memory_reserved() / gib
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reproduce.scale.bench_embed_placement", description=__doc__)
    p.add_argument("--out", default="runs/scale_bench")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--memory", action="store_true", help="GPU memory of one Table 7 embedding batch (CUDA only)")
    p.add_argument("--json", type=Path, help="with --memory: write the measurements there")
    a = p.parse_args(argv)
    if a.json is not None and not a.memory:
        p.error("--json goes with --memory")
    if a.memory:
        batch, tokens = table7_batch()
        try:
            rows = [embed_memory(batch, tokens, dtype) for dtype in (torch.bfloat16, torch.float32)]
        except RuntimeError as e:
            p.exit(2, f"error: {e}\n")
        for r in rows:
            print(json.dumps(r))
        if a.json is not None:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "runs": rows}, indent=2) + "\n")
        return 0
    config = {"batch": a.batch, "tokens": a.tokens, "repeats": a.repeats, "threads": torch.get_num_threads()}
    run = RunDir(Path(a.out) / "embed_placement", config, overwrite=a.overwrite)
    if run.done("throughput"):
        measured = run.load("throughput")
    else:
        measured = {
            "cpu_fp32": tokens_per_second(build_model("cpu", torch.float32), a.batch, a.tokens, a.repeats, "cpu")
        }
        if torch.cuda.is_available():
            gpu = build_model("cuda", torch.bfloat16)
            measured["cuda_bf16"] = tokens_per_second(gpu, 4 * a.batch, 4 * a.tokens, a.repeats, "cuda")
        run.save("throughput", measured)
    print(f"measured tokens/s ({torch.get_num_threads()} CPU threads): {measured}")
    print(f"{'setting':45s} {'resp tokens/step':>16s} {'CPU s/step':>11s} {'GPU s/step':>11s}")
    rows = {}
    for s in SETTINGS.values():
        if s.lam is None:
            continue
        resp = s.batch * s.n * math.ceil(ESTIMATE["response_fraction"] * s.max_response)
        cpu_s = resp / measured["cpu_fp32"]
        gpu_s = resp / measured["cuda_bf16"] if "cuda_bf16" in measured else float("nan")
        rows[s.name] = {"response_tokens_per_step": resp, "cpu_s_per_step": cpu_s, "gpu_s_per_step": gpu_s}
        print(f"{s.name:45s} {resp:16,d} {cpu_s:11.1f} {gpu_s:11.2f}")
    run.save("per_setting", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
