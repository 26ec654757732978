"""The papers' claims at this scale, in one table, each verdict from the decision rule of `reproduce.stats`.

    python -m reproduce.claims [--write]

Each row reads one contrast of a published experiment (``paper_figures/<experiment>/contrasts.csv``, written by that
experiment's ``--publish`` or re-derived by ``python -m reproduce.verdicts --write``). A paper claim is tested in
several settings (experiments, group sizes, decodings): those rows are its declared family, and Holm's step-down
runs over them. A row is confirmed when its Holm p < 0.05 and both its Student-t CI and its seeds x problems
interval lie above 0 (`reproduce.stats.decide`). Rows marked descriptive are reported beside a claim's rows and
decide nothing. ``--write`` renders ``paper_figures/claims.md`` and the README's answer (a test keeps both equal to
the render).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from reproduce import stats
from reproduce.common import PAPER_FIGURES
from reproduce.contrast import fmt_ci, fmt_p, fmt_rel

OUT = "claims.md"
#: the verdicts of the earlier rule (percentile bootstrap over seeds), for the correction list
PREVIOUS = "claims_previous.csv"
README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- claims:answer:begin (python -m reproduce.claims --write) -->", "<!-- claims:answer:end -->"


@dataclass(frozen=True)
class Claim:
    """One paper claim and its declared family: the settings it is tested in, each one published contrast whose
    difference the claim says is above 0; ``min_effect``: the smallest difference the claim calls useful."""

    key: str
    text: str
    min_effect: float | None
    rows: tuple[tuple[str, int, str, str, str], ...]  # (experiment, G, decoding, contrast, metric)
    decides: bool = True


#: The Countdown design re-run from an SFT start trained on another CPU (countdown_evidence --profile replication,
#: its files copied to paper_figures/countdown_replication by hand: the profile publishes nowhere of its own).
REPLICATION = "countdown_replication"
T1, T05 = "T1_p1", "T0.5_p0.9"
_CD = [("countdown_evidence", 7, T1), ("countdown_evidence", 7, T05), ("countdown_evidence", 3, T1),
       ("countdown_evidence", 3, T05), (REPLICATION, 7, T1), (REPLICATION, 7, T05)]  # fmt: skip
_MAIN = [s for s in _CD if s[1] == 7]
_PR = [("smollm2_primes", 6, T1), ("smollm2_primes", 6, T05)]


def _k(experiment: str) -> str:
    """The decision metric of an experiment: pass@(n/2)."""
    return "pass@16" if experiment.startswith("smollm2") else "pass@32"


def _rows(settings, contrast: str, metric: str | None = None, suffix: str = "") -> tuple:
    return tuple((e, G, d, contrast, (metric or _k(e)) + suffix) for e, G, d in settings)


CLAIMS = [
    Claim("frontier", "SetPO+GRPO lies above GRPO's pass@1-pass@(n/2) frontier (beats GRPO at large k, beyond less RL)",
          0.02, _rows(_CD + _PR, "setpo_r0.3 lies above GRPO's frontier", suffix=" gap")),
    Claim("hotter", "SetPO at the paper's decoding beats GRPO sampled hotter (GRPO's end point at T 1.0), pass@(n/2)",
          0.02, _rows([s for s in _MAIN + _PR if s[2] == T05], "setpo_r0.3 minus GRPO end point sampled at T1_p1")),
    Claim("hotter_p1", "... and its pass@1 against GRPO sampled hotter (descriptive)", None,
          _rows([s for s in _MAIN + _PR if s[2] == T05], "setpo_r0.3 minus GRPO end point sampled at T1_p1",
                "pass@1"), decides=False),  # fmt: skip
    Claim("pass1", "SetPO+GRPO beats GRPO at every k, k = 1 included (pass@1 minus GRPO's)", 0.01,
          _rows(_MAIN + _PR, "setpo_r0.3 minus GRPO end point", "pass@1")),
    Claim("placebo", "The gain comes from the diversity signal (pass@(n/2) minus a placebo with the same credit sizes)",
          0.02, _rows(_MAIN + _PR, "setpo_r0.3 beats placebo_r0.3")),
    Claim("placebo_matched", "... the same at matched pass@1: SetPO's frontier gap minus the placebo's (descriptive)",
          None, _rows(_MAIN + _PR, "setpo_r0.3 beats placebo_r0.3 at matched pass@1", suffix=" gap minus placebo's"),
          decides=False),  # fmt: skip
    Claim("distinct", "SetPO keeps more distinct correct answers than GRPO (Table 3's width, per problem)", 0.1,
          _rows([_MAIN[0], _MAIN[2]] + _PR, "setpo_r0.3 minus GRPO end point", "distinct")),
    Claim("gapo", "GAPO's frequency reward spreads valid answers more evenly than GRPO, beyond less RL (uniformity "
          "frontier)", 0.02, (("smollm2_lists", 16, T1, "gapo lies above GRPO's frontier", "uniformity gap"),)),
]  # fmt: skip


#: The pre-registered confirmatory experiments (design in the module docstring, committed before the results): their
#: H1 and H2 are one Holm family inside the experiment, decided there; H3 is reported. They lead the answer.
CONFIRMATORY = (
    ("countdown_confirm", "Countdown from the shipped start, G = 7, TinyZero's rule"),
    ("smollm2_confirm", "SmolLM2-135M-Instruct naming primes, G = 6"),
)


class ResultsError(ValueError):
    """A published results file that is missing or cannot be read (the message names it and how to restore it)."""


#: columns of contrasts.csv read by `find` and by `confirmatory`; which are whole numbers, numbers, and numbers
#: when not empty
FIND_COLUMNS = ("claim", "decoding", "metric", "G", "n", "seeds_up", "seeds_down", "mean", "p_exact")
CONFIRM_COLUMNS = ("arm", "claim", "metric", "verdict", "n", "seeds_up", "mean", "p_exact")
WHOLE, NUMBERS = ("G", "n", "seeds_up", "seeds_down"), ("mean", "p_exact")
OPTIONAL_NUMBERS = ("rel", "rel_lo", "rel_hi", "t_lo", "t_hi", "p_holm", "boot_lo", "boot_hi", "at_ceiling")


def _restore(path: Path) -> str:
    return (f"restore the committed copy (git checkout -- {path}) or write it again (python -m reproduce.verdicts "
            "--write)")  # fmt: skip


def _bad_column(r: dict, columns: tuple[str, ...]) -> str | None:
    """What is wrong with one row of contrasts.csv (one of `columns` missing, or not a number), or None."""
    for k in columns:
        if not isinstance(r.get(k), str):
            return f"no {k!r} column"
    try:
        [int(r[k]) for k in WHOLE if k in columns]
        [float(r[k]) for k in NUMBERS + tuple(k for k in OPTIONAL_NUMBERS if r.get(k) not in ("", None))]
    except (TypeError, ValueError) as err:
        return " ".join(str(err).split())[:120]
    return None


def read_contrasts(path: Path, columns: tuple[str, ...] = FIND_COLUMNS) -> list[dict[str, str]]:
    """The rows of a published contrasts.csv, the `columns` read from it and every number checked;
    `ResultsError` naming the file (and the line) and the way to restore it when it is missing or damaged."""
    try:
        with path.open(newline="") as f:
            table = list(csv.DictReader(f))
    except FileNotFoundError:
        raise ResultsError(f"{path} is missing; {_restore(path)}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        why = " ".join(str(err).split())[:120] or type(err).__name__
        raise ResultsError(f"{path} is damaged ({why}); {_restore(path)}") from None
    for line, r in enumerate(table, 2):
        bad = _bad_column(r, columns)
        if bad:
            raise ResultsError(f"{path} is damaged (line {line}: {bad}); {_restore(path)}")
    return table


def confirmatory(figures: Path = PAPER_FIGURES) -> list[dict[str, object]]:
    """The H1, H2 and H3 rows of every published confirmatory experiment, as its contrasts.csv decided them."""
    out = []
    for experiment, setting in CONFIRMATORY:
        path = Path(figures) / experiment / "contrasts.csv"
        if not path.exists():
            continue
        for r in read_contrasts(path, CONFIRM_COLUMNS):
            if r["claim"][:4] in ("H1: ", "H2: ", "H3: ") and r["arm"] == "setpo_r0.3":
                out.append({"experiment": experiment, "setting": setting, "hypothesis": r["claim"][:2],
                            "claim": r["claim"][4:], "metric": r["metric"], "n": int(r["n"]),
                            "mean": float(r["mean"]), "rel": _num(r, "rel"), "rel_lo": _num(r, "rel_lo"),
                            "rel_hi": _num(r, "rel_hi"), "t_lo": _num(r, "t_lo"), "t_hi": _num(r, "t_hi"),
                            "p": float(r["p_exact"]), "p_holm": _num(r, "p_holm"),
                            "boot_lo": _num(r, "boot_lo"), "boot_hi": _num(r, "boot_hi"),
                            "seeds_up": int(r["seeds_up"]), "verdict": r["verdict"] if r["verdict"] != "-"
                            else "reported"})  # fmt: skip
    return out


def _confirm_line(r: dict) -> str:
    return (f"| {r['experiment']} | {r['hypothesis']} | {r['claim']} | {r['metric']} | {r['n']} | {r['mean']:+.3f} | "
            f"{fmt_rel(r)} | {fmt_ci(r['t_lo'], r['t_hi'])} | {fmt_p(r['p'])} | {fmt_p(r['p_holm'])} | "
            f"{fmt_ci(r['boot_lo'], r['boot_hi'])} | {r['seeds_up']}/{r['n']} | {r['verdict']} |")  # fmt: skip


def _decoding(name: str) -> str:
    return {"T1_p1": "T 1.0", "T0.5_p0.9": "T 0.5, top-p 0.9"}.get(name, name)


def find(row: tuple, figures: Path = PAPER_FIGURES) -> dict[str, str]:
    """The contrasts.csv row a claim's setting reads; KeyError naming it when the published results lack it."""
    experiment, G, decoding, contrast, metric = row
    path = Path(figures) / experiment / "contrasts.csv"
    for r in read_contrasts(path):
        if (int(r["G"]), r["decoding"], r["claim"], r["metric"]) == (G, decoding, contrast, metric):
            return r
    raise KeyError(f"{path} has no contrast {contrast!r} / {metric!r} at G = {G}, {decoding}; {_restore(path)}")


