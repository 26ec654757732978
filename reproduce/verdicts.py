"""Every published experiment's contrasts and verdicts, re-derived from its per-seed and per-problem files.

    python -m reproduce.verdicts [--write]

Reads ``paper_figures/<experiment>/`` (per_problem.csv.gz or per_list.csv.gz, timing.csv and term_sizes.json where
the experiment has them), recomputes every contrast through the decision rule of `reproduce.stats` with the same
functions a new run's analysis calls, and prints which verdicts differ from the committed ``contrasts.csv``.
``--write`` rewrites ``contrasts.csv`` and ``summary.md`` there (the summary's title and setting paragraph are kept).
No model is trained or evaluated: the files are the data.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from reproduce import comparison as cmp
from reproduce import evidence
from reproduce import methods_comparison as mc
from reproduce import smollm2_lists as sl
from reproduce import smollm2_methods as sm
from reproduce.common import PAPER_FIGURES

#: The published evidence folders and the analysis each one's contrasts come from.
EVIDENCE = ("countdown_evidence", "countdown_replication", "smollm2_primes")
METHODS = ("methods_comparison", "smollm2_methods")
LISTS = ("smollm2_lists",)
PUBLISHED = EVIDENCE + METHODS + LISTS
#: Where each header's setting paragraph ends and the rule's description begins (old and new wording).
_RULE_MARKERS = (" Each row: the mean paired difference", " Mean paired difference")


def _setting(summary: Path) -> tuple[str, str]:
    """(title, setting) of a published summary.md: its heading and the paragraph before the rule's description."""
    lines = summary.read_text().splitlines()
    title, para = lines[0].removeprefix("# "), lines[2]
    cut = min((para.find(m) for m in _RULE_MARKERS if m in para), default=len(para))
    return title, para[:cut]


def _arms(per_problem) -> list[str]:
    names = [a for a in per_problem.arm.unique() if a not in ("start", "grpo")]
    return ["grpo"] + sorted(names, key=lambda a: (a.startswith("placebo"), a))


def recompute(name: str, figures: Path = PAPER_FIGURES):
    """The contrasts frame of one published experiment, from its files."""
    import pandas as pd

    folder = Path(figures) / name
    if name in LISTS:
        prof = replace(sl.PROFILES["full"], seeds=int(pd.read_csv(folder / "results.csv").seed.max()) + 1)
        return sl.contrasts(pd.read_csv(folder / "per_list.csv.gz"), prof)
    pp = pd.read_csv(folder / "per_problem.csv.gz")
    rl_steps = int(pp[pp.arm != "start"].step.max())
    if name in EVIDENCE:
        placebo = [a for a in pp.arm.unique() if a.startswith("placebo_r")]
        ratio = float(placebo[0].removeprefix("placebo_r")) if placebo else None
        return evidence.contrasts(pp, _arms(pp), rl_steps, ratio, evidence.OTHER_DECODING)
    module = mc if name == "methods_comparison" else sm
    seeds = int(pp.seed.max()) + 1
    prof = replace(module.PROFILES["full"], seeds=seeds)
    times = pd.read_csv(folder / "timing.csv")
    order = list(pd.read_csv(folder / "contrasts.csv").arm.drop_duplicates())
    controls = [a for a in order if a.startswith("placebo")]
    return cmp.comparison(pp, times, prof, order, controls, timed_with_grpo=())


def write(name: str, con, figures: Path = PAPER_FIGURES) -> list[Path]:
    """contrasts.csv and summary.md of one published experiment, from its recomputed contrasts."""
    import pandas as pd

    folder = Path(figures) / name
    title, setting = _setting(folder / "summary.md")
    con.to_csv(folder / "contrasts.csv", index=False)
    if name in METHODS:
        module = mc if name == "methods_comparison" else sm
        pp = pd.read_csv(folder / "per_problem.csv.gz")
        prof = replace(module.PROFILES["full"], seeds=int(pp.seed.max()) + 1)
        sizes = json.loads((folder / "term_sizes.json").read_text())
        report = cmp.COUNTDOWN if module is mc else sm.REPORT
        controls = [a for a in con.arm.drop_duplicates() if a.startswith("placebo")]
        path = cmp.summary_table(
            folder, prof, con, pd.read_csv(folder / "timing.csv"), sizes, setting, report, controls
        )
    else:
        path = evidence.write_summary(folder, con, title, setting)
    return [folder / "contrasts.csv", path]


def changes(name: str, con, figures: Path = PAPER_FIGURES) -> list[str]:
    """'claim / metric: old verdict -> new verdict' for every decided row whose verdict the rule changed."""
    import pandas as pd

    old = pd.read_csv(Path(figures) / name / "contrasts.csv")
    if "verdict" not in old:
        return []
    old["metric"] = old.metric.map(_decision_metric(con))
    keys = ["G", "decoding", "claim", "metric"] + (["arm"] if "arm" in old and "arm" in con else [])
    merged = con.merge(old, on=keys, how="outer", suffixes=("", "_old"))
    out = []
    for r in merged.to_dict("records"):
        new, was = r.get("verdict"), r.get("verdict_old")
        if new == new and was == was and new != was and (new != "-" or was != "-"):
            out.append(
                f"{name} G {r['G']} {r['decoding']} {r.get('arm', '')} {r['claim']} / {r['metric']}: {was} -> {new}"
            )
    return out


def _decision_metric(new):
    """Old metric name -> the one deciding now: pass@n -> pass@(n/2) (gaps alike), n/2 the largest k of ``new``."""
    ks = [int(m.split()[0][5:]) for m in new.metric.unique() if m.startswith("pass@")]
    if not ks:
        return lambda m: m
    k = max(ks)
    return lambda m: m.replace(f"pass@{2 * k}", f"pass@{k}", 1) if m.split()[0] == f"pass@{2 * k}" else m


def main(argv: list[str] | None = None) -> int:
    """Recompute every published experiment; print the changed verdicts; --write rewrites the files."""
    p = argparse.ArgumentParser(prog="python -m reproduce.verdicts", description=__doc__.strip().splitlines()[0])
    p.add_argument("--write", action="store_true", help="rewrite contrasts.csv and summary.md in paper_figures/")
    p.add_argument("--only", nargs="+", choices=PUBLISHED, help="these experiments only")
    args = p.parse_args(argv)
    for name in args.only or PUBLISHED:
        con = recompute(name)
        for line in changes(name, con):
            print(line)
        if args.write:
            for path in write(name, con):
                print(f"[verdicts] wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
