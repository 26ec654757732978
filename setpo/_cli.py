"""The package's command lines share one parser class, so every usage error is one line."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line: ``prog: error: message (see --help)``, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