def _num(r: dict, key: str) -> float:
    v = r.get(key, "")
    return float(v) if v not in ("", None) else math.nan


def rows(figures: Path = PAPER_FIGURES) -> list[dict[str, object]]:
    """One row per claim and setting: n, mean, relative change, t-CI, exact p, Holm p in the claim's family, the
    seeds x problems interval, seeds up and the verdict."""
    out = []
    for c in CLAIMS:
        found = [find(row, figures) for row in c.rows]
        holm = stats.holm_adjust([float(r["p_exact"]) for r in found]) if c.decides else [math.nan] * len(found)
        for row, r, p_holm in zip(c.rows, found, holm):
            n, top = int(r["n"]), int(_num(r, "at_ceiling")) if _num(r, "at_ceiling") == _num(r, "at_ceiling") else 0
            t_ci, boot = (_num(r, "t_lo"), _num(r, "t_hi")), (_num(r, "boot_lo"), _num(r, "boot_hi"))
            all_zero = int(r["seeds_up"]) == 0 and int(r["seeds_down"]) == 0
            verdict, reason = "-", ""
            if c.decides:
                verdict = stats.decide(n, p_holm, t_ci, boot, len(c.rows), c.min_effect, top == n, all_zero)
                reason = stats.why(verdict, n, len(c.rows))
            out.append({"key": c.key, "claim": c.text, "experiment": row[0], "G": row[1], "decoding": row[2],
                        "metric": row[4], "n": n, "mean": float(r["mean"]), "rel": _num(r, "rel"),
                        "rel_lo": _num(r, "rel_lo"), "rel_hi": _num(r, "rel_hi"), "t_lo": t_ci[0], "t_hi": t_ci[1],
                        "p": float(r["p_exact"]), "p_holm": p_holm, "family": len(c.rows) if c.decides else 0,
                        "boot_lo": boot[0], "boot_hi": boot[1], "seeds_up": int(r["seeds_up"]), "at_ceiling": top,
                        "min_effect": c.min_effect, "verdict": verdict, "reason": reason})  # fmt: skip
    return out


