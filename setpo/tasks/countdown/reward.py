"""Countdown answers: the <answer> tag and the rule reward (1.0 correct, 0.1 format score, 0 without an answer),
its TRL and evaluation forms, under two named rules.

* ``"tinyzero"`` (the default, the paper's): TinyZero's ``compute_score``
  (Jiayi-Pan/TinyZero, ``verl/utils/reward_score/countdown.py``, commit 95df88f): only the last line of the
  response is read; the last ``<answer>...</answer>`` on it (no DOTALL, no length cap), stripped; the numbers it
  contains must be the given ones, each once; it is evaluated as Python arithmetic (``+ - * / ** //``, decimals,
  floats) after TinyZero's character whitelist, and correct when within 1e-5 of the target.
* ``"lenient"`` (this project's earlier rule, the one the published CPU Countdown experiments used): the last
  ``<answer>`` anywhere in the completion, across lines; at most 200 characters; exact rational value, and
  ``**``, ``//``, ``%`` and decimal literals are not plain arithmetic.

TinyZero scores the decoded prompt + response and cuts at the first ``Assistant:``; for its prompts (which hold
``Assistant:`` and end in ``<think>`` without a newline) that reads the same last line as the response alone, so
the rule is stated on the response (verl 0.9.1 passes the response only).
"""

from __future__ import annotations

import ast
import math
import operator
import re
import warnings
from collections.abc import Mapping
from typing import Literal, Sequence, get_args

from setpo._validate import check_choice, check_same_len, check_str
from setpo.tasks.countdown.expressions import evaluate_expression
from setpo.tasks.countdown.problems import CountdownProblem

RewardRule = Literal["tinyzero", "lenient"]
REWARD_RULES: tuple[str, ...] = get_args(RewardRule)
DEFAULT_RULE: RewardRule = "tinyzero"

_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)  # lenient: across lines
_LINE_TAG_RE = re.compile(r"<answer>(.*?)</answer>")  # TinyZero: `.` stops at a newline
_TINYZERO_CHARS = re.compile(r"^[\d+\-*/().\s]+$")  # TinyZero's whitelist (re.match, `$` as written there)
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
#: An integer power larger than this many bits is refused (scored as an expression that does not evaluate):
#: TinyZero's ``eval`` would spend minutes or all memory on it, and so huge a value cannot be the target.
MAX_POWER_BITS = 100_000


def check_rule(rule: str) -> RewardRule:
    """`rule` when it names a reward rule; ValueError otherwise."""
    return check_choice(rule, "Countdown reward rule", REWARD_RULES)  # type: ignore[return-value]


def extract_tagged_answer(text: str) -> str | None:
    """The last <answer>...</answer> content anywhere in `text`, across lines (the lenient rule), or None."""
    found = _TAG_RE.findall(text)
    return found[-1].strip() if found else None


Outcome = Literal["no_answer", "wrong_numbers", "invalid_expression", "wrong_value", "correct"]


def extract_answer(completion: str, rule: str = DEFAULT_RULE) -> str | None:
    """The answer of a completion under `rule`, stripped, or None.

    "tinyzero": the last <answer>...</answer> on the last line only (TinyZero's ``extract_solution``);
    "lenient": the last one anywhere, across lines.
    """
    check_str(completion, "completion", empty=True)
    if check_rule(rule) == "lenient":
        return extract_tagged_answer(completion)
    found = _LINE_TAG_RE.findall(completion.split("\n")[-1])
    return found[-1].strip() if found else None


def _power(base: int | float, exp: int | float) -> int | float | complex:
    if isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1:
        if exp * math.log2(abs(base)) > MAX_POWER_BITS:
            raise OverflowError(f"{base} ** {exp} has more than {MAX_POWER_BITS} bits")
    return base**exp


def _arith(node: ast.AST) -> int | float | complex:
    """Python's value of an arithmetic AST (what ``eval`` returns), raising where ``eval`` raises."""
    signs = []
    while isinstance(node, ast.UnaryOp):  # a long run of unary signs, without recursion
        if not isinstance(node.op, (ast.UAdd, ast.USub)):
            raise TypeError(f"unary {type(node.op).__name__}")
        signs.append(node.op)
        node = node.operand
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise TypeError(f"{node.value!r} is not a number")  # `...`: eval gives Ellipsis, arithmetic fails
        value = node.value
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _arith(node.left), _arith(node.right)
        value = _power(left, right) if isinstance(node.op, ast.Pow) else _BINOPS[type(node.op)](left, right)
    else:  # calls `(1)(2)` and tuples `()` evaluate to an error or a non-number in eval too
        raise TypeError(f"{type(node).__name__} is not arithmetic")
    for op in reversed(signs):
        value = -value if isinstance(op, ast.USub) else +value
    return value


