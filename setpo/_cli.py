"""The package's command lines share one parser class, so every usage error is one line."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line: ``prog: error: message (see --help)``, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def run_interruptible(main: Callable[[list[str]], int], argv: list[str], prog: str, kept: str) -> int:
    """``main(argv)``; Ctrl-C ends in one line naming what was ``kept`` and the command that reruns (exit 130)."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        again = " ".join([prog, *map(shlex.quote, argv)])
        print(f"\ninterrupted (SIGINT): {kept}; run again with: {again}", file=sys.stderr)
        return 130