def corrections(table: list[dict], figures: Path = PAPER_FIGURES) -> list[str]:
    """'row: old verdict -> new verdict' for every row of the earlier claims table."""
    path = Path(figures) / PREVIOUS
    if not path.exists():
        return []
    new = {(r["key"], r["experiment"], r["G"], _decoding(r["decoding"])): r for r in table}
    keys = {"SetPO+GRPO beats GRPO at large k": "frontier", "SetPO+GRPO beats GRPO at every k": "pass1",
            "The gain comes from the diversity signal": "placebo", "SetPO keeps more distinct": "distinct",
            "GAPO's frequency reward": "gapo"}  # fmt: skip
    out = []
    try:
        with path.open(newline="") as f:
            previous = [(old, next(v for k, v in keys.items() if old["claim"].startswith(k)), int(old["G"]))
                        for old in csv.DictReader(f)]  # fmt: skip
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, ValueError, TypeError, AttributeError, StopIteration):
        raise ResultsError(f"{path} is damaged; restore the committed copy (git checkout -- {path})") from None
    for old, key, G in previous:
        r = new.get((key, old["experiment"], G, old["decoding"]))
        label = f"{key}, {old['experiment']}, G {old['G']}, {old['decoding']}"
        if r is None:
            out.append(f"- {label} ({old['metric']}): {old['verdict']} -> row dropped")
            continue
        metric = "" if old["metric"] == r["metric"] else f"; now decided on {r['metric']} (was {old['metric']})"
        out.append(f"- {label}: {old['verdict']} -> **{r['verdict']}**{metric}")
    return out


