"""Countdown task: solver vs brute force, generator, reward rules (TinyZero's and the lenient one), extraction,
canonical forms, metrics."""

from __future__ import annotations

import itertools
import json
import math
import re
from fractions import Fraction

import pytest
import torch
from bench_paths import BENCH, needs_bench  # noqa: E402

from reproduce.tasks.countdown_problems import (
    all_expressions,
    biased_solution_weights,
    generate_problems,
    reachable_targets,
    sft_examples,
    solve,
)
from setpo.tasks.countdown import (
    AnswerEmbedder,
    CountdownProblem,
    answer_completion,
    average_mode,
    canonical,
    countdown_reward,
    distinct_correct,
    diversity_width,
    evaluate_expression,
    extract_answer,
    leaves,
    load_problems,
    make_prompt,
    parse_expression,
    problem_of,
    render,
    score_answer,
    table3_metrics,
    trl_countdown_reward,
)

# --------------------------------------------------------------------------- brute-force references


def rpn_trees(nums):
    """Every expression tree by enumerating postfix programs: number orders x operator strings x stack shapes."""
    n = len(nums)
    out = []
    for perm in itertools.permutations(range(n)):
        for ops in itertools.product("+-*/", repeat=n - 1):
            # positions of operators in a length-(2n-1) program: a valid program never pops an empty stack
            for op_pos in itertools.combinations(range(1, 2 * n - 1), n - 1):
                prog, ni, oi, depth, ok = [], 0, 0, 0, True
                for i in range(2 * n - 1):
                    if i in op_pos:
                        if depth < 2:
                            ok = False
                            break
                        prog.append(ops[oi])
                        oi += 1
                        depth -= 1
                    else:
                        prog.append(nums[perm[ni]])
                        ni += 1
                        depth += 1
                if not ok or depth != 1:
                    continue
                stack = []
                for tok in prog:
                    if isinstance(tok, str):
                        b, a = stack.pop(), stack.pop()
                        stack.append((tok, a, b))
                    else:
                        stack.append(tok)
                out.append(stack[0])
    return out


def fraction_eval(text: str) -> Fraction:
    """Python's own evaluator with every literal made a Fraction (independent of the module's parser)."""
    return eval(re.sub(r"\d+", lambda m: f"Fraction({m.group()})", text), {"Fraction": Fraction, "__builtins__": {}})


#: TinyZero's "base" prompt prefix ends in this line; TinyZero scores the decoded prompt + response.
TINYZERO_PROMPT_TAIL = "answer.\nUser: Using ... \nAssistant: Let me solve this step by step.\n<think>"


def tinyzero_reference(solution_str: str, nums, target, format_score=0.1, score=1.0) -> float:
    """TinyZero's ``compute_score`` (Jiayi-Pan/TinyZero @ 95df88f, verl/utils/reward_score/countdown.py), restated
    branch for branch on its input, the decoded prompt + response: cut at the first "Assistant:" (None without
    one), keep the last line, last non-DOTALL <answer> match stripped; numbers via int(\\d+) in a try; the
    character whitelist, then ``eval`` with no builtins; correct within 1e-5."""
    if "Assistant:" in solution_str:
        solution_str = solution_str.split("Assistant:", 1)[1]
    elif "<|im_start|>assistant" in solution_str:
        solution_str = solution_str.split("<|im_start|>assistant", 1)[1]
    else:
        return 0
    matches = list(re.finditer(r"<answer>(.*?)</answer>", solution_str.split("\n")[-1]))
    if not matches:
        return 0
    equation = matches[-1].group(1).strip()
    try:
        valid = sorted(int(n) for n in re.findall(r"\d+", equation)) == sorted(nums)
    except Exception:  # noqa: BLE001 - TinyZero's bare except
        valid = False
    if not valid:
        return format_score
    try:
        if not re.match(r"^[\d+\-*/().\s]+$", equation):
            raise ValueError("Invalid characters in equation.")
        result = eval(equation, {"__builtins__": None}, {})
    except Exception:  # noqa: BLE001 - TinyZero's evaluate_equation returns None on any error
        result = None
    if result is None:
        return format_score
    try:
        return score if abs(result - target) < 1e-5 else format_score
    except Exception:  # noqa: BLE001 - TinyZero's outer bare except
        return format_score


