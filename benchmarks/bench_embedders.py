"""Benchmark: embedding throughput vs the cost of the SetPO credits computed from those embeddings.

For N synthetic completions of about C characters, prints texts/second for the hashed n-gram embedder (cold:
fresh instance; warm: feature-hash memo filled), the offline MiniLM (cache off; and a second call served
from the text cache), and the mean-pooled hidden states of a tiny causal LM; then the time of
`cosine_kernel` + `loo_credits` on the same batch split into groups of G, and embedding time / credit time.
Figures only, no assertions.

    python benchmarks/bench_embedders.py [--n 512] [--chars 200] [--group 6] [--repeats 3] [--threads T] [--skip-minilm]
                                         [--json out.json [--overwrite]]
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

import torch

from setpo import cosine_kernel, loo_credits
from setpo._cli import Parser, run_interruptible
from setpo.embedders import HashedNgramEmbedder, PolicyHiddenStateEmbedder, offline_minilm
from setpo.files import OutError, check_out

WORDS = (
    "the answer is so we get then therefore sum of two three five seven nine twelve twenty numbers "
    "first second step compute multiply add subtract divide equation solve check result value total "
    "because since let x y z equal square root prime factor remainder digit count each both"
).split()


def synthetic_completions(n: int, chars: int, seed: int = 0) -> list[str]:
    """N reasoning-like strings of about `chars` characters; rollouts of one prompt share an opening."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        opening = random.Random(i // 6).choice(["Let x be", "First, compute", "We know that", "Step 1:"])
        words = [opening]
        while sum(len(w) + 1 for w in words) < chars:
            words.append(str(rng.randint(0, 99)) if rng.random() < 0.15 else rng.choice(WORDS))
        out.append(" ".join(words)[:chars])
    return out


def min_time(fn, repeats: int) -> float:
    """Fastest wall time of fn() over `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def credit_time(emb: torch.Tensor, G: int, dtype: torch.dtype, repeats: int) -> float:
    """Time of cosine_kernel + loo_credits over the complete groups of G rows."""
    B = emb.shape[0] // G
    grouped = emb[: B * G].to(dtype).reshape(B, G, -1)
    return min_time(lambda: loo_credits(cosine_kernel(grouped)), max(repeats, 20))


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring): sizes too large for the machine and Ctrl-C end in one line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return run_interruptible(_main, argv, "python benchmarks/bench_embedders.py", "nothing written")
    except (MemoryError, RuntimeError) as err:  # torch reports an allocation it cannot make as a RuntimeError
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        print(f"error: {first}; ask for smaller sizes (--n, --chars, --group)", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    ap = Parser(prog="python benchmarks/bench_embedders.py", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512, help="number of completions")
    ap.add_argument("--chars", type=int, default=200, help="characters per completion")
    ap.add_argument("--group", type=int, default=6, help="group size G for the credits")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = ap.parse_args(argv)
    if args.n < args.group or args.group < 3:
        ap.error("need --group >= 3 and --n >= --group")
    if args.chars < 1 or args.repeats < 1 or (args.threads is not None and args.threads < 1):
        ap.exit(2, f"{ap.prog}: error: --chars, --repeats and --threads must be >= 1 (else nothing is timed)\n")
    if args.json is not None:
        try:
            args.json = check_out(args.json, "bench_embedders", flag="--json", is_file=True, overwrite=args.overwrite)
        except OutError as err:
            ap.exit(2, f"{ap.prog}: error: {err}\n")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    texts = synthetic_completions(args.n, args.chars)
    n_groups = args.n // args.group
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; N={args.n} texts of {args.chars} chars; "
        f"credits on {n_groups} groups of G={args.group} ({n_groups * args.group} rows)"
    )

    embedders: dict[str, tuple] = {}
    embedders["hashed (cold)"] = (lambda: HashedNgramEmbedder()(texts), None)
    warm = HashedNgramEmbedder()
    embedders["hashed (warm)"] = (lambda: warm(texts), None)
    if not args.skip_minilm:
        t0 = time.perf_counter()
        minilm = offline_minilm(device="cpu", cache_size=0)
        print(f"MiniLM load: {time.perf_counter() - t0:.2f} s")
        cached = offline_minilm(device="cpu", cache_size=2 * args.n)
        cached.model = minilm.model  # share the weights; only the cache differs
        embedders["minilm"] = (lambda: minilm(texts), None)
        embedders["minilm (cache hits)"] = (lambda: cached(texts), None)
    from setpo.tiny import TinyModelConfig, build_char_tokenizer, init_tiny_model

    tok = build_char_tokenizer()
    tiny = init_tiny_model(TinyModelConfig(hidden_size=64, num_layers=2, num_heads=4), tok)
    policy = PolicyHiddenStateEmbedder(tiny, tok, batch_size=64)
    embedders["tiny policy hidden"] = (lambda: policy(texts), None)

    header = (
        f"{'embedder':<22} {'d':>5} {'embed':>10} {'texts/s':>10} {'credits f32':>12} {'credits f64':>12} {'ratio':>9}"
    )
    print(header)
    rows = []
    for name, (fn, _) in embedders.items():
        emb = fn()
        t_embed = min_time(fn, args.repeats)
        t32 = credit_time(emb, args.group, torch.float32, args.repeats)
        t64 = credit_time(emb, args.group, torch.float64, args.repeats)
        row = {
            "embedder": name,
            "dim": emb.shape[1],
            "embed_s": t_embed,
            "texts_per_s": args.n / t_embed,
            "credits_f32_ms": 1e3 * t32,
            "credits_f64_ms": 1e3 * t64,
            "embed_over_credits_f32": t_embed / t32,
        }
        rows.append(row)
        print(
            f"{name:<22} {row['dim']:>5} {t_embed * 1e3:>8.1f}ms {row['texts_per_s']:>10.0f} "
            f"{row['credits_f32_ms']:>10.3f}ms {row['credits_f64_ms']:>10.3f}ms {row['embed_over_credits_f32']:>8.0f}x"
        )
    print("ratio = embedding time / (cosine_kernel + loo_credits) time, float32 credits")
    if args.json:
        meta = {"n": args.n, "chars": args.chars, "group": args.group, "threads": torch.get_num_threads()}
        try:
            args.json.write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
        except OSError as err:
            print(f"error: cannot write --json {args.json}: {err.strerror or err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
