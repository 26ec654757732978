"""Countdown (Pang et al. 2023; TinyZero): reach a target with + - * / using each given number exactly once.

The task lives here, one idea per module (the exhaustive solver, the problem generator and the biased SFT data
of the CPU experiments are in the repository's `reproduce/tasks/countdown_problems.py`):

* `expressions`: parsing arithmetic text without `eval`, exact values, rendering, canonical forms;
* `problems`: the problem type and a loader for TinyZero JSONL/Parquet files;
* `prompts`: TinyZero's "base" template (the paper's) and a compact one for tiny models;
* `reward`: the <answer> tag and the rule reward (1.0 correct, 0.1 format score, 0 without an answer) under
  TinyZero's `compute_score` rule (the default) or the project's earlier "lenient" rule, its TRL forms and the
  evaluation checker;
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
from setpo.tasks.countdown.problems import CountdownProblem, load_problems
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
    "answer_completion",
    "average_mode",
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
    "leaves",
    "load_problems",
    "make_prompt",
    "parse_expression",
    "problem_of",
    "render",
    "score_answer",
    "table3_metrics",
    "tinyzero_value",
    "trl_countdown_reward",
    "trl_countdown_reward_lenient",
    "trl_reward_for",
]
