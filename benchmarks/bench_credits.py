"""Benchmark: closed-form LOO credits (Lemma D.1) vs the literal Algorithm 1, and vs one log1p pass.

Prints, for B groups and each G, measured side by side in one run: the best-of-repeats time of `loo_credits`
(validation included: one min/max pass and one symmetry pass over the kernel), `loo_credits_reference`, and of one
`torch.log1p` pass over a (B, G, G) tensor (the yardstick: one transcendental per kernel entry, fresh output);
also one transposed copy of the kernel (what any exact symmetry check K = K^T has to read), their ratios, and
credits per second. With ``--inductor`` also the same closed form with its validation reductions written as one
function and compiled by ``torch.compile`` (inductor; the question is whether a compiler's fusion beats the eager
path; compile time not counted, results checked against Algorithm 1). Figures only.

    python benchmarks/bench_credits.py [--batch 512] [--groups 6 16 64] [--threads 1] [--device cuda] [--inductor]
        [--json out.json]

On CUDA every timed call is followed by a device synchronisation.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from setpo import cosine_kernel, get_shaping, loo_credits, loo_credits_reference
from setpo.core._checks import kernel_violation


def best_time(fn, min_total: float = 0.5, min_reps: int = 5, sync=None) -> float:
    """Fastest wall time of fn() over repeats after two warm-up calls (the least disturbed by other load); ``sync``
    (e.g. ``torch.cuda.synchronize``) is called after each call so queued device work is counted."""
    sync = sync or (lambda: None)
    fn()
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_total:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return min(times)


def fused_neglog1p(K: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Lemma D.1 with g = -log(1+x), s_i = log prod_{j!=i}(1 + m_j^(-i))/(G-1) - mean_j log(1 + m_j), plus the
    validation reductions (min, max, max(K - K^T)) in one function for a compiler to fuse."""
    G = K.shape[-1]
    eye = torch.eye(G, dtype=torch.bool, device=K.device)
    Kz = K.masked_fill(eye, 0.0)
    r = Kz.sum(-1)  # (G-1) m_j
    Y = (1.0 + (r.unsqueeze(-1) - Kz) / (G - 2)).masked_fill(eye, 1.0)  # Y[b, j, i] = 1 + m_j^(-i)
    s = Y.prod(-2).log() / (G - 1) - torch.log1p(r / (G - 1)).mean(-1, keepdim=True)
    return s, K.amin(), K.amax(), (K - K.mT).amax()


def cpu_name() -> str:
    """The CPU's model name and the vector instructions torch's CPU kernels use (the yardstick depends on both)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--groups", type=int, nargs="+", default=[6, 16, 64])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--shaping", default="neglog1p")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--inductor", action="store_true", help="also time the closed form compiled by torch.compile")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    sync = torch.cuda.synchronize if args.device == "cuda" else None
    if args.threads:
        torch.set_num_threads(args.threads)

    dtype = getattr(torch, args.dtype)
    g = get_shaping(args.shaping)
    if args.inductor and (g.name != "neglog1p" or min(args.groups) < 3):
        ap.error("--inductor compiles the closed form of g = -log(1 + x) (--shaping neglog1p) for groups G >= 3")
    torch.manual_seed(0)
    where = (
        torch.cuda.get_device_name(0) if args.device == "cuda" else f"{cpu_name()}, {torch.get_num_threads()} threads"
    )
    print(f"torch {torch.__version__}, {where}, B={args.batch}, {args.dtype}, g={g.name}")
    header = (
        f"{'G':>4} {'closed form':>12} {'Algorithm 1':>12} {'speed-up':>9} "
        f"{'log1p(BGG)':>11} {'vs log1p':>9} {'K^T copy':>9} {'credits/s':>12}"
    )
    if args.inductor:
        header += f" {'inductor':>9} {'vs log1p':>9}"
    print(header)
    rows = []
    for G in args.groups:
        K = cosine_kernel(torch.randn(args.batch, G, args.dim, dtype=dtype).to(args.device))
        assert torch.allclose(
            loo_credits(K, g), loo_credits_reference(K, g), atol=1e-5 if dtype == torch.float32 else 1e-12
        )
        t_fast = best_time(lambda K=K: loo_credits(K, g), sync=sync)
        t_ref = best_time(lambda K=K: loo_credits_reference(K, g), sync=sync)
        t_floor = best_time(lambda K=K: torch.log1p(K), sync=sync)
        t_transpose = best_time(lambda K=K: K.mT.contiguous(), sync=sync)
        if args.inductor:
            torch._dynamo.reset()  # a fresh compile per G: no silent eager fallback past dynamo's recompile limit
            compiled = torch.compile(fused_neglog1p, dynamic=False)

            def checked(K=K, compiled=compiled):
                """The compiled credits with the same validation as the eager path: the reductions read back to the
                host (one read instead of three) and checked."""
                s, lo, hi, asym = compiled(K)
                kernel_violation(*torch.stack((lo, hi, asym)).tolist(), K.dtype, K)
                return s

            assert torch.allclose(
                checked(), loo_credits_reference(K, g), atol=1e-5 if dtype == torch.float32 else 1e-12
            )
            t_inductor = best_time(checked, sync=sync)
        row = {
            "G": G,
            "B": args.batch,
            "closed_form_ms": 1e3 * t_fast,
            "algorithm1_ms": 1e3 * t_ref,
            "speedup": t_ref / t_fast,
            "log1p_ms": 1e3 * t_floor,
            "ratio_to_log1p": t_fast / t_floor,
            "transpose_over_log1p": t_transpose / t_floor,
            "credits_per_s": args.batch * G / t_fast,
        }
        if args.inductor:
            row |= {"inductor_ms": 1e3 * t_inductor, "inductor_over_log1p": t_inductor / t_floor}
        rows.append(row)
        print(
            f"{G:>4} {row['closed_form_ms']:>10.3f}ms {row['algorithm1_ms']:>10.3f}ms {row['speedup']:>8.1f}x "
            f"{row['log1p_ms']:>9.3f}ms {row['ratio_to_log1p']:>8.2f}x {row['transpose_over_log1p']:>8.2f}x "
            f"{row['credits_per_s']:>12.3g}"
            + (f" {row['inductor_ms']:>7.3f}ms {row['inductor_over_log1p']:>8.2f}x" if args.inductor else "")
        )
    targets = [(r["G"], r["ratio_to_log1p"], 4.0 if r["G"] < 16 else 2.0) for r in rows]
    print(
        "closed form / one log1p pass (target <= 4x at G < 16, <= 2x at G >= 16): "
        + ", ".join(f"G={G}: {ratio:.2f}x ({'met' if ratio <= limit else 'over'})" for G, ratio, limit in targets)
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "dtype": args.dtype,
                    "device": args.device,
                    "where": where,
                    "threads": torch.get_num_threads(),
                    "rows": rows,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
