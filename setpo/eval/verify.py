"""Answer checking with math-verify (`verify(parse(gold), parse(pred))`, gold first), thread- and process-safe.

The prediction is parsed by math-verify as a whole: a \\boxed{} answer has priority, and without one its
fallback takes the last expression of the text (as Qwen2.5-Math's evaluation takes the last number), so even
unformatted text can match; ``MathVerifier(require_boxed=True)`` scores only the last \\boxed{} content.

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

from tqdm.auto import tqdm

from setpo.eval.extract import extract_boxed


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
    return "\\boxed{" + g + "}"


@lru_cache(maxsize=65536)
def _parse_gold(gold: str, timeout: int | None):
    mv = _math_verify()
    return mv.parse(gold_to_latex(gold), parsing_timeout=timeout)


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
        if not isinstance(completion, str):
            raise ValueError(f"completion must be a string, got {type(completion).__name__}")
        golds = [golds] if isinstance(golds, str) else list(golds)
        if not golds:
            raise ValueError("at least one reference answer is needed")
        mv = _math_verify()
        timeout = self._timeout()
        if self.require_boxed:
            boxed = extract_boxed(completion)
            if boxed is None:
                return False
            completion = "\\boxed{" + boxed + "}"
        pred = mv.parse(completion, parsing_timeout=timeout)
        if not pred:
            return False
        for g in golds:
            gold = _parse_gold(str(g), timeout)
            if gold and mv.verify(gold, pred, float_rounding=self.float_rounding, timeout_seconds=timeout):
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
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} reference answers")
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