def tinyzero_on_response(response: str, nums, target, **kw) -> float:
    """TinyZero's score of `response` after its prompt (how TinyZero's reward manager calls it)."""
    return tinyzero_reference(TINYZERO_PROMPT_TAIL + response, nums, target, **kw)


# --------------------------------------------------------------------------- solver


@pytest.mark.parametrize("nums", [(1, 2, 3), (2, 2, 5), (1, 1, 1), (4, 0, 2), (6, 3), (7,), (3, 7, 11, 13)])
def test_all_expressions_match_postfix_brute_force(nums):
    brute = {}
    for tree in rpn_trees(nums):
        try:
            brute[render(tree)] = fraction_eval(render(tree))
        except ZeroDivisionError:
            continue
    fast = all_expressions(nums)
    assert set(fast) == set(brute)
    for text, (tree, value) in fast.items():
        assert value == brute[text]
        assert sorted(leaves(tree)) == sorted(nums)


def test_tree_count_for_distinct_nonzero_numbers():
    # n! orders x Catalan(n-1) shapes x 4^(n-1) operators; no zero divisor can arise from (1, 2, 4)
    assert len(all_expressions((1, 2, 4))) == math.factorial(3) * 2 * 4**2
    assert len(all_expressions((3, 7, 11, 13))) == math.factorial(4) * 5 * 4**3


@pytest.mark.parametrize(
    "nums,target", [((3, 5, 7), 22), ((1, 3, 4, 6), 24), ((44, 19, 35), 98), ((2, 2, 5), 9), ((1, 1, 1), 30)]
)
def test_solve_is_exactly_the_brute_force_solution_set(nums, target):
    sols = solve(nums, target)
    brute = set()
    for tree in rpn_trees(nums):
        try:
            if fraction_eval(render(tree)) == target:
                brute.add(render(tree))
        except ZeroDivisionError:
            pass
    assert set(sols) == brute
    assert sols == sorted(set(sols))
    for s in sols:
        assert evaluate_expression(s) == target
        assert abs(eval(s) - target) < 1e-9  # plain float eval agrees
        assert sorted(int(x) for x in re.findall(r"\d+", s)) == sorted(nums)


def test_solve_known_cases():
    assert solve((3, 5, 7), 22) == ["3 * 5 + 7", "5 * 3 + 7", "7 + 3 * 5", "7 + 5 * 3"]
    assert "6 / (1 - 3 / 4)" in solve((1, 3, 4, 6), 24)  # needs a fractional intermediate
    assert solve((1, 1, 1), 30) == []


def test_reachable_targets_counts_match_solve():
    nums = (2, 3, 7)
    counts = reachable_targets(nums, 1, 40)
    for t in range(1, 41):
        assert counts.get(t, 0) == len(solve(nums, t))


def test_solver_rejects_bad_numbers():
    for bad in [(), (1, -2), (1.5, 2), (True, 2), tuple(range(1, 9))]:
        with pytest.raises(ValueError):
            solve(bad, 3)


def test_render_parse_round_trip_and_minimal_parentheses():
    for tree, _ in all_expressions((3, 7, 11, 13)).values():
        assert parse_expression(render(tree)) == tree
        assert parse_expression(render(tree, spaces=False)) == tree
    assert render(("+", ("+", 1, 2), 3)) == "1 + 2 + 3"
    assert render(("+", 1, ("+", 2, 3))) == "1 + (2 + 3)"
    assert render(("*", ("+", 1, 2), 3), spaces=False) == "(1+2)*3"
    assert render(("-", 1, ("neg", 2))) == "1 - -2"


# --------------------------------------------------------------------------- generator and data


def test_generate_problems_are_solvable_distinct_and_in_range():
    probs = generate_problems(60, n_numbers=3, max_number=9, min_target=5, max_target=25, min_solutions=2, seed=3)
    assert len(probs) == 60
    assert len({p.key for p in probs}) == 60
    for p in probs:
        assert len(p.nums) == 3 and all(1 <= x <= 9 for x in p.nums)
        assert 5 <= p.target <= 25
        assert len(solve(p.nums, p.target)) >= 2
    assert (
        generate_problems(60, n_numbers=3, max_number=9, min_target=5, max_target=25, min_solutions=2, seed=3) == probs
    )
    assert generate_problems(10, seed=4) != generate_problems(10, seed=5)


