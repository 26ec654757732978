"""Answer extraction from model outputs: the last \\boxed{...} (balanced braces), as in the Qwen2.5-Math evaluation."""

from __future__ import annotations

import re

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*")


def extract_boxed_all(text: str) -> list[str]:
    """Contents of every \\boxed{...} / \\fbox{...} in `text`, in order; nested braces kept, unclosed boxes dropped.

    `\\boxed 5` (no braces, one token) is accepted as "5".
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    out: list[str] = []
    for m in _BOX_RE.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                if text[j] == "{" and (j == 0 or text[j - 1] != "\\"):
                    depth += 1
                elif text[j] == "}" and text[j - 1] != "\\":
                    depth -= 1
                    if depth == 0:
                        out.append(text[i + 1 : j].strip())
                        break
                j += 1
        elif m.group(0).endswith(" "):
            tok = re.match(r"[^\s$]+", text[i:])
            if tok:
                out.append(tok.group(0))
    return out


def extract_boxed(text: str) -> str | None:
    """The last \\boxed{...} content of `text`, or None when there is none."""
    found = extract_boxed_all(text)
    return found[-1] if found else None


def extract_gsm8k_answer(rationale: str) -> str:
    """GSM8K's reference answer: the text after the last "####", thousands separators removed."""
    if not isinstance(rationale, str) or "####" not in rationale:
        raise ValueError(f"GSM8K answer has no '####' marker: {str(rationale)[-80:]!r}")
    return rationale.rsplit("####", 1)[1].strip().replace(",", "")


_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_tagged_answer(text: str) -> str | None:
    """The last <answer>...</answer> content (TinyZero Countdown format), or None."""
    found = _TAG_RE.findall(text)
    return found[-1].strip() if found else None
