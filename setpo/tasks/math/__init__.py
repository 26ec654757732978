"""Math problems with one final answer: the prompt, reading the answer (last \\boxed{}), checking it with
math-verify, and the rule reward.

* `prompts`: the paper's instruction and chat prompt;
* `extract`: \\boxed{} contents, GSM8K's "####" answers, answer normalisation;
* `verify`: `MathVerifier` and `verify_many` (math-verify, the last box scored);
* `reward`: verl's `compute_score` on prepared rows.
"""

from setpo.tasks.math.extract import extract_boxed, extract_boxed_all, extract_gsm8k_answer, normalize_answer
from setpo.tasks.math.prompts import MATH_INSTRUCTION, MATH_SYSTEM, math_messages, math_prompt
from setpo.tasks.math.reward import compute_score, golds_of
from setpo.tasks.math.verify import SCORING_RULE, MathVerifier, extracted_answer, gold_to_latex, verify_many

__all__ = [
    "MATH_INSTRUCTION",
    "MATH_SYSTEM",
    "SCORING_RULE",
    "MathVerifier",
    "compute_score",
    "extract_boxed",
    "extract_boxed_all",
    "extract_gsm8k_answer",
    "extracted_answer",
    "gold_to_latex",
    "golds_of",
    "math_messages",
    "math_prompt",
    "normalize_answer",
    "verify_many",
]
