"""The strategy-diversity judge of the paper's Fig. 4: 16 solutions of one problem rated 1-5 by Gemini-2.5-Flash.

Rubric (paper, Fig. 4): score by how many of the 16 solutions follow the dominant strategy — 13 or more -> 1,
10-12 -> 2, 7-9 -> 3, 4-6 -> 4, 3 or fewer (so 4+ distinct strategies) -> 5; brute force / trial-and-error
counts as one strategy; the answer is "[[score]] reason". The client (google-genai, imported lazily, key in
GEMINI_API_KEY) can be replaced by any object with ``models.generate_content(model=..., contents=..., config=...)``
returning an object with ``.text``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from setpo._validate import check_int, check_str, check_strings

N_SOLUTIONS = 16
DEFAULT_MODEL = "gemini-2.5-flash"

_RUBRIC = """You are an expert mathematician judging how diverse the strategies in a set of solutions are.

Below are {n} solutions to the same problem. Ignore whether they are correct and ignore wording or notation:
classify each solution by its core strategy (the main idea or method it uses). Brute-force search, case
enumeration by trial and error, or guess-and-check all count as ONE strategy ("brute force").

Find the dominant strategy (the one used by the most solutions) and count how many of the {n} solutions follow it.
Then give a score:
- 1: 13 or more solutions follow the dominant strategy (almost no diversity)
- 2: 10 to 12 solutions follow it
- 3: 7 to 9 solutions follow it
- 4: 4 to 6 solutions follow it
- 5: 3 or fewer follow it, with 4 or more distinct strategies (high diversity)

Answer in exactly this format on the first line: [[score]] reason
where score is a single digit 1-5 and the reason names the strategies and their counts.

# Problem
{problem}

{solutions}"""

_SCORE_RE = re.compile(r"\[\[\s*(\d+)\s*\]\]")


def rubric_score(dominant_count: int, n_solutions: int = N_SOLUTIONS) -> int:
    """The Fig. 4 score for `dominant_count` of 16 solutions on the dominant strategy (13+ -> 1 ... <= 3 -> 5)."""
    if n_solutions != N_SOLUTIONS:
        raise ValueError(f"the rubric is defined for {N_SOLUTIONS} solutions, got {n_solutions}")
    check_int(dominant_count, "dominant_count", minimum=1, maximum=n_solutions)
    for threshold, score in ((13, 1), (10, 2), (7, 3), (4, 4)):
        if dominant_count >= threshold:
            return score
    return 5


def build_judge_prompt(problem: str, solutions: Sequence[str], max_chars: int | None = None) -> str:
    """The judge prompt for one problem and exactly 16 solutions (each optionally cut to its last `max_chars`)."""
    check_str(problem, "problem")
    check_strings(solutions, "solutions", n=N_SOLUTIONS)  # the rubric is for 16
    check_int(max_chars, "max_chars", minimum=1, none=True)
    parts = []
    for i, s in enumerate(solutions, 1):
        text = s if max_chars is None or len(s) <= max_chars else "[...] " + s[-max_chars:]
        parts.append(f"# Solution {i}\n{text.strip()}")
    return _RUBRIC.format(n=N_SOLUTIONS, problem=problem.strip(), solutions="\n\n".join(parts))


@dataclass(frozen=True)
class JudgeResult:
    """One rating: score 1-5, the judge's reason and its raw reply."""

    score: int
    reason: str
    raw: str


def parse_judge_reply(text: str) -> JudgeResult:
    """Parse "[[score]] reason"; ValueError when no [[n]] is present or the score is outside 1-5."""
    m = _SCORE_RE.search(check_str(text, "judge reply", blank=True))
    if m is None:
        raise ValueError(f"judge reply has no [[score]]: {text[:200]!r}")
    score = int(m.group(1))
    if not 1 <= score <= 5:
        raise ValueError(f"judge score {score} outside 1-5: {text[:200]!r}")
    return JudgeResult(score, text[m.end() :].strip(), text)


class GeminiJudge:
    """Rates the strategy diversity of 16 solutions with Gemini (default gemini-2.5-flash, temperature 0)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        client: Any | None = None,
        api_key_env: str = "GEMINI_API_KEY",
        temperature: float = 0.0,
        max_attempts: int = 3,
        max_chars: int | None = None,
    ):
        check_int(max_attempts, "max_attempts", minimum=1)
        self.model, self.api_key_env, self.temperature = model, api_key_env, temperature
        self.max_attempts, self.max_chars = max_attempts, max_chars
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise RuntimeError(f"the Gemini judge needs an API key in the environment variable {self.api_key_env}")
            try:
                from google import genai
            except ImportError as e:
                raise ImportError("the Gemini judge needs google-genai: pip install google-genai") from e
            self._client = genai.Client(api_key=key)
        return self._client

    def rate(self, problem: str, solutions: Sequence[str]) -> JudgeResult:
        """Score one problem; a reply without a valid [[score]] is retried up to `max_attempts` times."""
        prompt = build_judge_prompt(problem, solutions, self.max_chars)
        last: Exception | None = None
        for _ in range(self.max_attempts):
            reply = self.client.models.generate_content(
                model=self.model, contents=prompt, config={"temperature": self.temperature}
            )
            try:
                return parse_judge_reply(reply.text or "")
            except ValueError as e:
                last = e
        raise ValueError(f"no valid judge score after {self.max_attempts} attempts: {last}")


def judge_generations(
    generations_jsonl: str | Path, out_jsonl: str | Path, judge: GeminiJudge, progress: bool = True
) -> dict:
    """Rate every problem of a dumped generations file (first 16 samples each); resumable line by line.

    Returns {"problems", "mean_score", "scores"}; ratings go to `out_jsonl` (one line per problem).
    """
    rows = [json.loads(ln) for ln in Path(generations_jsonl).read_text().splitlines() if ln.strip()]
    out = Path(out_jsonl)
    done = {}
    if out.exists():
        for ln in out.read_text().splitlines():
            if ln.strip():
                r = json.loads(ln)
                done[r["index"]] = r
    from tqdm.auto import tqdm  # imported here: tqdm is not a core dependency

    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for row in tqdm(rows, desc="judge", disable=not progress):
            if row["index"] in done:
                continue
            texts = [s["text"] for s in row["samples"]]
            if len(texts) < N_SOLUTIONS:
                raise ValueError(f"problem {row['index']} has {len(texts)} samples; the judge needs {N_SOLUTIONS}")
            problem = row.get("problem") or row["prompt"][-1]["content"]
            res = judge.rate(problem, texts[:N_SOLUTIONS])
            rec = {"index": row["index"], "score": res.score, "reason": res.reason}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            done[row["index"]] = rec
    scores = [done[r["index"]]["score"] for r in rows]
    return {"problems": len(scores), "mean_score": sum(scores) / len(scores), "scores": scores}
