"""Answer extraction from model outputs: the last \\boxed{...} (balanced braces), as in the Qwen2.5-Math evaluation.

`normalize_answer` rewrites a few spellings that math-verify would otherwise misread (e-notation, ``~`` spacing,
``\\sqrt13``, ``\\textbf{(073)}``); it is applied to golds and extracted predictions alike.
"""

from __future__ import annotations

import re

from setpo._validate import check_str

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*")


def extract_boxed_all(text: str) -> list[str]:
    """Contents of every \\boxed{...} / \\fbox{...} in `text`, in order; nested braces kept, unclosed boxes dropped.

    `\\boxed 5` (no braces, one token) is accepted as "5".
    """
    check_str(text, "text", empty=True)
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


# 4.5e33, 1.2E-5, .5e3: a number in e-notation not glued to a word (so "2e^x" or "x2e3" are left alone).
_E_NOTATION = re.compile(r"(?<![\w.\\^_{])(\d+(?:\.\d*)?|\.\d+)\s*[eE]\s*([+-]?\d+)(?![\w.])")
_SQRT_DIGITS = re.compile(r"\\sqrt\s*(\d+)")
_TEXTBF = re.compile(r"\\textbf\s*\{([^{}]*)\}")
_PAREN_INT = re.compile(r"^\(\s*(\d+)\s*\)$")


def normalize_answer(answer: str) -> str:
    """A final answer with spellings math-verify misreads rewritten to the same value in plain LaTeX.

    ``4.5e33`` -> ``4.5\\times 10^{33}`` (math-verify reads it as 4.5*e*33); ``~`` (a LaTeX non-breaking space,
    as in ``1.6~\\mathrm{cm}``) -> a space; ``\\sqrt13`` -> ``\\sqrt{13}`` (the Qwen2.5-Math convention);
    ``\\textbf{(073)}`` -> ``073``.
    """
    check_str(answer, "answer", empty=True)
    a = answer.replace("\\~", "\x00").replace("~", " ").replace("\x00", "\\~")
    a = _E_NOTATION.sub(lambda m: f"{m.group(1)}\\times 10^{{{int(m.group(2))}}}", a)
    a = _SQRT_DIGITS.sub(r"\\sqrt{\1}", a)
    a = _TEXTBF.sub(r"\1", a).strip()
    return _PAREN_INT.sub(r"\1", a)


def strip_percent(answer: str) -> str | None:
    """`answer` without a trailing ``\\%`` / ``%`` (so ``4.2\\%`` can match 4.2), or None when it has none."""
    a = answer.rstrip()
    for suffix in ("\\%", "%"):
        if a.endswith(suffix):
            return a[: -len(suffix)].rstrip()
    return None


def extract_gsm8k_answer(rationale: str) -> str:
    """GSM8K's reference answer: the text after the last "####", thousands separators removed (never empty)."""
    if not isinstance(rationale, str) or "####" not in rationale:
        raise ValueError(f"GSM8K answer has no '####' marker: {str(rationale)[-80:]!r}")
    answer = rationale.rsplit("####", 1)[1].strip().replace(",", "")
    if not answer:
        raise ValueError(f"GSM8K answer is empty after its '####' marker: {rationale[-80:]!r}")
    return answer
