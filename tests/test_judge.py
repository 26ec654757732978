"""The Fig. 4 strategy-diversity judge: rubric, prompt building and reply parsing, offline with a fake client."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

from setpo.eval.judge import (
    DEFAULT_MODEL,
    GeminiJudge,
    build_judge_prompt,
    judge_generations,
    parse_judge_reply,
    rubric_score,
)

SOLUTIONS = [f"Solution text number {i}: use method {'AB'[i % 2]}." for i in range(16)]


class FakeClient:
    """Stands in for google-genai's Client: `models.generate_content(...)` returns scripted replies."""

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []
        self.models = self

    def generate_content(self, model, contents, config=None):
        self.calls.append({"model": model, "contents": contents, "config": config})
        return SimpleNamespace(text=self.replies.pop(0))


def test_rubric_maps_dominant_counts_to_scores():
    expected = {**dict.fromkeys(range(13, 17), 1), **dict.fromkeys(range(10, 13), 2), **dict.fromkeys(range(7, 10), 3)}
    expected |= {**dict.fromkeys(range(4, 7), 4), **dict.fromkeys(range(1, 4), 5)}
    assert {c: rubric_score(c) for c in range(1, 17)} == expected
    for bad in (0, 17, 2.5):
        with pytest.raises(ValueError, match="dominant_count"):
            rubric_score(bad)
    with pytest.raises(ValueError, match="16 solutions"):
        rubric_score(3, n_solutions=8)


def test_prompt_holds_problem_rubric_and_all_16_solutions_in_order():
    prompt = build_judge_prompt("  Find x.  ", SOLUTIONS)
    assert "# Problem\nFind x.\n" in prompt
    positions = [prompt.index(f"# Solution {i}\n{SOLUTIONS[i - 1]}") for i in range(1, 17)]
    assert positions == sorted(positions)
    for line in (
        "- 1: 13 or more",
        "- 2: 10 to 12",
        "- 3: 7 to 9",
        "- 4: 4 to 6",
        "- 5: 3 or fewer",
        "[[score]] reason",
    ):
        assert line in prompt
    assert "count as ONE strategy" in prompt
    cut = build_judge_prompt("p", ["x" * 50 + "END"] * 16, max_chars=5)
    assert "# Solution 1\n[...] xxEND\n" in cut and "x" * 6 not in cut  # each cut to its last 5 characters


def test_prompt_rejects_bad_input():
    with pytest.raises(ValueError, match="solutions must hold 16 entries, got 15"):
        build_judge_prompt("p", SOLUTIONS[:15])
    with pytest.raises(ValueError, match="non-empty"):
        build_judge_prompt(" ", SOLUTIONS)
    with pytest.raises(ValueError, match=r"solutions\[2\] is NoneType, not str"):
        build_judge_prompt("p", SOLUTIONS[:2] + [None] + SOLUTIONS[3:])


def test_parse_reply():
    r = parse_judge_reply("[[4]] Three strategies: algebra (6), geometry (5), brute force (5).")
    assert (r.score, r.reason) == (4, "Three strategies: algebra (6), geometry (5), brute force (5).")
    assert parse_judge_reply("Score: [[ 2 ]]\nmostly one method").score == 2
    for bad in ("no score here", "[[7]] too high", "[[0]] too low", "[4] single brackets"):
        with pytest.raises(ValueError):
            parse_judge_reply(bad)


def test_judge_sends_the_prompt_and_retries_on_unparseable_replies():
    client = FakeClient(["I think it is diverse", "[[3]] two strategies"])
    res = GeminiJudge(client=client, max_attempts=2).rate("Find x.", SOLUTIONS)
    assert res.score == 3 and len(client.calls) == 2
    call = client.calls[0]
    assert call["model"] == DEFAULT_MODEL == "gemini-2.5-flash"
    assert call["contents"] == build_judge_prompt("Find x.", SOLUTIONS) and call["config"] == {"temperature": 0.0}
    with pytest.raises(ValueError, match="no valid judge score after 2 attempts"):
        GeminiJudge(client=FakeClient(["?", "??"]), max_attempts=2).rate("Find x.", SOLUTIONS)


def test_judge_needs_an_api_key_and_the_client_library(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="GEMINI_API_KEY"):
        GeminiJudge().rate("Find x.", SOLUTIONS)
    monkeypatch.setenv("GEMINI_API_KEY", "not-a-real-key")
    try:
        installed = importlib.util.find_spec("google.genai") is not None
    except ModuleNotFoundError:  # no "google" namespace package at all
        installed = False
    if not installed:
        with pytest.raises(ImportError, match="pip install google-genai"):
            _ = GeminiJudge().client
    else:  # constructing the client makes no request
        assert GeminiJudge().client is not None


def test_judge_generations_rates_every_problem_and_resumes(tmp_path):
    gens = tmp_path / "aime24.jsonl"
    rows = [
        {"index": i, "problem": f"P{i}", "samples": [{"text": s} for s in SOLUTIONS] + [{"text": "extra"}]}
        for i in range(3)
    ]
    gens.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "judge.jsonl"
    client = FakeClient(["[[1]] one", "[[4]] many"])
    judge = GeminiJudge(client=client)
    # crash after two problems: the first two ratings are kept
    with pytest.raises(IndexError):
        judge_generations(gens, out, judge, progress=False)
    assert len(out.read_text().splitlines()) == 2
    client.replies = ["[[5]] all different"]
    res = judge_generations(gens, out, judge, progress=False)
    assert res == {"problems": 3, "mean_score": pytest.approx(10 / 3), "scores": [1, 4, 5]}
    assert len(client.calls) == 4  # 2 + 1 crashed + 1 after resume: rated problems are not re-sent
    assert "extra" not in client.calls[-1]["contents"]  # only the first 16 samples go to the judge
    assert client.calls[-1]["contents"].count("# Problem\nP2") == 1
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"index": 0, "problem": "P", "samples": [{"text": "a"}] * 15}) + "\n")
    with pytest.raises(ValueError, match="needs 16"):
        judge_generations(short, tmp_path / "j2.jsonl", GeminiJudge(client=FakeClient([])), progress=False)
