"""Full-scale launches of the paper's runs, rendered on demand from ``setpo/paper_runs.py`` (nothing is committed).

    python -m reproduce.scale                                 # every verl run with its GPU-hour estimate (CSV)
    python -m reproduce.scale NAME [--baseline] --print       # the bash launch script (SetPO, or its baseline)
    python -m reproduce.scale NAME [--baseline] --run [OVERRIDE ...]   # run it (needs DATA_DIR; SEEDS, OUT_DIR)
    python -m reproduce.scale NAME --trl-yaml                 # the TRL preset as YAML (SetPOConfig.from_yaml)
    python -m reproduce.scale [NAME] --check                  # compose + validate the verl configs (.venv-verl)

NAME is a paper run (``setpo.paper_runs.PAPER_RUNS``, the TRL preset names, e.g. ``table4_grpo_1.5b``).
``python -m reproduce.scale`` needs the checkout's root folder as the working folder (``reproduce`` is not an
installed package); from any other folder run ``python <checkout>/reproduce/scale ...`` instead.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as `python <checkout>/reproduce/scale`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reproduce.scale.settings import (
    ESTIMATE,
    SEEDS,
    SETTINGS,
    ScaleSetting,
    checkpoint_gb,
    disk_gb_per_seed,
    estimate,
    overrides,
    setting,
)
from setpo.paper_runs import PAPER_RUNS, get_run


def _quote(arg: str) -> str:
    """Double-quote an override so $DATA_DIR / $SEED / $RUN expand while brackets and commas stay literal."""
    return '"' + arg.replace('"', '\\"') + '"' if any(c in arg for c in "$[],= ") else shlex.quote(arg)


def command(s: ScaleSetting) -> str:
    """The ``python -m reproduce.scale`` arguments that select a setting."""
    return s.run + (" --baseline" if s.lam is None else "")


def script_text(s: ScaleSetting) -> str:
    """The bash launch script of one setting (runs the seeds in SEEDS one after the other)."""
    e = estimate(s)
    r = s.resources
    entry = "setpo.integrations.verl" if s.lam is not None else "verl.trainer.main_ppo"
    lam = f", lambda {s.lam:g}" if s.lam is not None else ""
    cost = f"{e.gpu_hours_per_seed:.0f} GPU-hours per seed ({e.steps} steps x ~{e.seconds_per_step:.0f} s)"
    cost += f", {e.gpu_hours_all_seeds:.0f} for {len(SEEDS)} seeds"
    args = " \\\n    ".join(_quote(o) for o in overrides(s, "$DATA_DIR", "$SEED", "$RUN"))
    disk = f"{disk_gb_per_seed(s):,.0f} GB per seed at peak (one {checkpoint_gb(s):,.0f} GB actor checkpoint kept)"
    if r.nnodes > 1:  # every node writes its checkpoint shards under OUT_DIR: it must name one shared folder
        out_dir = f"""OUT_DIR=${{OUT_DIR:?set OUT_DIR to an absolute folder that all {r.nnodes} nodes mount}}
