"""Measure what the SetPO embedder costs per training step on the driver's CPU (and on a GPU when one is visible).

    python -m reproduce.scale.bench_embed_placement [--out runs/scale_bench] [--tokens 256] [--batch 8]

Builds a randomly initialised model with Qwen3-Embedding-0.6B's shapes (28 layers, hidden 1024, the paper's
embedder; no download, the cost of a forward pass does not depend on the weights), times forward passes over
batches of random token ids, and turns the measured tokens/s into seconds per training step for every
full-scale setting (response tokens per step = batch x G x half the response cap, as in the GPU-hour
estimate). Results are recorded under OUT/embed_placement/ (config, versions, one JSON per step; resumable).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from tqdm import tqdm

from reproduce.common import RunDir
from reproduce.scale.settings import ESTIMATE, SETTINGS

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reproduce.scale.bench_embed_placement", description=__doc__)
    p.add_argument("--out", default="runs/scale_bench")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--overwrite", action="store_true")
    a = p.parse_args(argv)
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
