"""How large is the SetPO credit beside the advantage on a real LM? SmolLM2-135M-Instruct rollouts on GSM8K.

    python -m reproduce credit_scale --profile quick|full [--out DIR] [--overwrite] [--publish]

The paper's lambda (0.05-0.5) is a raw weight on s_i; what it does depends on |s_i| beside |A_bar_i|, and |s_i|
shrinks as G grows. This samples G completions per GSM8K test question from SmolLM2-135M-Instruct (the offline
copy, `setpo.models`), scores them with math-verify, and reports, per embedder and group size (the first G
samples of each question): mean |s|, mean |A_bar| over groups whose rewards differ (TRL's z-scored group
advantage), the shaping ratio mean|lambda s| / mean|A_bar| at the paper's lambdas, and the lambda that a target
ratio of 0.1 or 0.3 needs. The embedders see the completion's full text, as the paper's do.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from reproduce.common import (
    PAPER_FIGURES,
    Parser,
    RunDir,
    add_run_options,
    check_publish,
    count,
    default_out,
    publish,
)
from setpo.paper_runs import PAPER_LAMBDA

NAME = "credit_scale"
PAPER_LAMBDAS = tuple(sorted(set(PAPER_LAMBDA.values())))  # the paper's raw lambdas (0.05, 0.1, 0.2, 0.5)
TARGET_RATIOS = (0.1, 0.3)


@dataclass(frozen=True)
class CreditScaleProfile:
    """Sizes: questions, samples per question (the largest G), tokens per completion, group sizes reported."""

    questions: int = 16
    samples: int = 8
    max_new_tokens: int = 96
    group_sizes: tuple[int, ...] = (3, 6, 8)
    embedders: tuple[str, ...] = ("minilm", "hashed")
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if self.questions < 1 or self.max_new_tokens < 1:
            raise ValueError("questions and max_new_tokens must be >= 1")
        if any(G < 3 or G > self.samples for G in self.group_sizes):
            raise ValueError(f"group sizes must lie in 3..samples={self.samples}, got {self.group_sizes}")


PROFILES = {
    "smoke": CreditScaleProfile(questions=2, samples=3, max_new_tokens=8, group_sizes=(3,), embedders=("hashed",)),
    "quick": CreditScaleProfile(questions=8, samples=6, max_new_tokens=64, group_sizes=(3, 6)),
    "full": CreditScaleProfile(questions=64, samples=8, max_new_tokens=192),
}


REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tests" / "fixtures" / "benchmarks.tar.xz"  # the test splits shipped with the repository


def gsm8k_rows(limit: int) -> list[dict]:
    """The first ``limit`` GSM8K test rows: from $SETPO_BENCHMARK_DIR, else ../shared/data/benchmarks beside the
    repository, else the copy shipped in tests/fixtures (byte for byte the same file)."""
    env = os.environ.get("SETPO_BENCHMARK_DIR")
    folder = Path(env) if env else REPO.parent / "shared" / "data" / "benchmarks"
    path = folder / "gsm8k" / "test.jsonl"
    if path.is_file():
        text = path.read_text()
    elif env:
        raise FileNotFoundError(f"GSM8K copy not found at {path} (SETPO_BENCHMARK_DIR={env})")
    elif SHIPPED.is_file():
        import tarfile

        with tarfile.open(SHIPPED) as tar:
            text = tar.extractfile("gsm8k/test.jsonl").read().decode()
    else:
        raise FileNotFoundError(f"GSM8K copy not found at {path}; set SETPO_BENCHMARK_DIR to the benchmarks folder")
    return [json.loads(line) for line in text.splitlines()[:limit]]


def stage_samples(run: RunDir, prof: CreditScaleProfile) -> dict:
    """Completions and their correctness (math-verify against the GSM8K gold after ####)."""
    if run.done("samples"):
        return run.load("samples")
    from setpo.eval.generate import HFGenerator, SamplingConfig
    from setpo.models import load_pretrained
    from setpo.tasks.math.prompts import math_messages
    from setpo.tasks.math.verify import MathVerifier

    rows = gsm8k_rows(prof.questions)
    model, tok = load_pretrained("smollm2-135m-instruct")
    t0 = time.perf_counter()
    cfg = SamplingConfig(n=prof.samples, temperature=prof.temperature, top_p=1.0, max_new_tokens=prof.max_new_tokens,
                         batch_size=64, seed=prof.seed)  # fmt: skip
    completions = HFGenerator(model, tok, cfg)([math_messages(r["question"]) for r in rows])
    verify = MathVerifier()
    golds = [r["answer"].split("####")[-1].strip().replace(",", "") for r in rows]
    correct = [[bool(verify(c, g)) for c in row] for row, g in zip(completions, golds)]
    result = {"completions": completions, "correct": correct, "golds": golds, "wall_s": time.perf_counter() - t0}
    run.save("samples", result)
    return result


def credit_scale(completions: list[list[str]], correct: list[list[bool]], embedder, G: int) -> dict:
    """Mean |s|, mean |A_bar| (groups with differing rewards), and the ratios, for the first G samples per question."""
    from setpo.core import cosine_kernel, group_advantages, loo_credits

    texts = [c for row in completions for c in row[:G]]
    emb = torch.as_tensor(embedder(texts), dtype=torch.float64).reshape(len(completions), G, -1)
    s = loo_credits(cosine_kernel(emb))  # (B, G): eq. 5 per group
    rewards = torch.tensor([[float(x) for x in row[:G]] for row in correct], dtype=torch.float64)
    adv = group_advantages(rewards.reshape(-1), G).reshape(-1, G)
    varied = rewards.std(dim=1) > 0
    mean_s = float(s.abs().mean())
    mean_a = float(adv[varied].abs().mean()) if bool(varied.any()) else float("nan")
    out = {"G": G, "groups": len(completions), "groups_with_reward_variance": int(varied.sum()),
           "mean_abs_s": mean_s, "median_abs_s": float(s.abs().median()), "max_abs_s": float(s.abs().max()),
           "mean_abs_A": mean_a}  # fmt: skip
    # Groups without reward variance have A_bar = 0 (TRL), so the ratio is taken where A_bar is defined.
    mean_s_varied = float(s[varied].abs().mean()) if bool(varied.any()) else mean_s
    ref = mean_a if np.isfinite(mean_a) else 1.0  # a z-scored group's mean |A| is close to 1 when none varies
    out["reference_abs_A"] = ref
    for lam in PAPER_LAMBDAS:
        out[f"ratio_at_lambda_{lam:g}"] = lam * mean_s_varied / ref
    for r in TARGET_RATIOS:
        out[f"lambda_for_ratio_{r:g}"] = r * ref / mean_s_varied if mean_s_varied > 0 else float("inf")
    return out


def build_parser() -> Parser:
    """The command-line options."""
    p = Parser(prog=f"python -m reproduce {NAME}", description=__doc__.splitlines()[0])
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    p.add_argument("--threads", type=count, default=2, help="torch CPU threads")
    add_run_options(p, NAME)
    return p


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    args = build_parser().parse_args(argv)
    prof = PROFILES[args.profile]
    out = args.out or default_out(NAME, args.profile)
    config = {"profile": args.profile, **asdict(prof)}
    RunDir.check(out, config, args.overwrite, command=f"reproduce {NAME}")
    if args.publish:
        check_publish(PAPER_FIGURES / NAME, args.profile, _size(prof), args.force_publish)
    return lambda: _execute(args, prof, out, config)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _size(prof: CreditScaleProfile) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {"questions": prof.questions, "samples": prof.samples, "max_new_tokens": prof.max_new_tokens}


def _execute(args: argparse.Namespace, prof: CreditScaleProfile, out: Path, config: dict) -> int:
    run = RunDir(out, config, overwrite=args.overwrite, command=f"reproduce {NAME}")
    torch.set_num_threads(args.threads)
    from setpo.embedders import build_embedder

    samples = stage_samples(run, prof)
    rows = []
    for name in prof.embedders:
        embedder = build_embedder(name)
        for G in prof.group_sizes:
            rows.append({"embedder": name, **credit_scale(samples["completions"], samples["correct"], embedder, G)})
    accuracy = float(np.mean(samples["correct"]))
    lines = [
        "# SetPO credit beside the advantage: SmolLM2-135M-Instruct on GSM8K",
        "",
        f"Command: `python -m reproduce {NAME} --profile {args.profile}`. {prof.questions} GSM8K test questions x "
        f"{prof.samples} samples (T {prof.temperature:g}, {prof.max_new_tokens} new tokens), accuracy "
        f"{accuracy:.3f}; groups = the first G samples of each question; embedders see the full completion. "
        "|A_bar| is TRL's z-scored group advantage, averaged over groups whose rewards differ (where no group "
        "differs, 1.0 stands in).",
        "",
        "| embedder | G | groups varied | mean abs s | max abs s | mean abs A_bar | "
        + " | ".join(f"ratio at lambda {lam:g}" for lam in PAPER_LAMBDAS)
        + " | "
        + " | ".join(f"lambda for ratio {r:g}" for r in TARGET_RATIOS)
        + " |",
        "|---" * (6 + len(PAPER_LAMBDAS) + len(TARGET_RATIOS)) + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r['embedder']} | {r['G']} | {r['groups_with_reward_variance']}/{r['groups']} | "
            f"{r['mean_abs_s']:.4f} | {r['max_abs_s']:.4f} | {r['mean_abs_A']:.3f} | "
            + " | ".join(f"{r[f'ratio_at_lambda_{lam:g}']:.4f}" for lam in PAPER_LAMBDAS)
            + " | "
            + " | ".join(f"{r[f'lambda_for_ratio_{t:g}']:.2f}" for t in TARGET_RATIOS)
            + " |"
        )
    run.write_text("credit_scale.md", "\n".join(lines) + "\n")
    run.write_text("credit_scale.json", json.dumps(rows, indent=2) + "\n")
    run.close()
    print("\n".join(lines))
    if args.publish:
        files = [run.path / "credit_scale.md", run.path / "credit_scale.json"]
        print(f"published to {publish(files, PAPER_FIGURES / NAME, args.profile, _size(prof), args.force_publish)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
