"""Tasks: prompt generators, answer checkers and rewards (import from the submodules)."""
