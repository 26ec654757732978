"""The papers' claims at this scale, in one table: confirmed / refuted / inconclusive, with the CI and the command.

    python -m reproduce.claims [--write]

Each row reads one contrast of a published evidence experiment (``paper_figures/<experiment>/contrasts.csv``, written
by that experiment's ``--publish``), so the table says what the committed runs say and changes only with them.
Verdict, on the 95% bootstrap CI over seeds of the paired difference the claim says is above 0:
confirmed (CI above 0), refuted (CI at or below 0), inconclusive (CI contains 0), untestable when every seed's
reference is at the metric's maximum. ``--write`` renders the table to
``paper_figures/claims.md`` (a test keeps the committed file equal to the render).
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

from reproduce.common import PAPER_FIGURES
from reproduce.evidence import seeds_up
from reproduce.stats import verdict

OUT = "claims.md"


@dataclass(frozen=True)
class Claim:
    """One paper claim, tested by one published contrast whose difference the claim says is above 0."""

    paper: str
    experiment: str
    G: int
    decoding: str
    contrast: str
    metric: str


_SETPO_K = "SetPO+GRPO beats GRPO at large k, beyond less RL (pass@n above GRPO's pass@1-pass@n frontier)"
_SETPO_1 = "SetPO+GRPO beats GRPO at every k, k = 1 included (pass@1 minus GRPO's)"
_PLACEBO = "The gain comes from the diversity signal (pass@n minus a placebo with the same credit sizes)"
_DISTINCT = "SetPO keeps more distinct correct answers than GRPO (Table 3's width, per problem)"
_GAPO = "GAPO's frequency reward spreads valid answers more evenly than GRPO, beyond less RL (uniformity frontier)"

#: The Countdown design re-run from an SFT start trained on another CPU (countdown_evidence --profile replication,
#: its files copied to paper_figures/countdown_replication by hand: the profile publishes nowhere of its own).
REPLICATION = "countdown_replication"

CLAIMS = [
    Claim(_SETPO_K, "countdown_evidence", 7, "T1_p1", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, "countdown_evidence", 7, "T0.5_p0.9", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, "countdown_evidence", 3, "T1_p1", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, "countdown_evidence", 3, "T0.5_p0.9", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, REPLICATION, 7, "T1_p1", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, REPLICATION, 7, "T0.5_p0.9", "setpo_r0.3 lies above GRPO's frontier", "pass@64 gap"),
    Claim(_SETPO_K, "smollm2_primes", 6, "T1_p1", "setpo_r0.3 lies above GRPO's frontier", "pass@32 gap"),
    Claim(_SETPO_K, "smollm2_primes", 6, "T0.5_p0.9", "setpo_r0.3 lies above GRPO's frontier", "pass@32 gap"),
    Claim(_SETPO_1, "countdown_evidence", 7, "T1_p1", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_SETPO_1, "countdown_evidence", 7, "T0.5_p0.9", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_SETPO_1, REPLICATION, 7, "T1_p1", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_SETPO_1, REPLICATION, 7, "T0.5_p0.9", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_SETPO_1, "smollm2_primes", 6, "T1_p1", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_SETPO_1, "smollm2_primes", 6, "T0.5_p0.9", "setpo_r0.3 minus GRPO end point", "pass@1"),
    Claim(_PLACEBO, "countdown_evidence", 7, "T1_p1", "setpo_r0.3 beats placebo_r0.3", "pass@64"),
    Claim(_PLACEBO, "countdown_evidence", 7, "T0.5_p0.9", "setpo_r0.3 beats placebo_r0.3", "pass@64"),
    Claim(_PLACEBO, REPLICATION, 7, "T1_p1", "setpo_r0.3 beats placebo_r0.3", "pass@64"),
    Claim(_PLACEBO, REPLICATION, 7, "T0.5_p0.9", "setpo_r0.3 beats placebo_r0.3", "pass@64"),
    Claim(_PLACEBO, "smollm2_primes", 6, "T1_p1", "setpo_r0.3 beats placebo_r0.3", "pass@32"),
    Claim(_PLACEBO, "smollm2_primes", 6, "T0.5_p0.9", "setpo_r0.3 beats placebo_r0.3", "pass@32"),
    Claim(_DISTINCT, "countdown_evidence", 7, "T1_p1", "setpo_r0.3 minus GRPO end point", "distinct"),
    Claim(_DISTINCT, REPLICATION, 7, "T1_p1", "setpo_r0.3 minus GRPO end point", "distinct"),
    Claim(_DISTINCT, "smollm2_primes", 6, "T1_p1", "setpo_r0.3 minus GRPO end point", "distinct"),
    Claim(_DISTINCT, "smollm2_primes", 6, "T0.5_p0.9", "setpo_r0.3 minus GRPO end point", "distinct"),
    Claim(_GAPO, "smollm2_lists", 16, "T1_p1", "gapo lies above GRPO's frontier", "uniformity gap"),
]


def _decoding(name: str) -> str:
    return {"T1_p1": "T 1.0", "T0.5_p0.9": "T 0.5, top-p 0.9"}.get(name, name)


def find(claim: Claim, figures: Path = PAPER_FIGURES) -> dict[str, str]:
    """The contrasts.csv row a claim reads; KeyError naming the claim when the published results lack it."""
    path = Path(figures) / claim.experiment / "contrasts.csv"
    with path.open() as f:
        for row in csv.DictReader(f):
            key = (int(row["G"]), row["decoding"], row["claim"], row["metric"])
            if key == (claim.G, claim.decoding, claim.contrast, claim.metric):
                return row
    raise KeyError(f"{path} has no contrast {claim.contrast!r} / {claim.metric!r} at G = {claim.G}, {claim.decoding}")


def rows(figures: Path = PAPER_FIGURES) -> list[dict[str, object]]:
    """One row per claim: where it was tested, the signed mean and CI, p, seeds in the claim's direction, verdict."""
    out = []
    for c in CLAIMS:
        r = find(c, figures)
        mean, lo, hi = (float(r[k]) for k in ("mean", "lo", "hi"))
        top = int(float(r.get("at_ceiling") or 0))  # seeds whose frontier is at the metric's maximum
        seeds = seeds_up({**r, "at_ceiling": top})
        out.append({"claim": c.paper, "experiment": c.experiment, "G": c.G, "decoding": _decoding(c.decoding),
                    "metric": c.metric, "mean": mean, "lo": lo, "hi": hi, "p": float(r["p_signflip"]),
                    "seeds": seeds, "verdict": verdict(lo, hi, top == int(r["seeds"]))})  # fmt: skip
    return out


