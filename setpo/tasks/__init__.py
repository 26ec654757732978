"""Tasks, one package or module each: prompts, answer reading, checking and rewards (import from the submodules).

* `math`: problems with one final answer (GSM8K, MATH, AIME, ...), checked with math-verify;
* `countdown`: Countdown (TinyZero), with its Table 3 diversity metric;
* `list_selection`: GAPO's list-selection task.
"""