def _row_line(r: dict) -> str:
    holm = "-" if not r["family"] else f"{fmt_p(r['p_holm'])} ({r['key']}, {r['family']})"
    top = f" ({r['at_ceiling']} at ceiling)" if r["at_ceiling"] else ""
    verdict = r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")
    return (f"| {r['key']} | {r['experiment']} | {r['G']} | {_decoding(r['decoding'])} | {r['metric']} | {r['n']} | "
            f"{r['mean']:+.3f} | {fmt_rel(r)} | {fmt_ci(r['t_lo'], r['t_hi'])} | {fmt_p(r['p'])} | {holm} | "
            f"{fmt_ci(r['boot_lo'], r['boot_hi'])} | {r['seeds_up']}/{r['n']}{top} | {verdict} |")  # fmt: skip


def render(figures: Path = PAPER_FIGURES) -> str:
    """The markdown of every claim, its settings and verdicts, and the correction list."""
    table = rows(figures)
    lines = [
        "# The papers' claims at CPU scale",
        "",
        "Rendered by `python -m reproduce.claims --write` from the published contrasts "
        "(`paper_figures/<experiment>/contrasts.csv`). Each row: one setting of a claim; the mean paired difference "
        "over n seeds that the claim says is above 0; its size relative to the reference's mean, with the relative "
        "Student-t CI; the Student-t 95% CI; the exact two-sided sign-flip p; Holm's step-down p within the claim's "
        "family (its rows; family size in brackets); the 95% bootstrap interval resampling seeds and test problems "
        "together (one resample shared by every arm, seed and checkpoint); seeds above 0. Verdict "
        "(`reproduce.stats.decide`): **confirmed** when the Holm p < 0.05 and both intervals lie above 0; **refuted** "
        "when the same holds below 0, or both intervals end below the claim's minimum useful effect; **too few "
        "seeds** when the exact test cannot reach 0.05 in the family (5 seeds: the smallest p is 0.0625); **no "
        "difference** when every paired difference is 0; **inconclusive** otherwise. The decision metric is "
        "pass@(n/2) of n samples (pass@32 of 64 on Countdown, pass@16 of 32 on SmolLM2), never pass@n, which is one "
        "Bernoulli per problem and sits at its ceiling. GRPO's frontier at a pass@1 x: the most pass@(n/2) its start "
        "and checkpoints (joined by straight lines) reach at pass@1 >= x. Inference is conditional on one start "
        "model per task; the seeds x problems interval also resamples the test problems. Command of each "
        "experiment: `python -m reproduce EXPERIMENT --profile full`; countdown_replication is `python -m reproduce "
        "countdown_evidence --profile replication`, the G = 7 arms from an SFT start trained on another CPU "
        "(`paper_figures/countdown_replication/NOTES.md`). The start of the main Countdown runs is shipped "
        "(`reproduce/starts/`: re-trained with the published recipe, its per-problem counts equal the published "
        "start's); the replication's start is not. Tiny models and SmolLM2-135M on a CPU: the mechanism at small "
        "scale, not the paper's numbers.",
        "",
        "| claim | experiment | G | decoding | metric | n | mean | relative [t-CI] | t 95% CI | p | Holm p (family) | "
        "seeds x problems | seeds up | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row_line(r) for r in table]
    conf = confirmatory(figures)
    if conf:
        lines += [
            "",
            "## Pre-registered confirmatory experiments",
            "",
            "Designs in `reproduce/<experiment>.py`'s docstring, committed before their runs; H1 and H2 are one "
            "Holm family of two inside each experiment, H3 is reported (t-CI and exact p). Command: "
            "`python -m reproduce <experiment> --profile full`.",
            "",
            "| experiment | H | contrast | metric | n | mean | relative [t-CI] | t 95% CI | p | Holm p | "
            "seeds x problems | seeds up | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [_confirm_line(r) for r in conf]
    lines += ["", "## Claims", ""]
    lines += [f"- **{c.key}**: {c.text}" + (f"; minimum useful effect {c.min_effect:+g}" if c.min_effect else "")
              for c in CLAIMS]  # fmt: skip
    fixes = corrections(table, figures)
    if fixes:
        lines += ["", "## Corrections to the earlier table (percentile bootstrap over seeds, decided on pass@n)", ""]
        lines += fixes
    return "\n".join(lines) + "\n"


def _counts(rs: list[dict]) -> str:
    tally: dict[str, int] = {}
    for r in rs:
        v = r["verdict"].split(" (")[0]
        tally[v] = tally.get(v, 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(tally.items(), key=lambda kv: -kv[1]))


def answer(figures: Path = PAPER_FIGURES) -> str:
    """The README's answer to "Does SetPO help?": one line per claim, rendered from the claims table."""
    table = rows(figures)
    by = {c.key: [r for r in table if r["key"] == c.key] for c in CLAIMS}
    lines = [
        "**Does SetPO help?** Not shown at this scale. Every verdict below comes from one exact rule (Holm-adjusted "
        "sign-flip p < 0.05 and a t-CI and a seeds x problems interval above 0; [claims](paper_figures/claims.md)):"
    ]
    for experiment, setting in CONFIRMATORY:
        hs = {r["hypothesis"]: r for r in confirmatory(figures) if r["experiment"] == experiment}
        if not hs:
            lines.append(f"- Pre-registered, {setting} (`{experiment}`): no results published yet.")
            continue
        lines.append(f"- Pre-registered, {setting}, {hs['H1']['n']} seeds: H1 SetPO above GRPO's frontier (checkpoints "
                     f"and hotter sampling) {hs['H1']['mean']:+.3f} {hs['H1']['metric']}: **{hs['H1']['verdict']}**; "
                     f"H2 beats the placebo {hs['H2']['mean']:+.3f}: **{hs['H2']['verdict']}**; H3 pass@1 "
                     f"{hs['H3']['mean']:+.3f} {fmt_ci(hs['H3']['t_lo'], hs['H3']['t_hi'])}.")  # fmt: skip
    lines.append("- The exploratory pilots, every paper claim in each setting:")
    for key in ("frontier", "hotter", "pass1", "placebo", "distinct", "gapo"):
        c = next(c for c in CLAIMS if c.key == key)
        best = max(by[key], key=lambda r: r["mean"])
        lines.append(f"  - {c.text.split(' (')[0]}: {_counts(by[key])} of {len(by[key])} settings; largest "
                     f"{best['mean']:+.3f} {fmt_ci(best['t_lo'], best['t_hi'])} ({best['experiment']}, "
                     f"{_decoding(best['decoding'])}).")  # fmt: skip
    hot = by["hotter"]
    worst = min(hot, key=lambda r: r["mean"])
    p1 = next(r for r in by["hotter_p1"] if r["experiment"] == worst["experiment"])
    lines.append(f"  - GRPO sampled at T 1.0 is the baseline to beat: on {worst['experiment']} SetPO at T 0.5 has "
                 f"{worst['mean']:+.3f} {worst['metric']} and {p1['mean']:+.3f} pass@1 against it.")  # fmt: skip
    return "\n".join(lines) + "\n"


def readme_with_answer(text: str, figures: Path = PAPER_FIGURES) -> str:
    """The README text with the block between the answer markers replaced by `answer`."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"README.md lacks the markers {BEGIN!r} ... {END!r}; put them back around the answer")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{answer(figures)}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Print the table; --write also writes paper_figures/claims.md and the README's answer."""
    p = argparse.ArgumentParser(prog="python -m reproduce.claims", description=__doc__.strip().splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"write paper_figures/{OUT} and the README's answer")
    args = p.parse_args(argv)
    try:
        text = render(PAPER_FIGURES)
    except (ResultsError, KeyError) as err:  # one line naming the file and how to restore it
        print(f"{p.prog}: error: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.write:
        try:
            readme = readme_with_answer(README.read_text(), PAPER_FIGURES)
            (PAPER_FIGURES / OUT).write_text(text)
            README.write_text(readme)
        except (ValueError, OSError) as err:  # README without the answer markers, or a file that cannot be written
            print(f"{p.prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
