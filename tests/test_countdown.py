"""Countdown task: solver vs brute force, generator, TinyZero reward branches, extraction, canonical forms, metrics."""

from __future__ import annotations

import itertools
import json
import math
import re
from fractions import Fraction

import pytest
import torch
from bench_paths import BENCH, needs_bench  # noqa: E402

from setpo.tasks.countdown import (
    AnswerEmbedder,
    CountdownProblem,
    all_expressions,
    answer_completion,
    average_mode,
    biased_solution_weights,
    canonical,
    countdown_reward,
    distinct_correct,
    diversity_width,
    evaluate_expression,
    extract_answer,
    generate_problems,
    leaves,
    load_problems,
    make_prompt,
    parse_expression,
    problem_of,
    reachable_targets,
    render,
    score_answer,
    sft_examples,
    solve,
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


def tinyzero_reference(completion: str, nums, target, format_score=0.1, score=1.0) -> float:
    """TinyZero's rule (float eval, 1e-5 tolerance), restated for comparison on inputs both accept."""
    found = re.findall(r"<answer>(.*?)</answer>", completion, re.DOTALL)
    if not found:
        return 0.0
    eq = found[-1].strip()
    if sorted(int(x) for x in re.findall(r"\d+", eq)) != sorted(nums):
        return format_score
    if not re.match(r"^[\d+\-*/().\s]+$", eq):
        return format_score
    try:
        value = eval(eq, {"__builtins__": None}, {})
    except Exception:  # noqa: BLE001 - the reference mirrors eval's failure modes
        return format_score
    return score if abs(value - target) < 1e-5 else format_score


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
    assert extract_answer("<answer> 3 + 4 </answer>") == "3 + 4"
    assert extract_answer("<answer>1</answer> then <answer>2 * 3</answer>") == "2 * 3"  # the last one
    assert extract_answer("<answer></answer>") == ""
    assert extract_answer("no tags") is None
    assert extract_answer("<answer>3 + 4") is None
    assert extract_answer("3 + 4</answer>") is None
    assert extract_answer("<answer>1 +\n2</answer>") == "1 +\n2"
    assert extract_answer("<answer>1+2</answer>\nmore text", last_line_only=True) is None  # TinyZero's rule
    assert extract_answer("think\n<answer>1+2</answer>", last_line_only=True) == "1+2"
    with pytest.raises(ValueError, match="string"):
        extract_answer(None)


@pytest.mark.parametrize(
    "completion,expected",
    [
        ("no answer here", (0.0, "no_answer")),
        ("<answer>(3 + 5) * 7", (0.0, "no_answer")),
        ("<answer>3 + 5</answer>", (0.1, "wrong_numbers")),  # 7 missing
        ("<answer>3 + 5 * 7 + 1</answer>", (0.1, "wrong_numbers")),  # extra number
        ("<answer>3 + 3 * 7</answer>", (0.1, "wrong_numbers")),  # 3 reused, 5 unused
        ("<answer></answer>", (0.1, "wrong_numbers")),
        ("<answer>3 ** 5 * 7</answer>", (0.1, "invalid_expression")),
        ("<answer>3 // 5 * 7</answer>", (0.1, "invalid_expression")),
        ("<answer>(3 + 5 * 7</answer>", (0.1, "invalid_expression")),
        ("<answer>3 + 5 x 7</answer>", (0.1, "invalid_expression")),
        ("<answer>7 / (5 - 5) + 3</answer>", (0.1, "wrong_numbers")),
        ("<answer>3 + 5 + 7</answer>", (0.1, "wrong_value")),
        ("<answer>3 * 5 + 7</answer>", (1.0, "correct")),
        ("<answer> 7+5*3 </answer>", (1.0, "correct")),
        ("<answer>1</answer> <answer>(7 - 5 + 3) * 3</answer> <answer>3*5+7</answer>", (1.0, "correct")),
    ],
)
def test_reward_branches(completion, expected):
    assert score_answer(completion, [3, 5, 7], 22) == expected
    assert countdown_reward(completion, [3, 5, 7], 22) == expected[0]


def test_reward_division_by_zero_and_fractions():
    assert score_answer("<answer>3 / (5 - 5)</answer>", [3, 5, 5], 1) == (0.1, "invalid_expression")
    assert score_answer("<answer>6 / (1 - 3 / 4)</answer>", [1, 3, 4, 6], 24) == (1.0, "correct")
    assert score_answer("<answer>-3 + 5 * 7</answer>", [3, 5, 7], 32) == (1.0, "correct")  # unary minus, as eval


def test_reward_custom_scores_and_last_line():
    assert countdown_reward("<answer>1 + 1</answer>", [1, 1], 5, format_score=0.25) == 0.25
    assert countdown_reward("<answer>1 + 1</answer>", [1, 1], 2, score=2.0) == 2.0
    text = "<answer>1 + 1</answer>\nand then nothing"
    assert countdown_reward(text, [1, 1], 2) == 1.0
    assert countdown_reward(text, [1, 1], 2, last_line_only=True) == 0.0


def test_reward_agrees_with_tinyzero_rule_on_ordinary_answers():
    nums, target = (2, 3, 7), 13
    completions = [answer_completion(t) for t in all_expressions(nums)]
    completions += ["<answer>2 + 3</answer>", "<answer>(2 + 3</answer>", "nothing", "<answer>2*3*7*7</answer>"]
    completions += ["<answer>7 / (3 - 3) + 2</answer>", "<answer> 2 * 3 + 7 </answer>"]
    for c in completions:
        assert countdown_reward(c, nums, target) == tinyzero_reference(c, nums, target), c


def test_documented_departures_from_tinyzero():
    # TinyZero's eval accepts these; here they are not plain arithmetic on the given numbers.
    assert tinyzero_reference("<answer>3**2 - 2 + 5 - 3</answer>", [3, 2, 2, 5, 3], 9) == 1.0
    assert countdown_reward("<answer>3**2 - 2 + 5 - 3</answer>", [3, 2, 2, 5, 3], 9) == 0.1
    assert tinyzero_reference("<answer>3.5 * 2</answer>", [3, 5, 2], 7) == 1.0
    assert countdown_reward("<answer>3.5 * 2</answer>", [3, 5, 2], 7) == 0.1


def test_trl_reward_function():
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
    with pytest.raises(ValueError, match="non-negative ints"):
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
    with pytest.raises(ValueError, match="sample lists"):
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
