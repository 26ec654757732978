"""Shipped start models: the Countdown SFT start that the Countdown experiments load by default.

    python -m reproduce.starts countdown [--out DIR] [--threads N]

trains the start with the published recipe (`countdown_evidence`'s full profile: data, tiny model, 1000 SFT steps
on biased solutions), evaluates it on the full profile's 128 test problems (64 samples at both decodings) and writes
the model, its tokenizer and ``start.json`` (checksum, command, recipe, start metrics and their evaluation standard
deviations) to DIR (default: a new folder under runs/starts/). A start trained on another CPU differs
(`paper_figures/countdown_replication/NOTES.md`): the shipped one is what makes the Countdown results reproducible.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

COUNTDOWN = Path(__file__).resolve().parent / "countdown_sft"
RECORD = "start.json"
COMMAND = "python -m reproduce.starts countdown --threads 1"
#: the profile of `reproduce.countdown_evidence` whose data and SFT recipe the shipped start follows
RECIPE_PROFILE = "full"
#: the profile fields that must match the shipped start for an experiment to use it
ARCHITECTURE = ("n_train", "data_seed", "hidden_size", "num_layers", "num_heads")


class StartError(RuntimeError):
    """The shipped start is missing, damaged, or does not fit a profile."""


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def record(folder: Path = COUNTDOWN) -> dict:
    """The shipped start's record (start.json)."""
    path = Path(folder) / RECORD
    if not path.is_file():
        raise StartError(f"{path} is missing: the shipped Countdown start is not here; train one with `{COMMAND}`")
    return json.loads(path.read_text())


def countdown_start(prof, folder: Path = COUNTDOWN) -> Path:
    """The shipped Countdown start's folder, checked against its checksum and against ``prof``'s data and model."""
    rec = record(folder)
    weights = Path(folder) / "model.safetensors"
    if not weights.is_file() or sha256(weights) != rec["sha256"]:
        raise StartError(f"{weights} is missing or does not match its checksum in {Path(folder) / RECORD}; "
                         f"restore it from the repository or train a start with `{COMMAND}`")  # fmt: skip
    wrong = {k: (getattr(prof, k), rec["recipe"][k]) for k in ARCHITECTURE if getattr(prof, k) != rec["recipe"][k]}
    if wrong:
        raise StartError(f"the shipped Countdown start does not fit this profile ({wrong}: profile vs start); "
                         "set start='train' in the profile")  # fmt: skip
    return Path(folder)


def metric_sd(n: np.ndarray, c: np.ndarray) -> float:
    """Standard deviation of one evaluation's pass@1 (mean over P problems of c_i / n): sqrt(sum p(1-p)/n) / P."""
    p = np.asarray(c, dtype=float) / np.asarray(n, dtype=float)
    return float(np.sqrt(np.sum(p * (1 - p) / np.asarray(n, dtype=float))) / p.size)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import shutil
    import time
    from dataclasses import asdict

    import torch

    from reproduce import countdown_evidence as ce
    from reproduce.common import RunDir, check_out_dir
    from reproduce.tasks import countdown as task

    p = argparse.ArgumentParser(prog="python -m reproduce.starts", description=__doc__.strip().splitlines()[0])
    p.add_argument("task", choices=["countdown"])
    p.add_argument("--out", default=None, help="new folder for the start (default: runs/starts/countdown)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    prof = ce.PROFILES[RECIPE_PROFILE]
    out = check_out_dir(args.out or "runs/starts/countdown")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty: name a new folder with --out")
    work = RunDir(out.parent / (out.name + "_work"), {"start": "countdown", **asdict(prof)})
    t0 = time.perf_counter()
    train, test = task.stage_data(work, prof)
    sft = task.stage_sft(work, prof.sft_profile(), train)
    t_sft = time.perf_counter() - t0
    metrics = task.evaluate(sft, test, prof)
    out.mkdir(parents=True, exist_ok=True)
    for f in sft.iterdir():
        shutil.copy2(f, out / f.name)
    info = work.load("sft")
    rec = {
        "command": COMMAND,
        "sha256": sha256(out / "model.safetensors"),
        "recipe": {k: getattr(prof, k) for k in ARCHITECTURE} | {"profile": f"countdown_evidence {RECIPE_PROFILE}",
                   **{k: getattr(prof.sft_profile(), k) for k in ("sft_steps", "sft_per_problem", "sft_decay",
                                                                  "sft_batch_size", "sft_lr")}},  # fmt: skip
        "params": info["params"], "sft_examples": info["examples"], "final_loss": float(np.mean(info["loss"][-20:])),
        "sft_wall_s": t_sft, "cpu": _cpu(), "torch": torch.__version__, "threads": args.threads,
        "eval": {"n_test": len(test), "n": prof.eval_n, "seed": 0},
        "metrics": {dec: {"pass@1": m["pass@k"]["1"], "pass@32": m["pass@k"]["32"], "pass@64": m["pass@k"]["64"],
                          "distinct": m["distinct"], "pass@1_sd": metric_sd(np.full(len(test), m["n"]), m["n_correct"]),
                          "n_correct": m["n_correct"]} for dec, m in metrics.items()},
    }  # fmt: skip
    (out / RECORD).write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({d: {k: v for k, v in m.items() if k != "n_correct"} for d, m in rec["metrics"].items()}))
    print(f"[starts] wrote {out} in {time.perf_counter() - t0:.0f} s")
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
