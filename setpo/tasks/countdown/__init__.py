"""Countdown (Pang et al. 2023; TinyZero): reach a target with + - * / using each given number exactly once.

Contents: an exact solver (fractions, every expression tree), a problem generator, the TinyZero rule
reward (1.0 correct, 0.1 format score, 0 without an <answer>...</answer>), an expression evaluator
without `eval`, canonical forms modulo commutativity / associativity, prompt templates and a loader for
JSONL/Parquet copies of the TinyZero data (path given by the caller).

Expressions are trees: an int leaf or a tuple (op, left, right) with op in "+-*/", or ("neg", x) for a
unary minus (accepted from model output, never produced by the solver).
"""

from __future__ import annotations

import ast
import itertools
import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Literal, Sequence, Union

from setpo.data.prompts import countdown_prompt
from setpo.eval.extract import extract_tagged_answer

Expr = Union[int, tuple]
OPS = ("+", "-", "*", "/")
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_ALLOWED_CHARS = re.compile(r"^[\d+\-*/().\s]+$")  # TinyZero's character whitelist
MAX_EXPRESSION_CHARS = 200


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class CountdownProblem:
    """One problem: reach `target` from `nums`, each used exactly once."""

    target: int
    nums: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.target, int) or isinstance(self.target, bool):
            raise ValueError(f"target must be an int, got {self.target!r}")
        nums = tuple(self.nums)
        if not nums or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nums):
            raise ValueError(f"nums must be a non-empty sequence of non-negative ints, got {self.nums!r}")
        object.__setattr__(self, "nums", nums)

    @property
    def key(self) -> tuple[int, tuple[int, ...]]:
        """Identity up to the order of the numbers (used to keep train and test disjoint)."""
        return self.target, tuple(sorted(self.nums))


# --------------------------------------------------------------------------- expressions


def evaluate_tree(e: Expr) -> Fraction:
    """Exact value of an expression tree; ZeroDivisionError on division by zero."""
    if isinstance(e, int):
        return Fraction(e)
    if e[0] == "neg":
        return -evaluate_tree(e[1])
    a, b = evaluate_tree(e[1]), evaluate_tree(e[2])
    if e[0] == "+":
        return a + b
    if e[0] == "-":
        return a - b
    if e[0] == "*":
        return a * b
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "neg": 3}


def render(e: Expr, spaces: bool = True) -> str:
    """Infix text with only the parentheses the tree needs, e.g. "(3 + 5) * 7", "3 + 5 + 7", "3 + (5 + 7)".

    A left operand is parenthesised when it binds more loosely than the operator, a right operand when it
    binds as loosely or more (operators are left-associative), so `parse_expression(render(t)) == t`.
    """
    if isinstance(e, int):
        return str(e)
    if e[0] == "neg":
        inner = render(e[1], spaces)
        return f"-{inner}" if isinstance(e[1], int) or e[1][0] == "neg" else f"-({inner})"
    op, left, right = e
    a, b = render(left, spaces), render(right, spaces)
    if isinstance(left, tuple) and _PREC[left[0]] < _PREC[op]:
        a = f"({a})"
    if isinstance(right, tuple) and _PREC[right[0]] <= _PREC[op]:
        b = f"({b})"
    sep = " " if spaces else ""
    return f"{a}{sep}{op}{sep}{b}"


def leaves(e: Expr) -> list[int]:
    """The numbers of an expression tree, left to right."""
    if isinstance(e, int):
        return [e]
    return [n for x in e[1:] for n in leaves(x)]


