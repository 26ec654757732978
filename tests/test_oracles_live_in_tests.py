"""Test oracles live in tests/references.py; the package ships only production code (plus Algorithm 1 itself)."""

from __future__ import annotations

import re
from pathlib import Path

import setpo

API_REFERENCES = {"loo_credits_reference"}  # the literal Algorithm 1 of the paper, part of the API


def test_the_package_defines_no_other_reference_implementations():
    root = Path(setpo.__file__).parent
    found = {
        f"{path.relative_to(root)}:{name}"
        for path in root.rglob("*.py")
        for name in re.findall(r"^def (\w+_reference)\(", path.read_text(), flags=re.M)
        if name not in API_REFERENCES
    }
    assert not found, f"move these test oracles to tests/references.py: {sorted(found)}"