def tinyzero_value(equation: str) -> int | float | complex | None:
    """TinyZero's ``evaluate_equation``: None unless the text passes its whitelist and evaluates as Python.

    Evaluated on the parsed tree (no ``eval``): the same operators, the same int/float arithmetic and the same
    errors; an integer power above `MAX_POWER_BITS` bits counts as an error.
    """
    if not _TINYZERO_CHARS.match(equation):
        return None
    try:
        with warnings.catch_warnings():  # "(1)(2)" draws a SyntaxWarning from the compiler
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(equation, "<answer>", "eval")  # eval's own syntax and nesting errors (compiles, runs nothing)
            tree = ast.parse(equation, mode="eval")
        return _arith(tree.body)
    except Exception:  # noqa: BLE001 - TinyZero maps every evaluation error to None
        return None


def score_answer(
    completion: str,
    nums: Sequence[int],
    target: int,
    format_score: float = 0.1,
    score: float = 1.0,
    rule: str = DEFAULT_RULE,
) -> tuple[float, Outcome]:
    """Countdown reward with the branch taken: 0 without an <answer>; `format_score` when the answer does not
    use each number exactly once, does not evaluate, or misses the target; `score` on target.

    "tinyzero" is TinyZero's ``compute_score`` (float value, 1e-5 tolerance); "lenient" is this project's
    earlier rule (exact value, plain arithmetic only, 200-character cap, tags anywhere).
    """
    eq = extract_answer(completion, rule)
    if eq is None:
        return 0.0, "no_answer"
    try:
        used = sorted(int(x) for x in re.findall(r"\d+", eq))
    except ValueError:  # a literal past Python's int-string digit limit; TinyZero's validate_equation says False
        return format_score, "wrong_numbers"
    if used != sorted(nums):
        return format_score, "wrong_numbers"
    if rule == "tinyzero":
        value = tinyzero_value(eq)
        if value is None:
            return format_score, "invalid_expression"
        return (score, "correct") if abs(value - target) < 1e-5 else (format_score, "wrong_value")
    try:
        exact = evaluate_expression(eq)
    except ValueError:
        return format_score, "invalid_expression"
    if exact != target:
        return format_score, "wrong_value"
    return score, "correct"


def countdown_reward(completion: str, nums: Sequence[int], target: int, **kwargs) -> float:
    """The Countdown reward of one completion (see `score_answer`; ``rule="tinyzero"`` by default)."""
    return score_answer(completion, nums, target, **kwargs)[0]


def correct_answer(completion: str, nums: Sequence[int], target: int, rule: str = DEFAULT_RULE) -> str | None:
    """The extracted answer when it solves the problem under `rule`, else None."""
    solved = score_answer(completion, nums, target, rule=rule)[1] == "correct"
    return extract_answer(completion, rule) if solved else None


def _trl_rewards(completions, target, nums, rule: str) -> list[float]:
    check_same_len(completions=completions, target=target, nums=nums)
    out = []
    for c, t, n in zip(completions, target, nums):
        text = c if isinstance(c, str) else c[-1]["content"]  # plain or conversational completions
        out.append(countdown_reward(text, list(n), int(t), rule=rule))
    return out


def trl_countdown_reward(completions, target, nums, **_) -> list[float]:
    """TRL reward function, TinyZero's rule: dataset columns `target` and `nums` arrive as keyword lists."""
    return _trl_rewards(completions, target, nums, "tinyzero")


def trl_countdown_reward_lenient(completions, target, nums, **_) -> list[float]:
    """TRL reward function, the lenient rule (the published CPU Countdown experiments')."""
    return _trl_rewards(completions, target, nums, "lenient")


TRL_REWARDS = {"tinyzero": trl_countdown_reward, "lenient": trl_countdown_reward_lenient}


def trl_reward_for(rule: str):
    """The TRL reward function of a rule."""
    return TRL_REWARDS[check_rule(rule)]


def problem_of(ground_truth: Mapping) -> CountdownProblem:
    """The problem of a prepared Countdown row's ``reward_model.ground_truth`` ({"target", "numbers"}; the numbers
    may be a list or the array a parquet file reads back)."""
    if not isinstance(ground_truth, Mapping) or "target" not in ground_truth or "numbers" not in ground_truth:
        raise ValueError(f"Countdown ground truth must be {{'target', 'numbers'}}, got {ground_truth!r}")
    return CountdownProblem(int(ground_truth["target"]), tuple(int(n) for n in ground_truth["numbers"]))


def countdown_checker(rule: str = DEFAULT_RULE):
    """Checker for Countdown rows: True when the answer reaches the target using each number exactly once."""
    check_rule(rule)

    def check(completions: Sequence[str], golds: Sequence[dict]) -> list[bool]:
        out = []
        for c, g in zip(completions, golds):
            p = problem_of(g)
            out.append(score_answer(c, p.nums, p.target, rule=rule)[1] == "correct")
        return out

    return check
