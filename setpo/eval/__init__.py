"""Math evaluation: generation (vLLM or transformers), Avg@n / pass@k, paper tables, judge.

Answers are read and checked by `setpo.tasks.math` (math) and `setpo.tasks.countdown` (Countdown).
"""

from setpo.eval.generate import HFGenerator, SamplingConfig, VLLMGenerator, make_generator, render_prompt
from setpo.eval.harness import evaluate_benchmark, math_checker, reference_answers
from setpo.eval.judge import GeminiJudge, build_judge_prompt, judge_generations, parse_judge_reply, rubric_score
from setpo.eval.metrics import ks_for, pass_at_k_bruteforce, summarize
from setpo.eval.rewards import math_accuracy_reward
from setpo.eval.tables import PAPER_COLUMNS, REPORTED, paper_average, pass1_table, pass_at_k_table

__all__ = [
    "PAPER_COLUMNS",
    "REPORTED",
    "GeminiJudge",
    "HFGenerator",
    "SamplingConfig",
    "VLLMGenerator",
    "build_judge_prompt",
    "evaluate_benchmark",
    "judge_generations",
    "ks_for",
    "make_generator",
    "math_accuracy_reward",
    "math_checker",
    "paper_average",
    "parse_judge_reply",
    "pass1_table",
    "pass_at_k_bruteforce",
    "pass_at_k_table",
    "reference_answers",
    "render_prompt",
    "rubric_score",
    "summarize",
]
