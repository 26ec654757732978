"""Countdown (Pang et al. 2023; TinyZero): reach a target with + - * / using each given number exactly once.

The whole task lives here, one idea per module:

* `expressions`: parsing arithmetic text without `eval`, exact values, rendering, canonical forms;
* `solver`: every expression tree over the numbers, the solutions of a problem, reachable targets;
* `problems`: the problem type, a generator of solvable problems, a loader for TinyZero JSONL/Parquet files;
* `prompts`: TinyZero's "base" template (the paper's) and a compact one for tiny models;
* `reward`: the <answer> tag and the rule reward (1.0 correct, 0.1 format score, 0 without an answer) under
  TinyZero's `compute_score` rule (the default) or the project's earlier "lenient" rule, its TRL forms and the
  evaluation checker;
* `sft`: supervised data with a fixed bias over solution forms;
* `diversity`: Table 3's diversity width and average mode, and the answer-only embedder.
"""

from setpo.tasks.countdown.diversity import (
    LEVELS,
    AnswerEmbedder,
    average_mode,
    countdown_diversity,
    distinct_correct,
    diversity_width,
    table3_metrics,
)
from setpo.tasks.countdown.expressions import (
    MAX_EXPRESSION_CHARS,
    OPS,
    CanonLevel,
    Expr,
    canonical,
    evaluate_expression,
    evaluate_tree,
    leaves,
    parse_expression,
    render,
)
from setpo.tasks.countdown.problems import CountdownProblem, generate_problems, load_problems
from setpo.tasks.countdown.prompts import TEMPLATES, answer_completion, countdown_prompt, make_prompt
from setpo.tasks.countdown.reward import (
    DEFAULT_RULE,
    REWARD_RULES,
    Outcome,
    RewardRule,
    check_rule,
    correct_answer,
    countdown_checker,
    countdown_reward,
    extract_answer,
    extract_tagged_answer,
    problem_of,
    score_answer,
    tinyzero_value,
    trl_countdown_reward,
    trl_countdown_reward_lenient,
    trl_reward_for,
)
from setpo.tasks.countdown.sft import biased_solution_weights, preference_key, sft_examples
from setpo.tasks.countdown.solver import all_expressions, reachable_targets, solve

__all__ = [
    "DEFAULT_RULE",
    "LEVELS",
    "MAX_EXPRESSION_CHARS",
    "OPS",
    "REWARD_RULES",
    "TEMPLATES",
    "AnswerEmbedder",
    "CanonLevel",
    "CountdownProblem",
    "Expr",
    "Outcome",
    "RewardRule",
    "all_expressions",
    "answer_completion",
    "average_mode",
    "biased_solution_weights",
    "canonical",
    "check_rule",
    "correct_answer",
    "countdown_checker",
    "countdown_diversity",
    "countdown_prompt",
    "countdown_reward",
    "distinct_correct",
    "diversity_width",
    "evaluate_expression",
    "evaluate_tree",
    "extract_answer",
    "extract_tagged_answer",
    "generate_problems",
    "leaves",
    "load_problems",
    "make_prompt",
    "parse_expression",
    "preference_key",
    "problem_of",
    "reachable_targets",
    "render",
    "score_answer",
    "sft_examples",
    "solve",
    "table3_metrics",
    "tinyzero_value",
    "trl_countdown_reward",
    "trl_countdown_reward_lenient",
    "trl_reward_for",
]
