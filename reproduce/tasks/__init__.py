"""What experiments share: the tasks (data, prompts, rewards, answer embedders, start models, RL runs and
evaluation) they train and evaluate on, code the installed package does not ship.

reproduce/ has three floors: the harness (`common`, `evidence`, `contrast`, `stats`, `confirm`, `comparison`: run
folders, profiles, the CLI and the shared analyses), these tasks, and the experiments (`python -m reproduce NAME`),
each a leaf that imports no other experiment (`tests/test_experiment_leaves.py`).
"""