case "$OUT_DIR" in
  /*) ;;
  *) echo "OUT_DIR=$OUT_DIR is relative: a {r.nnodes}-node run needs an absolute folder that all nodes mount" >&2
     exit 2 ;;
esac"""
    else:
        out_dir = "OUT_DIR=${OUT_DIR:-runs/scale}"
    out_use = "OUT_DIR is required, absolute" if r.nnodes > 1 else "OUT_DIR=runs/scale by default"
    return f"""#!/usr/bin/env bash
# {s.name}: rendered by `python -m reproduce.scale {command(s)} --print` from setpo/paper_runs.py.
# Table {s.table}: {s.method.upper()} ({s.model}, {s.train} train, G={s.n}{lam}).
# Resources: {r.nnodes} node(s) x {r.gpus_per_node} GPUs (80 GB class). Estimate (docs/scale.md):
# {cost}.
# Disk: about {disk}.
# Usage: DATA_DIR=<python -m setpo.data.prepare --out DIR> python -m reproduce.scale {command(s)} --run
#        [extra hydra overrides] (or bash this file). SEEDS="{" ".join(map(str, SEEDS))}" by default; {out_use};
#        a rerun resumes each seed from its last checkpoint (trainer.resume_mode=auto).
# After training: python -m setpo.eval.checkpoint "$OUT_DIR/{s.name}/seed1" --merge (docs/scale.md, section 3).
# Multi-node: start the Ray cluster first (ray start --head / ray start --address=...), run this on the head.
set -euo pipefail
: "${{DATA_DIR:?set DATA_DIR to the folder written by python -m setpo.data.prepare --out DIR}}"
SEEDS=${{SEEDS:-"{" ".join(map(str, SEEDS))}"}}
{out_dir}
PYTHON=${{PYTHON:-python3}}
for SEED in $SEEDS; do
  RUN="$OUT_DIR/{s.name}/seed$SEED"
  mkdir -p "$RUN"
  "$PYTHON" -m {entry} \\
    {args} \\
    "$@" 2>&1 | tee -a "$RUN/train.log"
done
"""


def estimates_csv() -> str:
    """One row per verl setting: how to select it, resources, steps, seconds per step, GPU-hours."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", "arm", "name", "table", "method", "model", "gpus", "steps", "s_per_step",
                "setpo_embed_s_per_step", "gpu_hours_per_seed", f"gpu_hours_{len(SEEDS)}_seeds"])  # fmt: skip
    for s in SETTINGS.values():
        e = estimate(s)
        arm = "baseline" if s.lam is None else "setpo"
        hours = [f"{e.seconds_per_step:.1f}", f"{e.setpo_embed_s_per_step:.2f}", f"{e.gpu_hours_per_seed:.1f}"]
        row = [s.run, arm, s.name, s.table, s.method, s.model, s.resources.gpus, e.steps, *hours]
        w.writerow([*row, f"{e.gpu_hours_all_seeds:.0f}"])
    return buf.getvalue()


def check_all(settings: list[ScaleSetting], data_dir: str = "/data", run_dir: str = "/runs/check") -> dict[str, str]:
    """Compose and validate the verl config of each setting (verl's hydra tree, no GPU, no Ray); name -> mode."""
    try:
        from setpo.integrations.verl.runner import check_config, compose_config
    except ImportError as e:
        raise SystemExit(f"--check needs verl ({e}); make .venv-verl with bash scripts/setup_verl_env.sh") from None
    modes = {}
    for s in settings:
        cfg = compose_config(overrides(s, data_dir, 1, run_dir))
        check_config(cfg)
        modes[s.name] = cfg.trainer.v1.trainer_mode
    return modes


def run_script(s: ScaleSetting, extra: list[str]) -> int:
    """Run the launch script with bash (extra hydra overrides appended); its exit status."""
    if not os.environ.get("DATA_DIR"):
        raise SystemExit("--run needs DATA_DIR: the folder written by python -m setpo.data.prepare --out DIR")
    return subprocess.run(["bash", "-c", script_text(s), f"{s.name}.sh", *extra]).returncode


def _print_estimates() -> None:
    """Without NAME: every setting's cost estimate as CSV, then the totals and the TRL-only runs."""
    print(estimates_csv(), end="")
    total = sum(estimate(s).gpu_hours_all_seeds for s in SETTINGS.values())
    print(f"# {len(SETTINGS)} settings x {len(SEEDS)} seeds; estimated {total:,.0f} GPU-hours in all")
    print(f"# assumptions: {ESTIMATE}")
    disk = {s.model: disk_gb_per_seed(s) for s in SETTINGS.values()}
    per_model = ", ".join(f"{m.split('/')[-1]} {gb:,.0f} GB" for m, gb in disk.items())
    total_tb = sum(disk_gb_per_seed(s) for s in SETTINGS.values()) * len(SEEDS) / 1000
    print(f"# disk per seed at peak (one actor checkpoint kept, a second while saving, the merged model): "
          f"{per_model}; {total_tb:,.1f} TB for every run folder at once")  # fmt: skip
    trl_only = [n for n in PAPER_RUNS if n not in {s.run for s in SETTINGS.values()}]
    print(f"# TRL only (no verl launch; see --trl-yaml): {', '.join(trl_only)}")


def _without_name(a: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    """No NAME: --check validates every setting's configs; otherwise the cost estimates are printed."""
    if a.print or a.run or a.trl_yaml or a.baseline:
        p.error("NAME is required with --print, --run, --trl-yaml and --baseline")
    if a.check:
        for name, mode in check_all(list(SETTINGS.values())).items():
            print(f"ok {name} (trainer mode {mode})")
        return 0
    _print_estimates()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reproduce.scale",
        description=__doc__.split("\n\n")[0],
        epilog=f"runs: {', '.join(PAPER_RUNS)}",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="a paper run (TRL preset name)")
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="extra hydra overrides for --run")
    p.add_argument("--baseline", action="store_true", help="the run without SetPO (verl's own trainer)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--print", action="store_true", help="print the bash launch script")
    action.add_argument("--run", action="store_true", help="run the launch script (needs DATA_DIR)")
    action.add_argument("--trl-yaml", action="store_true", help="print the TRL preset as YAML")
    action.add_argument("--check", action="store_true", help="compose and validate the verl configs")
    a = p.parse_intermixed_args(argv)
    if a.overrides and not a.run:
        p.error(f"extra hydra overrides {a.overrides} are only passed on with --run")
    if a.name is None:
        return _without_name(a, p)
    try:
        get_run(a.name)
        if a.trl_yaml:
            if a.baseline:
                p.error("--trl-yaml has no --baseline: the TRL baseline is the same preset with setpo_lambda=0.0")
            from setpo.integrations.trl.presets import preset_to_yaml

            print(preset_to_yaml(a.name), end="")
            return 0
        if a.check:
            both = [setting(a.name, baseline=b) for b in (True, False)]
            for name, mode in check_all(both).items():
                print(f"ok {name} (trainer mode {mode})")
            return 0
        s = setting(a.name, baseline=a.baseline)
    except ValueError as e:
        p.error(str(e))
    if a.print:
        print(script_text(s), end="")
        return 0
    if a.run:
        return run_script(s, a.overrides)
    p.error("choose one of --print, --run, --trl-yaml or --check for NAME")


if __name__ == "__main__":
    sys.exit(main())
