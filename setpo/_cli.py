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


def run_interruptible(
    main: Callable[[list[str]], int], argv: list[str], prog: str, kept: str, *, resumes: bool = False
) -> int:
    """``main(argv)``; Ctrl-C ends in one line naming what was ``kept`` and the command that reruns (exit 130).

    ``resumes``: the command picks up what was kept, so the line says "resume with" and leaves ``--overwrite`` out.
    """
    try:
        return main(argv)
    except KeyboardInterrupt:
        args = [x for x in argv if x != "--overwrite"] if resumes else argv
        again = " ".join([prog, *map(shlex.quote, args)])
        print(f"\ninterrupted (SIGINT): {kept}; {'resume' if resumes else 'run again'} with: {again}", file=sys.stderr)
        return 130
