"""Evaluate one benchmark: sample n completions per problem, verify, score Avg@n / pass@k, dump everything.

Files (under ``out_dir``): ``generations/<name>.jsonl`` (one line per problem: prompt, reference answers,
every sample with the answer that was scored — the last \\boxed{} or math-verify's extraction for math,
<answer> for Countdown — and correctness) and ``results/<name>.json`` (scores plus the config that produced
them; Countdown adds Table 3's diversity). A benchmark whose results file holds the same config is loaded,
not recomputed; callers put content fingerprints in the config (`model_fingerprint`, `rows_digest`) so that a
changed checkpoint or changed data is never mistaken for the same one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Sequence

from setpo.eval.generate import Generator
from setpo.eval.metrics import summarize
from setpo.tasks.countdown import countdown_checker, countdown_diversity, extract_answer
from setpo.tasks.math.reward import golds_of
from setpo.tasks.math.verify import MathVerifier, extracted_answer, verify_many

Checker = Callable[[Sequence[str], Sequence[object]], list[bool]]


def reference_answers(row: dict) -> list[str]:
    """All acceptable answers of a prepared row (extra_info.answers, else reward_model.ground_truth)."""
    return golds_of(row.get("reward_model"), row.get("extra_info"))


def rows_digest(rows: Sequence[dict]) -> str:
    """sha256 of the rows' JSON (prompts and golds): the evaluated data's content key."""
    return hashlib.sha256(json.dumps(list(rows), sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def model_fingerprint(model: str | Path) -> dict:
    """Content key of a checkpoint: for a local folder (or file), every file's relative path, size and mtime
    (hashing many GB of weights would take minutes); for a Hub id, the id itself."""
    path = Path(model)
    if not path.exists():
        return {"hub_id": str(model)}
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(path) if f != path else f.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return {"path": str(path.resolve()), "files": len(files), "files_sha256": h.hexdigest()}


def _config_diff(old: dict, new: dict) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [k for k in keys if old.get(k) != new.get(k)]


def math_checker(verifier: MathVerifier | None = None, workers: int = 0) -> Checker:
    """Checker for math rows: math-verify against any of the reference answers."""

    def check(completions: Sequence[str], golds: Sequence[object]) -> list[bool]:
        return verify_many(completions, golds, verifier=verifier, workers=workers)

    return check


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(path)


def evaluate_benchmark(
    name: str,
    rows: Sequence[dict],
    generate: Generator,
    out_dir: str | Path,
    config: dict,
    checker: Checker | None = None,
    ks: Sequence[int] | None = None,
    overwrite: bool = False,
    extract: Callable[[str], str | None] | None = None,
) -> dict:
    """Score `rows` (prepared verl rows) with `generate`; `config` (JSON-able) is stored and compared on resume.

    ``extract`` gives the logged "extracted" answer of a math sample (default: `extracted_answer`, the verifier's).
    """
    if not rows:
        raise ValueError(f"benchmark {name!r} has no rows")
    out_dir = Path(out_dir)
    res_path = out_dir / "results" / f"{name}.json"
    config = json.loads(json.dumps(config))
    if res_path.exists() and not overwrite:
        try:
            old = json.loads(res_path.read_text())
        except ValueError as e:
            msg = f"{res_path} is unreadable ({e}); pass overwrite=True (--overwrite) to redo it"
            raise FileExistsError(msg) from None
        if old.get("config") == config:
            return old
        diff = ", ".join(_config_diff(old.get("config") or {}, config))
        raise FileExistsError(
            f"{res_path} holds results of a different config (differs in: {diff}); "
            "pass overwrite=True (--overwrite) to replace them"
        )
    countdown = [r.get("data_source") == "countdown" for r in rows]
    if any(countdown) and not all(countdown):
        raise ValueError(f"benchmark {name!r} mixes Countdown and math rows")
    countdown = all(countdown)
    if checker is None:
        checker = countdown_checker() if countdown else math_checker()
    golds = [r["reward_model"]["ground_truth"] if countdown else reference_answers(r) for r in rows]
    samples = generate([r["prompt"] for r in rows])
    if len(samples) != len(rows) or len({len(s) for s in samples}) != 1:
        raise ValueError("generator must return the same number of samples for every prompt")
    flat = [s for ss in samples for s in ss]
    flat_golds = [g for g, ss in zip(golds, samples) for _ in ss]
    flat_ok = checker(flat, flat_golds)
    n = len(samples[0])
    correct = [flat_ok[i * n : (i + 1) * n] for i in range(len(rows))]
    _write_jsonl(
        out_dir / "generations" / f"{name}.jsonl",
        [
            {
                "index": (r.get("extra_info") or {}).get("index", i),
                "problem": (r.get("extra_info") or {}).get("problem"),
                "prompt": r["prompt"],
                "answers": golds[i],
                "samples": [
                    {
                        "text": t,
                        "extracted": (extract_answer if countdown else (extract or extracted_answer))(t),
                        "correct": bool(ok),
                    }
                    for t, ok in zip(samples[i], correct[i])
                ],
            }
            for i, r in enumerate(rows)
        ],
    )
    result = {"benchmark": name, "config": config, **summarize(correct, ks)}
    if countdown:
        result["countdown_diversity"] = countdown_diversity(samples, golds)
    # Round-trip through JSON so a fresh result and a resumed one are identical (pass@k keys become strings).
    result = json.loads(json.dumps(result))
    res_path.parent.mkdir(parents=True, exist_ok=True)
    res_path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
