"""Math evaluation: generation (vLLM or transformers), math-verify checking, Avg@n / pass@k, paper tables, judge."""

from setpo.eval.extract import extract_boxed, extract_boxed_all, extract_gsm8k_answer, extract_tagged_answer
from setpo.eval.generate import HFGenerator, SamplingConfig, VLLMGenerator, make_generator, render_prompt
from setpo.eval.harness import evaluate_benchmark, math_checker, reference_answers
from setpo.eval.judge import GeminiJudge, build_judge_prompt, judge_generations, parse_judge_reply, rubric_score
from setpo.eval.metrics import ks_for, pass_at_k_bruteforce, summarize
from setpo.eval.rewards import compute_score, math_accuracy_reward
from setpo.eval.tables import PAPER_COLUMNS, REPORTED, paper_average, pass1_table, pass_at_k_table
from setpo.eval.verify import MathVerifier, verify_many

__all__ = [
    "PAPER_COLUMNS",
    "REPORTED",
    "GeminiJudge",
    "HFGenerator",
    "MathVerifier",
    "SamplingConfig",
    "VLLMGenerator",
    "build_judge_prompt",
    "compute_score",
    "evaluate_benchmark",
    "extract_boxed",
    "extract_boxed_all",
    "extract_gsm8k_answer",
    "extract_tagged_answer",
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
    "verify_many",
]
