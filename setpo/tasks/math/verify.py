"""Answer checking with math-verify (`verify(parse(gold), parse(pred))`, gold first), thread- and process-safe.

Extraction rule (Qwen2.5-Math evaluation, SimpleRL-Zoo, verl's math reward): the content of the *last*
\\boxed{} / \\fbox{} when the completion has one, math-verify's own extraction of the whole text otherwise (its
fallback takes the last expression, as Qwen2.5-Math's evaluation takes the last number). math-verify alone would
join boxes written close together (``\\boxed{112} ... \\boxed{113}`` read as 112113); scoring the last box alone
avoids that. ``MathVerifier(require_boxed=True)`` scores only the last box (False without one). Golds and boxed
answers go through `normalize_answer` first, and a trailing percent sign is also tried without it.

math-verify bounds its parse/verify time with ``signal.alarm``, which Python allows only in the main thread
of a process. `MathVerifier` therefore uses the timeouts in the main thread and switches them off (timeout
None) in any other thread, where a pathological expression could then run long; `verify_many(workers=N)`
runs checks in worker *processes*, whose main threads keep the timeouts.
"""

from __future__ import annotations

import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from setpo._validate import check_len, check_same_len, check_str
from setpo.tasks.math.extract import extract_boxed, normalize_answer, strip_percent

#: Names the extraction rule and answer normalisation; stored with every result so a rule change is never resumed.
SCORING_RULE = "last-box-else-math-verify; normalize_answer v1"


def _math_verify():
    try:
        import math_verify
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("answer checking needs math-verify: pip install math-verify") from e
    return math_verify


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def gold_to_latex(gold: str) -> str:
    """A reference answer as \\boxed{...} (outer $ and a trailing period removed) so math-verify parses it whole."""
    g = str(gold).strip()
    if g.endswith("."):
        g = g[:-1].rstrip()
    if len(g) >= 2 and g.startswith("$") and g.endswith("$"):
        g = g.strip("$").strip()
    if not g:
        raise ValueError("empty reference answer")
    return "\\boxed{" + normalize_answer(g) + "}"


def _variants(boxed_latex: str) -> list[str]:
    """\\boxed{x} and, when x ends in a percent sign, \\boxed{x without it}."""
    inner = boxed_latex[len("\\boxed{") : -1]
    bare = strip_percent(inner)
    return [boxed_latex] if not bare else [boxed_latex, "\\boxed{" + bare + "}"]


@lru_cache(maxsize=65536)
def _parse_gold(gold: str, timeout: int | None) -> tuple:
    mv = _math_verify()
    return tuple(p for p in (mv.parse(v, parsing_timeout=timeout) for v in _variants(gold_to_latex(gold))) if p)


def scored_span(completion: str) -> str | None:
    """The \\boxed{...} text that is scored (last box, normalised), or None when math-verify extracts from the text."""
    boxed = extract_boxed(completion)
    return None if boxed is None else "\\boxed{" + normalize_answer(boxed) + "}"


def extracted_answer(completion: str, require_boxed: bool = False) -> str | None:
    """The answer the verifier scores, as text (for the logs): the last box, else math-verify's extraction."""
    span = scored_span(completion)
    if span is not None:
        return span[len("\\boxed{") : -1]
    if require_boxed:
        return None
    parsed = _math_verify().parse(completion, parsing_timeout=5 if _in_main_thread() else None)
    return str(parsed[-1]) if parsed else None


@dataclass(frozen=True)
class MathVerifier:
    """`verifier(completion, golds)` is True when the completion's final answer matches any reference answer.

    ``timeout_s`` bounds parsing and comparison in the main thread (see the module note for other threads).
    ``float_rounding`` is math-verify's decimal rounding for numeric comparison; ``require_boxed`` scores only
    the last \\boxed{} of the completion (False without one).
    """

    timeout_s: int = 5
    float_rounding: int = 6
    require_boxed: bool = False

    def _timeout(self) -> int | None:
        return self.timeout_s if (self.timeout_s and _in_main_thread()) else None

    def __call__(self, completion: str, golds: str | Sequence[str]) -> bool:
        check_str(completion, "completion", empty=True)
        golds = check_len([golds] if isinstance(golds, str) else list(golds), "golds (reference answers)")
        mv = _math_verify()
        timeout = self._timeout()
        span = scored_span(completion)
        if span is None and self.require_boxed:
            return False
        texts = [completion] if span is None else _variants(span)
        preds = [p for p in (mv.parse(t, parsing_timeout=timeout) for t in texts) if p]
        if not preds:
            return False
        for g in golds:
            for gold in _parse_gold(str(g), timeout):
                for pred in preds:
                    if mv.verify(gold, pred, float_rounding=self.float_rounding, timeout_seconds=timeout):
                        return True
        return False


def _check_chunk(args) -> list[bool]:
    verifier, items = args
    return [verifier(c, g) for c, g in items]


def verify_many(
    completions: Sequence[str],
    golds: Sequence[str | Sequence[str]],
    verifier: MathVerifier | None = None,
    workers: int = 0,
    chunk_size: int = 64,
    progress: bool = True,
) -> list[bool]:
    """Check completions[i] against golds[i]; ``workers > 1`` uses that many processes (timeouts stay on)."""
    check_same_len(completions=completions, golds=golds)
    from tqdm.auto import tqdm  # imported here: tqdm is not a core dependency

    verifier = verifier or MathVerifier()
    items = list(zip(completions, golds))
    if workers <= 1:
        return [verifier(c, g) for c, g in tqdm(items, desc="verify", disable=not progress, leave=False)]
    chunks = [items[i : i + chunk_size] for i in range(0, len(items), chunk_size)]
    out: list[bool] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        jobs = pool.map(_check_chunk, [(verifier, ch) for ch in chunks])
        for res in tqdm(jobs, total=len(chunks), desc="verify", disable=not progress, leave=False):
            out.extend(res)
    return out
