"""The adapter's verl version check: the pinned version passes, any other is refused (or warned about on request)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from setpo.integrations.verl.version import OVERRIDE_ENV, VERL_VERSION, check_verl_version, installed_verl_version

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_verl_is_the_pinned_one():
    assert installed_verl_version() == VERL_VERSION == "0.9.1"
    assert check_verl_version() == VERL_VERSION


@pytest.mark.parametrize("other", ["0.9.0", "0.9.2", "0.10.0", "0.9.1.dev0"])
def test_other_versions_are_refused(other, monkeypatch):
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    with pytest.raises(RuntimeError, match=f"supports verl 0.9.1 only, found verl {other}.*{OVERRIDE_ENV}=1"):
        check_verl_version(other)


def test_the_override_turns_the_refusal_into_a_warning(monkeypatch):
    monkeypatch.setenv(OVERRIDE_ENV, "1")
    with pytest.warns(RuntimeWarning, match="found verl 0.10.0"):
        assert check_verl_version("0.10.0") == "0.10.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_verl_version(VERL_VERSION)  # the pinned version warns about nothing


def test_the_verl_extra_pins_the_same_version():
    line = re.search(r"^verl = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert line is not None, "pyproject.toml has no verl extra"
    assert f'"verl=={VERL_VERSION}"' in line.group(1).split(", ")
