"""Benchmark: closed-form LOO credits (Lemma D.1, `loo_credits`) vs the literal Algorithm 1, and their share of a step.

Prints, for B groups and each G, the best-of-repeats time of `loo_credits` (validation included) and of
`loo_credits_reference` (Algorithm 1), the speed-up, credits per second, and, given the measured time of one
training step (``--step-ms``), the closed form's share of that step. Figures only; results are checked against
Algorithm 1 before timing.

    python benchmarks/bench_credits.py [--batch 512] [--groups 6 16 64] [--threads 1] [--device cuda]
        [--step-ms 2000] [--json out.json [--overwrite]]

On CUDA every timed call is followed by a device synchronisation. ``--json`` follows `setpo.files.check_out`: an
existing file is replaced only with ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from setpo import cosine_kernel, get_shaping, loo_credits, loo_credits_reference
from setpo._cli import Parser, run_interruptible
from setpo.files import OutError, check_out

MAX_G = 1024  # Algorithm 1 is O(G^3) per group: beyond this one timing takes minutes


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


def cpu_name() -> str:
    """The CPU's model name and the vector instructions torch's CPU kernels use."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}"


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (one line, via ``ap.error``) arguments that would time nothing or cannot be timed."""
    if args.batch < 1:
        ap.error(f"--batch must be >= 1 (groups per timing), got {args.batch}")
    if not args.groups:
        ap.error("--groups needs at least one group size")
    bad = [G for G in args.groups if not 3 <= G <= MAX_G]
    if bad:
        ap.error(f"--groups sizes must lie in [3, {MAX_G}] (the credit needs G >= 3), got {bad}")
    if args.dim < 1:
        ap.error(f"--dim must be >= 1, got {args.dim}")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads must be >= 1, got {args.threads}")
    if args.step_ms is not None and not args.step_ms > 0:
        ap.error(f"--step-ms must be > 0 (a measured training step), got {args.step_ms}")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    if args.json is not None:
        try:
            args.json = check_out(args.json, "bench_credits", flag="--json", is_file=True, overwrite=args.overwrite)
        except OutError as err:
            ap.exit(2, f"{ap.prog}: error: {err}\n")


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); Ctrl-C ends in one line with the command that reruns."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_interruptible(_main, argv, "python benchmarks/bench_credits.py", "nothing written")


def _main(argv: list[str]) -> int:
    ap = Parser(prog="python benchmarks/bench_credits.py", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--groups", type=int, nargs="*", default=[6, 16, 64])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--shaping", default="neglog1p")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--step-ms", type=float, default=None, help="a measured training step time, for the share")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = ap.parse_args(argv)
    check_args(ap, args)
    try:
        g = get_shaping(args.shaping)
    except ValueError as err:
        ap.error(f"--shaping: {err}")
    sync = torch.cuda.synchronize if args.device == "cuda" else None
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    where = (
        torch.cuda.get_device_name(0) if args.device == "cuda" else f"{cpu_name()}, {torch.get_num_threads()} threads"
    )
    print(f"torch {torch.__version__}, {where}, B={args.batch}, {args.dtype}, g={g.name}")
    print(f"{'G':>4} {'closed form':>12} {'Algorithm 1':>12} {'speed-up':>9} {'credits/s':>12} {'of a step':>10}")
    rows = []
    for G in args.groups:
        K = cosine_kernel(torch.randn(args.batch, G, args.dim, dtype=dtype).to(args.device))
        atol = 1e-5 if dtype == torch.float32 else 1e-12
        if not torch.allclose(loo_credits(K, g), loo_credits_reference(K, g), atol=atol):
            raise RuntimeError(f"closed form and Algorithm 1 disagree at G={G} beyond {atol}")
        t_closed = best_time(lambda K=K: loo_credits(K, g), sync=sync)
        t_ref = best_time(lambda K=K: loo_credits_reference(K, g), sync=sync)
        row = {
            "G": G,
            "B": args.batch,
            "closed_form_ms": 1e3 * t_closed,
            "algorithm1_ms": 1e3 * t_ref,
            "speedup": t_ref / t_closed,
            "credits_per_s": args.batch * G / t_closed,
            "share_of_step": None if args.step_ms is None else 1e3 * t_closed / args.step_ms,
        }
        rows.append(row)
        share = "-" if row["share_of_step"] is None else f"{100 * row['share_of_step']:.3g}%"
        print(
            f"{G:>4} {row['closed_form_ms']:>10.3f}ms {row['algorithm1_ms']:>10.3f}ms {row['speedup']:>8.1f}x "
            f"{row['credits_per_s']:>12.3g} {share:>10}"
        )
    if args.json is not None:
        meta = {"dtype": args.dtype, "device": args.device, "where": where, "step_ms": args.step_ms}
        try:
            args.json.write_text(json.dumps({**meta, "threads": torch.get_num_threads(), "rows": rows}, indent=2))
        except OSError as err:
            print(f"{ap.prog}: error: cannot write --json {args.json}: {err.strerror or err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
