"""The shipped Countdown start: its checksum, its fit to the profiles that load it, and its recorded start metrics
reproduced by a fresh evaluation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from reproduce import countdown_evidence as ce
from reproduce import methods_comparison as mc
from reproduce import starts
from reproduce.common import RunDir
from reproduce.tasks import countdown as task


def test_shipped_start_matches_its_checksum_and_the_profiles_that_load_it(tmp_path):
    rec = starts.record()
    assert starts.sha256(starts.COUNTDOWN / "model.safetensors") == rec["sha256"]
    for prof in (ce.PROFILES["full"], ce.PROFILES["replication"], ce.PROFILES["quick"], mc.PROFILES["full"]):
        assert prof.start == "shipped" and starts.countdown_start(prof) == starts.COUNTDOWN
    with pytest.raises(starts.StartError, match="does not fit"):
        starts.countdown_start(dataclasses.replace(ce.PROFILES["full"], hidden_size=32))
    damaged = tmp_path / "start"
    damaged.mkdir()
    for f in starts.COUNTDOWN.iterdir():
        (damaged / f.name).write_bytes(f.read_bytes())
    (damaged / "model.safetensors").write_bytes(b"\0" * 10)
    with pytest.raises(starts.StartError, match="checksum"):
        starts.countdown_start(ce.PROFILES["full"], damaged)


def test_shipped_start_reproduces_its_recorded_metrics(tmp_path):
    rec = starts.record()
    prof = dataclasses.replace(ce.PROFILES["full"], decodings=((0.5, 0.9),))
    run = RunDir(tmp_path / "data", {"start": "check"})
    _, test = task.stage_data(run, prof)
    run.close()
    got = task.evaluate(starts.COUNTDOWN, test, prof)["T0.5_p0.9"]
    want = rec["metrics"]["T0.5_p0.9"]
    assert len(test) == rec["eval"]["n_test"] == 128
    assert want["pass@1_sd"] == pytest.approx(starts.metric_sd(np.full(128, 64), np.asarray(want["n_correct"])))
    assert abs(got["pass@k"]["1"] - want["pass@1"]) <= want["pass@1_sd"]  # within one evaluation's SD