def test_generate_problems_exclude_gives_disjoint_sets():
    train = generate_problems(100, seed=0)
    test = generate_problems(50, seed=1, exclude={p.key for p in train})
    assert not {p.key for p in train} & {p.key for p in test}


def test_generate_problems_errors():
    with pytest.raises(ValueError, match="bad generator settings"):
        generate_problems(5, min_target=10, max_target=5)
    with pytest.raises(ValueError, match="found only"):
        generate_problems(50, n_numbers=2, max_number=2, max_target=4, max_tries=200)


def test_problem_validation():
    with pytest.raises(ValueError, match="target"):
        CountdownProblem(3.5, (1, 2))
    with pytest.raises(ValueError, match="nums"):
        CountdownProblem(3, ())
    assert CountdownProblem(5, [2, 3]).nums == (2, 3)
    assert CountdownProblem(5, (3, 2)).key == CountdownProblem(5, (2, 3)).key


def test_load_problems_from_a_file(tmp_path):
    f = tmp_path / "cd.jsonl"
    rows = [{"target": 24, "nums": [1, 3, 4, 6]}, {"target": 22, "nums": [3, 5, 7]}, {"target": 9, "nums": [2, 2, 5]}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert load_problems(f) == [CountdownProblem(r["target"], tuple(r["nums"])) for r in rows]
    assert load_problems(f, n_numbers=3) == [CountdownProblem(22, (3, 5, 7)), CountdownProblem(9, (2, 2, 5))]
    assert len(load_problems(f, limit=1)) == 1
    with pytest.raises(ValueError, match="not found"):
        load_problems(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"target": 3}\n')
    with pytest.raises(ValueError, match="needs 'target' and 'nums'"):
        load_problems(bad)


@needs_bench
def test_shared_benchmark_copy_loads_and_its_first_rows_are_solvable():
    probs = load_problems(BENCH / "countdown" / "test.jsonl")
    assert len(probs) == 2001
    assert {len(p.nums) for p in probs} <= {3, 4}
    for p in probs[:15]:  # 4-number rows cost ~0.3 s each; a few suffice
        assert solve(p.nums, p.target), p


# --------------------------------------------------------------------------- extraction and reward


def test_extract_answer_edge_cases():
    for rule in ("tinyzero", "lenient"):
        assert extract_answer("<answer> 3 + 4 </answer>", rule) == "3 + 4"
        assert extract_answer("<answer>1</answer> then <answer>2 * 3</answer>", rule) == "2 * 3"  # the last one
        assert extract_answer("<answer></answer>", rule) == ""
        assert extract_answer("no tags", rule) is None
        assert extract_answer("<answer>3 + 4", rule) is None
        assert extract_answer("3 + 4</answer>", rule) is None
        assert extract_answer("think\n<answer>1+2</answer>", rule) == "1+2"
    assert extract_answer("<answer>1 +\n2</answer>", "lenient") == "1 +\n2"
    assert extract_answer("<answer>1 +\n2</answer>", "tinyzero") is None  # a tag pair split over lines
    assert extract_answer("<answer>1+2</answer>\nmore text", "lenient") == "1+2"
    assert extract_answer("<answer>1+2</answer>\nmore text", "tinyzero") is None  # last line only
    assert extract_answer("<answer>1+2</answer>\nmore text") is None  # TinyZero's rule is the default
    with pytest.raises(ValueError, match="string"):
        extract_answer(None)
    with pytest.raises(ValueError, match="unknown Countdown reward rule"):
        extract_answer("x", "strict")


_BOTH = [
    ("no answer here", (0.0, "no_answer")),
    ("<answer>(3 + 5) * 7", (0.0, "no_answer")),
    ("<answer>3 + 5</answer>", (0.1, "wrong_numbers")),  # 7 missing
    ("<answer>3 + 5 * 7 + 1</answer>", (0.1, "wrong_numbers")),  # extra number
    ("<answer>3 + 3 * 7</answer>", (0.1, "wrong_numbers")),  # 3 reused, 5 unused
    ("<answer></answer>", (0.1, "wrong_numbers")),
    ("<answer>(3 + 5 * 7</answer>", (0.1, "invalid_expression")),
    ("<answer>3 + 5 x 7</answer>", (0.1, "invalid_expression")),
    ("<answer>7 / (5 - 5) + 3</answer>", (0.1, "wrong_numbers")),
    ("<answer>3 + 5 + 7</answer>", (0.1, "wrong_value")),
    ("<answer>3 * 5 + 7</answer>", (1.0, "correct")),
    ("<answer> 7+5*3 </answer>", (1.0, "correct")),
    ("<answer>1</answer> <answer>(7 - 5 + 3) * 3</answer> <answer>3*5+7</answer>", (1.0, "correct")),
]
_TINYZERO = [
    ("<answer>3 ** 5 * 7</answer>", (0.1, "wrong_value")),  # Python arithmetic: 1701
    ("<answer>3 // 5 * 7 + 22</answer>", (0.1, "wrong_numbers")),
    ("<answer>7 // 5 * 3 * 5 + 7</answer>", (0.1, "wrong_numbers")),
    ("<answer>(7 // 5) * 15 + 7</answer>", (0.1, "wrong_numbers")),
    ("<answer>3*5+7</answer>\ndone", (0.0, "no_answer")),  # text on a later line
    ("<answer>(3*5\n+7)</answer>", (0.0, "no_answer")),  # a multi-line answer
    ("<answer>3*5+7</answer>\n<answer>3+5+7</answer>", (0.1, "wrong_value")),  # the last line's answer
    ("<answer>3*5+7</answer> <answer>3+5+7</answer>", (0.1, "wrong_value")),
]
_LENIENT = [
    ("<answer>3 ** 5 * 7</answer>", (0.1, "invalid_expression")),
    ("<answer>3*5+7</answer>\ndone", (1.0, "correct")),
    ("<answer>(3*5\n+7)</answer>", (1.0, "correct")),
    ("<answer>3*5+7</answer>\n<answer>3+5+7</answer>", (0.1, "wrong_value")),
]


@pytest.mark.parametrize(
    "rule,completion,expected",
    [(r, c, e) for r in ("tinyzero", "lenient") for c, e in _BOTH]
    + [("tinyzero", c, e) for c, e in _TINYZERO]
    + [("lenient", c, e) for c, e in _LENIENT],
)
def test_reward_branches(rule, completion, expected):
    assert score_answer(completion, [3, 5, 7], 22, rule=rule) == expected
    assert countdown_reward(completion, [3, 5, 7], 22, rule=rule) == expected[0]
    if rule == "tinyzero":
        assert countdown_reward(completion, [3, 5, 7], 22) == expected[0]  # the default
        assert countdown_reward(completion, [3, 5, 7], 22) == tinyzero_on_response(completion, [3, 5, 7], 22)


def test_reward_division_by_zero_and_fractions():
    for rule in ("tinyzero", "lenient"):
        assert score_answer("<answer>3 / (5 - 5)</answer>", [3, 5, 5], 1, rule=rule) == (0.1, "invalid_expression")
        assert score_answer("<answer>6 / (1 - 3 / 4)</answer>", [1, 3, 4, 6], 24, rule=rule) == (1.0, "correct")
        assert score_answer("<answer>-3 + 5 * 7</answer>", [3, 5, 7], 32, rule=rule) == (1.0, "correct")


def test_reward_custom_scores():
    for rule in ("tinyzero", "lenient"):
        assert countdown_reward("<answer>1 + 1</answer>", [1, 1], 5, format_score=0.25, rule=rule) == 0.25
        assert countdown_reward("<answer>1 + 1</answer>", [1, 1], 2, score=2.0, rule=rule) == 2.0


def test_reward_agrees_with_tinyzero_rule_on_ordinary_answers():
    nums, target = (2, 3, 7), 13
    completions = [answer_completion(t) for t in all_expressions(nums)]
    completions += ["<answer>2 + 3</answer>", "<answer>(2 + 3</answer>", "nothing", "<answer>2*3*7*7</answer>"]
    completions += ["<answer>7 / (3 - 3) + 2</answer>", "<answer> 2 * 3 + 7 </answer>"]
    for c in completions:
        for rule in ("tinyzero", "lenient"):  # the two rules agree on single-line, plain-arithmetic answers
            assert countdown_reward(c, nums, target, rule=rule) == tinyzero_on_response(c, nums, target), c


#: The departures of the lenient rule from TinyZero's: text after </answer>, a multi-line answer, several answers
#: on several lines, a long answer, and Python arithmetic the lenient parser refuses.
DEPARTURES = [
    ("<think>3*5=15</think>\n<answer>3 * 5 + 7</answer>\nSo the answer is 22.", (3, 5, 7), 22),
    ("<answer>3 * 5 + 7</answer><|endoftext|>\n", (3, 5, 7), 22),  # a trailing newline empties the last line
    ("</think>\n<answer>3 * 5\n + 7</answer>", (3, 5, 7), 22),
    ("<answer>3+5+7</answer>\n<answer>3*5+7</answer> or <answer>7+5*3</answer>\nnot <answer>3-5", (3, 5, 7), 22),
    ("<answer>3 * 5 + 7</answer> <answer>3 +\n5 + 7</answer>", (3, 5, 7), 22),
    ("<answer>" + "(" * 100 + "3 * 5 + 7" + ")" * 100 + "</answer>", (3, 5, 7), 22),  # 209 characters
    ("<answer>" + "+" * 300 + "3 * 5 + 7</answer>", (3, 5, 7), 22),
    ("<answer>3**2 - 2 + 5 - 3</answer>", (3, 2, 2, 5, 3), 9),
    ("<answer>3.5 * 2</answer>", (3, 5, 2), 7),
    ("<answer>(7 // 2) * 5 + 3</answer>", (7, 2, 5, 3), 18),
]


@pytest.mark.parametrize("completion,nums,target", DEPARTURES)
def test_tinyzero_rule_equals_tinyzero_where_the_lenient_rule_departs(completion, nums, target):
    want = tinyzero_on_response(completion, nums, target)
    assert countdown_reward(completion, nums, target) == want
    assert countdown_reward(completion, nums, target, rule="lenient") != want  # the case is a real departure


def test_tinyzero_reference_reads_prompt_plus_response():
    # TinyZero scores nothing without "Assistant:" before the response, and the prompt's last line ("<think>")
    # joins a single-line response without changing its last <answer>.
    assert tinyzero_reference("<answer>3*5+7</answer>", (3, 5, 7), 22) == 0
    assert tinyzero_on_response("<answer>3*5+7</answer>", (3, 5, 7), 22) == 1.0
    assert tinyzero_reference("<|im_start|>assistant\n<answer>3*5+7</answer>", (3, 5, 7), 22) == 1.0


def _random_response(rng) -> tuple[str, tuple[int, ...], int]:
    """A response of random pieces: thinking, answers (correct, wrong, Python-only, long, split), newlines."""
    nums = tuple(rng.randint(1, 12) for _ in range(rng.choice((2, 3, 4))))
    target = rng.randint(1, 60)
    ops = ["+", "-", "*", "/", "**", "//"]

    def expression() -> str:
        order = list(nums)
        rng.shuffle(order)
        if rng.random() < 0.2:
            order = order[:-1]
        text = str(order[0])
        for n in order[1:]:
            op = rng.choice(ops[:4] if rng.random() < 0.85 else ops)
            text = f"({text}) {op} {n}" if rng.random() < 0.3 else f"{text} {op} {n}"
        if rng.random() < 0.1:
            text = "(" * 70 + text + ")" * 70
        if rng.random() < 0.05:
            text = text.replace(" ", " \n ", 1)
        return text

    pieces = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.5:
            pieces.append(f"<answer>{expression()}</answer>")
        elif kind < 0.6:
            pieces.append(f"<answer>{target}</answer>")
        elif kind < 0.8:
            pieces.append(rng.choice(["Let me try.", "</think>", "so", "<answer>", "</answer>", "= 4"]))
        else:
            pieces.append("")
        pieces.append(rng.choice(["\n", " ", "", "\n\n"]))
    return "".join(pieces), nums, target


def test_tinyzero_rule_equals_tinyzero_on_2000_random_responses():
    import random

    rng = random.Random(20240905)
    disagree_lenient = 0
    for _ in range(2000):
        response, nums, target = _random_response(rng)
        want = tinyzero_on_response(response, nums, target)
        assert score_answer(response, nums, target)[0] == want, (response, nums, target)
        disagree_lenient += countdown_reward(response, nums, target, rule="lenient") != want
    assert disagree_lenient > 100  # the battery reaches the cases where the rules differ


def test_tinyzero_rule_guards_what_eval_would_hang_on():
    from setpo.tasks.countdown import tinyzero_value

    assert tinyzero_value("9**9**9") is None  # eval would build a 370-million-digit integer
    assert tinyzero_value("2**-2") == 0.25 and tinyzero_value("-" * 999 + "3") == -3  # no recursion of its own
    for signs in (999, 5000):  # eval gives up on deep nesting at compile time; so does the rule
        answer = f"<answer>{'-' * signs}3 + 5 * 7 - 10</answer>"
        assert countdown_reward(answer, [3, 5, 7, 10], 22) == tinyzero_on_response(answer, [3, 5, 7, 10], 22)
    assert tinyzero_value("(1)(2)") is None and tinyzero_value("()") is None and tinyzero_value("...") is None
    assert tinyzero_value("1e5") is None and tinyzero_value("05") is None  # whitelist; leading zero
    assert score_answer("<answer>9**9**9</answer>", [9, 9, 9], 1) == (0.1, "invalid_expression")


def test_trl_reward_function():
    from setpo.tasks.countdown import trl_countdown_reward_lenient, trl_reward_for

    assert trl_reward_for("tinyzero") is trl_countdown_reward
    assert trl_reward_for("lenient") is trl_countdown_reward_lenient
    two_lines = ["<answer>3*5+7</answer>\nok"]
    assert trl_countdown_reward(two_lines, target=[22], nums=[[3, 5, 7]]) == [0.0]
    assert trl_countdown_reward_lenient(two_lines, target=[22], nums=[[3, 5, 7]]) == [1.0]
    out = trl_countdown_reward(
        completions=["<answer>3*5+7</answer>", "<answer>3+5+7</answer>", [{"role": "assistant", "content": "x"}]],
        target=[22, 22, 22],
        nums=[[3, 5, 7]] * 3,
        prompts=["p"] * 3,
    )
    assert out == [1.0, 0.1, 0.0]
    with pytest.raises(ValueError, match="lengths differ"):
        trl_countdown_reward(completions=["a"], target=[1, 2], nums=[[1]])


def test_problem_of_reads_every_ground_truth_form_verl_and_the_harness_pass():
    import types

    import numpy as np

    want = CountdownProblem(22, (3, 5, 7))
    assert problem_of({"target": 22, "numbers": [3, 5, 7]}) == want
    assert problem_of({"target": np.int64(22), "numbers": np.array([3, 5, 7])}) == want  # read back from parquet
    assert problem_of(types.MappingProxyType({"target": 22, "numbers": (3, 5, 7)})) == want  # any mapping
    with pytest.raises(ValueError, match="'target', 'numbers'"):
        problem_of({"target": 22})
    with pytest.raises(ValueError, match="'target', 'numbers'"):
        problem_of(22)


# --------------------------------------------------------------------------- parser


def test_parse_and_evaluate():
    assert evaluate_expression("2 + 3 * 4") == 14
    assert evaluate_expression("(2 + 3) * 4") == 20
    assert evaluate_expression("8 / 3") == Fraction(8, 3)
    assert evaluate_expression("10 - 4 - 3") == 3  # left-associative
    assert evaluate_expression("-(2 - 5)") == 3
    for bad, msg in [
        ("2 ** 3", "Pow"),
        ("7 % 3", "characters"),
        ("1.5 + 2", "integer literals"),
        ("abs(3)", "characters"),
        ("2 +", "not a valid expression"),
        ("1 / 0", "division by zero"),
        ("1" * 300, "longer than"),
    ]:
        with pytest.raises(ValueError, match=msg):
            evaluate_expression(bad)
    with pytest.raises(ValueError, match="string"):
        parse_expression(12)


# --------------------------------------------------------------------------- canonical forms


def test_canonical_hand_examples():
    assert canonical("3 + 5 * 7", "string") == canonical(" 3+5*7 ", "string") == "3+5*7"
    assert canonical("((3 + 5)) * 7", "tree") == canonical("(3+5)*7", "tree")
    assert canonical("3 + 5 * 7", "tree") != canonical("7 * 5 + 3", "tree")
    assert canonical("3 + 5 * 7", "commutative") == canonical("7 * 5 + 3", "commutative")
    assert canonical("3 - 5", "commutative") != canonical("5 - 3", "commutative")
    assert canonical("8 / 2", "commutative") != canonical("2 / 8", "commutative")
    assert canonical("(1 + 2) + 3", "commutative") != canonical("1 + (2 + 3)", "commutative")
    assert canonical("(1 + 2) + 3", "associative") == canonical("1 + (2 + 3)", "associative")
    assert canonical("7 - (5 - 3)", "associative") == canonical("7 + 3 - 5", "associative")
    assert canonical("8 / (4 / 2)", "associative") == canonical("8 * 2 / 4", "associative")
    assert canonical("2 * (3 + 4)", "associative") != canonical("2 * 3 + 4", "associative")
    with pytest.raises(ValueError, match="unknown canonical level"):
        canonical("1+2", "ring")
    with pytest.raises(ValueError, match="needs the expression text"):
        canonical(("+", 1, 2), "string")


def _swap_orbit(tree):
    """All trees reachable by swapping the operands of + and * nodes (brute force)."""
    if isinstance(tree, int):
        return {tree}
    if tree[0] == "neg":
        return {("neg", t) for t in _swap_orbit(tree[1])}
    op, a, b = tree
    out = set()
    for x, y in itertools.product(_swap_orbit(a), _swap_orbit(b)):
        out.add((op, x, y))
        if op in "+*":
            out.add((op, y, x))
    return out


@pytest.mark.parametrize("nums", [(1, 2, 3), (2, 2, 5), (3, 7, 11, 13)])
def test_commutative_classes_are_exactly_the_swap_orbits(nums):
    trees = [t for t, _ in all_expressions(nums).values()]
    key = {render(t): canonical(t, "commutative") for t in trees}
    for t in trees:
        orbit = {render(o) for o in _swap_orbit(t)} & set(key)
        assert {key[o] for o in orbit} == {key[render(t)]}
    # different orbits never share a key: the number of keys equals the number of orbits
    orbits = {frozenset(render(o) for o in _swap_orbit(t)) for t in trees}
    assert len(set(key.values())) == len(orbits)


def test_canonical_classes_keep_the_value():
    exprs = all_expressions((2, 3, 5, 7))
    for level in ("commutative", "associative"):
        value_of = {}
        for tree, value in exprs.values():
            assert value_of.setdefault(canonical(tree, level), value) == value


# --------------------------------------------------------------------------- prompts and SFT data


def test_prompts():
    p = CountdownProblem(22, (3, 5, 7))
    base = make_prompt(p, "base")
    assert "Using the numbers [3, 5, 7], create an equation that equals 22." in base
    assert base.endswith("<think>")
    assert make_prompt(p, "compact") == "Make 22 from [3, 5, 7].\n"
    with pytest.raises(ValueError, match="unknown template"):
        make_prompt(p, "chat")


def test_biased_weights_and_sft_examples():
    sols = solve((3, 5, 7), 22)
    w = biased_solution_weights(sols, (3, 5, 7), decay=1.0)
    assert math.isclose(sum(w), 1.0) and len(set(w)) == len(w)
    assert biased_solution_weights(sols, (3, 5, 7), decay=0.0) == [0.25] * 4
    with pytest.raises(ValueError, match="decay"):
        biased_solution_weights(sols, (3, 5, 7), decay=-1)
    probs = generate_problems(20, seed=0, min_solutions=2)
    ex = sft_examples(probs, per_problem=3, seed=0)
    assert len(ex) == 60
    for e in ex:
        p = CountdownProblem(e["target"], tuple(e["nums"]))
        assert e["prompt"] == make_prompt(p, "compact")
        assert countdown_reward(e["completion"], p.nums, p.target) == 1.0
        assert " " not in e["completion"]
    with pytest.raises(ValueError, match="no solution"):
        sft_examples([CountdownProblem(30, (1, 1, 1))], per_problem=1)


# --------------------------------------------------------------------------- Table 3 metrics


def test_width_and_average_mode_hand_worked():
    counts = [0, 1, 2, 3, 5, 1]
    assert diversity_width(counts) == 3
    assert average_mode(counts) == pytest.approx((2 + 3 + 5) / 3)
    assert diversity_width([0, 1, 1]) == 0 and math.isnan(average_mode([0, 1, 1]))
    with pytest.raises(ValueError, match="counts must be a sequence of integers >= 0"):
        diversity_width([1, -1])


def test_table3_metrics_on_hand_worked_samples():
    p1, p2, p3 = CountdownProblem(22, (3, 5, 7)), CountdownProblem(9, (2, 2, 5)), CountdownProblem(24, (1, 3, 4, 6))
    s1 = [
        "<answer>3*5+7</answer>",
        "<answer>5*3+7</answer>",  # commuted: distinct string, same commutative class
        "<answer>7+3*5</answer>",  # commuted again
        "<answer>(3*5)+7</answer>",  # redundant parentheses: same tree as the first
        "<answer>3+5+7</answer>",  # wrong
        "nothing",
    ]
    s2 = ["<answer>2+2+5</answer>", "<answer>2+(2+5)</answer>", "<answer>5+2+2</answer>"]
    s3 = ["<answer>6/(1-3/4)</answer>", "<answer>6/(1-3/4)</answer>"]
    assert distinct_correct(s1, p1, "string") == {"3*5+7", "5*3+7", "7+3*5", "(3*5)+7"}
    assert len(distinct_correct(s1, p1, "tree")) == 3
    assert len(distinct_correct(s1, p1, "commutative")) == 1
    assert len(distinct_correct(s2, p2, "tree")) == 3
    assert len(distinct_correct(s2, p2, "commutative")) == 2  # 2+(2+5) and (5+2)+2 are one swap orbit
    assert len(distinct_correct(s2, p2, "associative")) == 1
    m = table3_metrics([s1, s2, s3], [p1, p2, p3])
    assert m["tree"]["counts"] == [3, 3, 1]
    assert m["tree"]["width"] == 2 and m["tree"]["average_mode"] == 3.0
    assert m["commutative"]["counts"] == [1, 2, 1]
    assert m["commutative"]["width"] == 1 and m["commutative"]["average_mode"] == 2.0
    assert m["associative"]["width"] == 0 and math.isnan(m["associative"]["average_mode"])
    assert m["string"]["width_share"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="lengths differ: 1 samples, 2 problems"):
        table3_metrics([s1], [p1, p2])
    with pytest.raises(ValueError, match="unknown level"):
        table3_metrics([s1], [p1], levels=("ring",))


def test_answer_embedder_passes_the_answer_content():
    seen = []

    def base(texts):
        seen.append(list(texts))
        return torch.ones(len(texts), 3)

    out = AnswerEmbedder(base)(["<answer>3+5</answer>", "no tags", "<answer></answer>"])
    assert out.shape == (3, 3)
    assert seen == [["3+5", "no tags", "<answer></answer>"]]
    with pytest.raises(ValueError, match="callable"):
        AnswerEmbedder("hashed")


def test_answer_embedder_modulo_commutativity():
    seen = []

    def base(texts):
        seen.append(list(texts))
        return torch.ones(len(texts), 3)

    AnswerEmbedder(base, level="commutative")(
        ["<answer>3+5*2</answer>", "<answer>2*5+3</answer>", "<answer>3+*</answer>", "plain"]
    )
    first, swapped, unparsable, plain = seen[0]
    assert first == swapped  # a+b and b+a are one solution to the kernel
    assert unparsable == "3+*" and plain == "plain"
    with pytest.raises(ValueError, match="canonical level"):
        AnswerEmbedder(base, level="modulo")