def _from_ast(node: ast.AST) -> Expr:
    if isinstance(node, ast.Expression):
        return _from_ast(node.body)
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
        return (_AST_OPS[type(node.op)], _from_ast(node.left), _from_ast(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _from_ast(node.operand)
        return ("neg", inner) if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Constant):
        raise ValueError(f"only integer literals are allowed, found {node.value!r}")
    if isinstance(node, ast.BinOp):
        raise ValueError(f"operator {type(node.op).__name__} is not one of + - * /")
    raise ValueError(f"not a plain arithmetic expression ({type(node).__name__})")


def parse_expression(text: str) -> Expr:
    """Parse arithmetic text (integers, + - * /, parentheses, unary minus) into a tree; ValueError otherwise.

    Follows Python's grammar, as TinyZero's `eval` does, but refuses what is not plain arithmetic on the
    given integers: `**`, `//`, `%`, decimal literals, names and calls.
    """
    if not isinstance(text, str):
        raise ValueError(f"expression must be a string, got {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    if not _ALLOWED_CHARS.match(text):
        raise ValueError(f"expression has characters other than digits, + - * / ( ) . and spaces: {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise ValueError(f"not a valid expression: {text!r} ({err.msg})") from None
    return _from_ast(tree)


def evaluate_expression(text: str) -> Fraction:
    """Exact value of arithmetic text; ValueError for invalid text or division by zero."""
    tree = parse_expression(text)
    try:
        return evaluate_tree(tree)
    except ZeroDivisionError:
        raise ValueError(f"division by zero in {text!r}") from None


# --------------------------------------------------------------------------- canonical forms

CanonLevel = Literal["string", "tree", "commutative", "associative"]


def _canon_comm(e: Expr) -> str:
    if isinstance(e, int):
        return str(e)
    if e[0] == "neg":
        return f"neg({_canon_comm(e[1])})"
    a, b = _canon_comm(e[1]), _canon_comm(e[2])
    if e[0] in "+*" and b < a:
        a, b = b, a
    return f"({a}{e[0]}{b})"


def _terms(e: Expr, sign: int) -> list[tuple[int, Expr]]:
    """Flatten an additive chain into signed terms: a - (b - c) -> [+a, -b, +c]."""
    if isinstance(e, tuple) and e[0] in "+-":
        return _terms(e[1], sign) + _terms(e[2], sign if e[0] == "+" else -sign)
    if isinstance(e, tuple) and e[0] == "neg":
        return _terms(e[1], -sign)
    return [(sign, e)]


def _factors(e: Expr, power: int) -> list[tuple[int, Expr]]:
    """Flatten a multiplicative chain into factors with exponents +-1: a / (b / c) -> [a^1, b^-1, c^1]."""
    if isinstance(e, tuple) and e[0] in "*/":
        return _factors(e[1], power) + _factors(e[2], power if e[0] == "*" else -power)
    return [(power, e)]


def _canon_ac(e: Expr) -> str:
    if isinstance(e, int):
        return str(e)
    if e[0] in "+-" or e[0] == "neg":
        parts = sorted(("+" if s > 0 else "-") + _canon_ac(t) for s, t in _terms(e, 1))
        return "sum(" + ",".join(parts) + ")"
    parts = sorted(("*" if p > 0 else "/") + _canon_ac(f) for p, f in _factors(e, 1))
    return "prod(" + ",".join(parts) + ")"


def canonical(text_or_tree: str | Expr, level: CanonLevel = "commutative") -> str:
    """A key equal for expressions that are the same at `level`.

    * "string": the text with whitespace removed;
    * "tree": the same parse tree (redundant parentheses and spacing ignored);
    * "commutative": the same tree up to swapping the operands of + and *;
    * "associative": the same up to commutativity and associativity of + and *, with - and / read as
      adding a negation / multiplying by an inverse, so a - (b - c) == a + c - b and a / (b / c) == a * c / b.
      (Distributivity is not applied: a * (b + c) and a * b + a * c stay different; they use different numbers.)
    """
    if level == "string":
        if not isinstance(text_or_tree, str):
            raise ValueError("level 'string' needs the expression text, not a tree")
        return re.sub(r"\s+", "", text_or_tree)
    tree = parse_expression(text_or_tree) if isinstance(text_or_tree, str) else text_or_tree
    if level == "tree":
        return render(tree, spaces=False)
    if level == "commutative":
        return _canon_comm(tree)
    if level == "associative":
        return _canon_ac(tree)
    raise ValueError(f"unknown canonical level {level!r}; use 'string', 'tree', 'commutative' or 'associative'")


# --------------------------------------------------------------------------- solver


def _check_nums(nums: Sequence[int], limit: int = 6) -> tuple[int, ...]:
    nums = tuple(nums)
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nums):
        raise ValueError(f"nums must be a non-empty sequence of non-negative ints, got {nums!r}")
    if len(nums) > limit:
        raise ValueError(f"exhaustive enumeration supports at most {limit} numbers, got {len(nums)}")
    return nums


def all_expressions(nums: Sequence[int]) -> dict[str, tuple[Expr, Fraction]]:
    """Every expression tree using each number exactly once with + - * /, keyed by its text; value exact.

    Trees are built over index subsets: the root splits the used indices into an ordered pair of
    non-empty parts, so each tree appears once (repeated numbers give repeated texts, merged by the key).
    Divisions by zero are left out. The result does not depend on the order of `nums` (cached on the
    sorted numbers; treat it as read-only).
    """
    return _all_expressions(tuple(sorted(_check_nums(nums))))


@lru_cache(maxsize=4096)
def _all_expressions(nums: tuple[int, ...]) -> dict[str, tuple[Expr, Fraction]]:
    n = len(nums)
    table: dict[int, list[tuple[Expr, Fraction]]] = {1 << i: [(x, Fraction(x))] for i, x in enumerate(nums)}
    for mask in sorted(range(1, 1 << n), key=lambda m: bin(m).count("1")):
        if mask in table:
            continue
        out = []
        sub = (mask - 1) & mask
        while sub:
            rest = mask ^ sub
            for (ea, va), (eb, vb) in itertools.product(table[sub], table[rest]):
                out.append((("+", ea, eb), va + vb))
                out.append((("-", ea, eb), va - vb))
                out.append((("*", ea, eb), va * vb))
                if vb != 0:
                    out.append((("/", ea, eb), va / vb))
            sub = (sub - 1) & mask
        table[mask] = out
    return {render(e): (e, v) for e, v in table[(1 << n) - 1]}


def solve(nums: Sequence[int], target: int | Fraction) -> list[str]:
    """All distinct expression texts (see `render`) using each number once that equal `target` exactly; sorted."""
    target = Fraction(target)
    return sorted(t for t, (_, v) in all_expressions(_check_nums(nums)).items() if v == target)


def reachable_targets(nums: Sequence[int], lo: int, hi: int) -> dict[int, int]:
    """Integer targets in [lo, hi] reachable from `nums`, with their number of distinct solution texts."""
    counts: dict[int, int] = {}
    for _, v in all_expressions(_check_nums(nums)).values():
        if v.denominator == 1 and lo <= v <= hi:
            counts[int(v)] = counts.get(int(v), 0) + 1
    return counts


# --------------------------------------------------------------------------- reward

Outcome = Literal["no_answer", "wrong_numbers", "invalid_expression", "wrong_value", "correct"]


def extract_answer(completion: str, last_line_only: bool = False) -> str | None:
    """The last <answer>...</answer> content of a completion, stripped, or None.

    TinyZero looks only at the last line of the response (`last_line_only=True` reproduces that);
    by default tags anywhere in the completion count.
    """
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a string, got {type(completion).__name__}")
    if last_line_only:
        completion = completion.split("\n")[-1]
    return extract_tagged_answer(completion)


def score_answer(
    completion: str,
    nums: Sequence[int],
    target: int,
    format_score: float = 0.1,
    score: float = 1.0,
    last_line_only: bool = False,
) -> tuple[float, Outcome]:
    """TinyZero Countdown reward with the branch taken: 0 without an <answer>; `format_score` when the answer
    does not use each number exactly once, is not plain arithmetic, or misses the target; `score` on target.

    Departures from TinyZero's `compute_score` (which `eval`s the text): the value is exact (fractions,
    not float with 1e-5 tolerance), and `**`, `//`, `%` and decimal literals are not plain arithmetic.
    """
    eq = extract_answer(completion, last_line_only)
    if eq is None:
        return 0.0, "no_answer"
    used = sorted(int(x) for x in re.findall(r"\d+", eq))
    if used != sorted(nums):
        return format_score, "wrong_numbers"
    try:
        value = evaluate_expression(eq)
    except ValueError:
        return format_score, "invalid_expression"
    if value != target:
        return format_score, "wrong_value"
    return score, "correct"


def countdown_reward(completion: str, nums: Sequence[int], target: int, **kwargs) -> float:
    """The TinyZero Countdown reward of one completion (see `score_answer`)."""
    return score_answer(completion, nums, target, **kwargs)[0]


def correct_answer(completion: str, nums: Sequence[int], target: int) -> str | None:
    """The extracted answer when it solves the problem, else None."""
    return extract_answer(completion) if score_answer(completion, nums, target)[1] == "correct" else None


def trl_countdown_reward(completions, target, nums, **_) -> list[float]:
    """TRL reward function: dataset columns `target` and `nums` arrive as keyword lists, one per completion."""
    if not (len(completions) == len(target) == len(nums)):
        raise ValueError(f"lengths differ: {len(completions)} completions, {len(target)} targets, {len(nums)} nums")
    out = []
    for c, t, n in zip(completions, target, nums):
        text = c if isinstance(c, str) else c[-1]["content"]  # plain or conversational completions
        out.append(countdown_reward(text, list(n), int(t)))
    return out


class AnswerEmbedder:
    """Embedder wrapper: embeds the <answer> content of each completion (the whole text when there is none).

    The tags are the same in every completion; leaving them out lets the kernel compare the expressions.
    ``level`` (e.g. "commutative") embeds `canonical(answer, level)` instead, so that `a+b` and `b+a` are one
    solution to the kernel; answers that do not parse are embedded as written.
    """

    def __init__(self, base, level: CanonLevel | None = None):
        if not callable(base):
            raise ValueError(f"base embedder must be callable (texts -> (N, d)), got {type(base).__name__}")
        if level is not None and level not in ("string", "tree", "commutative", "associative"):
            raise ValueError(f"unknown canonical level {level!r}; use 'string', 'tree', 'commutative', 'associative'")
        self.base, self.level = base, level

    def _text(self, completion: str) -> str:
        answer = extract_answer(completion)
        if not answer:
            return completion
        if self.level is None:
            return answer
        try:
            return canonical(answer, self.level)
        except ValueError:
            return answer

    def __call__(self, texts: Sequence[str]):
        return self.base([self._text(t) for t in texts])


# --------------------------------------------------------------------------- prompts

TEMPLATES = ("base", "compact")


def make_prompt(problem: CountdownProblem, template: str = "base") -> str:
    """Prompt text. "base": TinyZero's base template (the paper's); "compact": one line for tiny char-level models."""
    if template == "base":
        return countdown_prompt(list(problem.nums), problem.target)
    if template == "compact":
        return f"Make {problem.target} from {list(problem.nums)}.\n"
    raise ValueError(f"unknown template {template!r}; use one of {TEMPLATES}")


def answer_completion(expression: str) -> str:
    """The completion an SFT example teaches: the expression inside <answer> tags."""
    return f"<answer>{expression}</answer>"


# --------------------------------------------------------------------------- generation and data


def generate_problems(
    n: int,
    n_numbers: int = 3,
    max_number: int = 10,
    min_target: int = 1,
    max_target: int = 30,
    min_solutions: int = 1,
    seed: int = 0,
    exclude: set | frozenset = frozenset(),
    max_tries: int = 100_000,
) -> list[CountdownProblem]:
    """`n` distinct solvable problems: numbers uniform in [1, max_number], target uniform over the integers in
    [min_target, max_target] that have at least `min_solutions` distinct solution texts. Problems whose `key`
    is in `exclude` are skipped (pass the training keys to draw a disjoint test set)."""
    if n < 0 or n_numbers < 1 or max_number < 1 or min_target > max_target or min_solutions < 1:
        raise ValueError(
            f"bad generator settings: n={n}, n_numbers={n_numbers}, max_number={max_number}, "
            f"targets [{min_target}, {max_target}], min_solutions={min_solutions}"
        )
    rng = random.Random(seed)
    out: list[CountdownProblem] = []
    seen = set(exclude)
    for _ in range(max_tries):
        if len(out) == n:
            return out
        nums = tuple(rng.randint(1, max_number) for _ in range(n_numbers))
        counts = reachable_targets(nums, min_target, max_target)
        targets = sorted(t for t, c in counts.items() if c >= min_solutions)
        if not targets:
            continue
        p = CountdownProblem(rng.choice(targets), nums)
        if p.key in seen:
            continue
        seen.add(p.key)
        out.append(p)
    if len(out) < n:
        raise ValueError(
            f"found only {len(out)} of {n} distinct problems in {max_tries} tries; widen the number/target ranges"
        )
    return out


def load_problems(path: str | Path, limit: int | None = None, n_numbers: int | None = None) -> list[CountdownProblem]:
    """Problems from a TinyZero-style file (.jsonl/.json/.parquet rows with `target` and `nums`).

    `n_numbers` keeps only problems with that many numbers; `limit` keeps the first `limit` of those.
    """
    from setpo.data.load import read_table

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Countdown data file not found: {path}")
    out = []
    for i, row in enumerate(read_table(path)):
        if "target" not in row or "nums" not in row:
            raise ValueError(f"{path} row {i} needs 'target' and 'nums', found {sorted(row)}")
        p = CountdownProblem(_whole(row["target"], path, i), tuple(_whole(x, path, i) for x in row["nums"]))
        if n_numbers is None or len(p.nums) == n_numbers:
            out.append(p)
        if limit is not None and len(out) >= limit:
            break
    return out


def _whole(value, path: Path, row: int) -> int:
    """`value` as an int when it is a whole number (3, 3.0, "3"); a file's 3.7 is refused, not truncated."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not number.is_integer():
        raise ValueError(f"{path} row {row}: target and nums must be whole numbers, got {value!r}")
    return int(number)


def preference_key(expression: str, nums: Sequence[int]) -> tuple:
    """A fixed "style" order over solutions (lower = preferred): + before - before * before /, numbers in the
    order given, then the text. Used to give the SFT data a biased distribution over solution forms."""
    op_cost = sum({"+": 0, "-": 1, "*": 2, "/": 3}[c] for c in expression if c in "+-*/")
    order = [int(x) for x in re.findall(r"\d+", expression)]
    return (op_cost, order != list(nums), expression)


def biased_solution_weights(solutions: Sequence[str], nums: Sequence[int], decay: float) -> list[float]:
    """Zipf-like weights (rank + 1) ** -decay over `solutions` sorted by `preference_key`; aligned with input order."""
    if decay < 0 or not math.isfinite(decay):
        raise ValueError(f"decay must be finite and >= 0, got {decay}")
    order = sorted(range(len(solutions)), key=lambda i: preference_key(solutions[i], nums))
    w = [0.0] * len(solutions)
    for rank, i in enumerate(order):
        w[i] = (rank + 1.0) ** -decay
    total = sum(w)
    return [x / total for x in w]


def sft_examples(
    problems: Sequence[CountdownProblem],
    per_problem: int,
    decay: float = 1.5,
    template: str = "compact",
    spaces: bool = False,
    seed: int = 0,
) -> list[dict]:
    """Supervised examples {"prompt", "completion", "target", "nums"}: `per_problem` solutions per problem drawn
    from `biased_solution_weights` (with replacement), so the learnt base policy covers several solution forms
    with a bias towards the preferred ones."""
    if per_problem < 1:
        raise ValueError(f"per_problem must be >= 1, got {per_problem}")
    rng = random.Random(seed)
    out = []
    for p in problems:
        sols = solve(p.nums, p.target)
        if not sols:
            raise ValueError(f"problem {p} has no solution")
        texts = [render(parse_expression(s), spaces=spaces) for s in sols]
        for s in rng.choices(texts, weights=biased_solution_weights(texts, p.nums, decay), k=per_problem):
            out.append(
                {
                    "prompt": make_prompt(p, template),
                    "completion": answer_completion(s),
                    "target": p.target,
                    "nums": list(p.nums),
                }
            )
    return out
