"""Countdown expressions: parsing arithmetic text without `eval`, exact values, rendering, canonical forms.

Expressions are trees: an int leaf or a tuple (op, left, right) with op in "+-*/", or ("neg", x) for a
unary minus (accepted from model output, never produced by the solver).
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from typing import Literal, Union

from setpo._validate import check_choice, check_str

Expr = Union[int, tuple]
OPS = ("+", "-", "*", "/")
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_ALLOWED_CHARS = re.compile(r"^[\d+\-*/().\s]+$")  # TinyZero's character whitelist
MAX_EXPRESSION_CHARS = 200


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
    check_str(text, "expression", empty=True)
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
    if check_choice(level, "canonical level", ("string", "tree", "commutative", "associative")) == "string":
        if not isinstance(text_or_tree, str):
            raise ValueError("level 'string' needs the expression text, not a tree")
        return re.sub(r"\s+", "", text_or_tree)
    tree = parse_expression(text_or_tree) if isinstance(text_or_tree, str) else text_or_tree
    if level == "tree":
        return render(tree, spaces=False)
    if level == "commutative":
        return _canon_comm(tree)
    return _canon_ac(tree)