def render(figures: Path = PAPER_FIGURES) -> str:
    """The markdown table of every claim."""
    lines = [
        "# The papers' claims at CPU scale",
        "",
        "Rendered by `python -m reproduce.claims --write` from the published contrasts "
        "(`paper_figures/<experiment>/contrasts.csv`). Each row: the mean paired difference over seeds that the claim "
        "says is above 0 [95% bootstrap CI], exact sign-flip p, seeds above 0 (and, for a frontier gap, seeds where "
        "GRPO's frontier is at the maximum 1); confirmed (CI above 0), refuted (CI at or below 0), inconclusive; "
        "untestable when every seed's frontier is at the maximum. GRPO's frontier at a pass@1 x: the most pass@n "
        "its checkpoints (joined by straight lines) reach at pass@1 >= x. "
        "Command of each experiment: `python -m reproduce EXPERIMENT --profile full`; countdown_replication is "
        "`python -m reproduce countdown_evidence --profile replication`, the G = 7 arms from an SFT start trained on "
        "another CPU (`paper_figures/countdown_replication/NOTES.md`). With 5 seeds the exact "
        "sign-flip p cannot go below 0.0625 (10 seeds: 0.002). Tiny models and "
        "SmolLM2-135M on a CPU: the mechanism at small scale, not the paper's numbers.",
        "",
        "| claim | experiment | G | decoding | metric | mean [95% CI] | p | seeds | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows(figures):
        lines.append(
            f"| {r['claim']} | {r['experiment']} | {r['G']} | {r['decoding']} | {r['metric']} | "
            f"{r['mean']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}] | {r['p']:.3f} | {r['seeds']} | {r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table; --write also writes it to paper_figures/claims.md."""
    p = argparse.ArgumentParser(prog="python -m reproduce.claims", description=__doc__.strip().splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"write the table to paper_figures/{OUT}")
    args = p.parse_args(argv)
    text = render()
    print(text, end="")
    if args.write:
        (PAPER_FIGURES / OUT).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
