"""Profiles: measurement with a sensor (trapezoid energy) or the power model, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeinf.power import PowerModel, profile
from edgeinf.power.profiles import Config, ConfigProfile, Profile
from edgeinf.power.sensors import PowerSample


class FakeTime:
    def __init__(self):
        self.wall = 0.0
        self.cpu = 0.0


class FakeRunner:
    """Each invoke takes ``ms`` of wall time and keeps ``cores`` cores busy."""

    def __init__(self, time_source, ms, cores):
        self.time = time_source
        self.ms = ms
        self.cores = cores
        self.invokes = 0
        self.closed = False

    def invoke(self):
        self.time.wall += self.ms / 1000
        self.time.cpu += self.cores * self.ms / 1000
        self.invokes += 1

    def close(self):
        self.closed = True


def _fake_load(time_source, runners):
    costs = {("short", 1): (2.0, 1.0), ("short", 2): (1.25, 2.0), ("full", 1): (8.0, 1.0), ("full", 2): (5.0, 2.0)}

    def load(path, backend, threads):
        ms, cores = costs[(path, threads)]
        runner = FakeRunner(time_source, ms, cores)
        runners.append(runner)
        return runner

    return load


def test_profile_without_sensor_uses_the_power_model_and_is_marked_estimated(tmp_path):
    clock = FakeTime()
    runners = []
    model = PowerModel(idle_mw=1500, per_core_mw=800, source="test")
    prof = profile(
        {"short": "short", "full": "full"},
        threads=(1, 2),
        power_model=model,
        quality={"short": 0.9},
        runs=10,
        warmup=2,
        load=_fake_load(clock, runners),
        clock=lambda: clock.wall,
        cpu_clock=lambda: clock.cpu,
    )
    assert prof.estimated and prof.sensor == "power-model" and prof.power_model["per_core_mw"] == 800
    assert [e.config.label for e in prof.entries] == [
        "short/tflite/t1",
        "short/tflite/t2",
        "full/tflite/t1",
        "full/tflite/t2",
    ]
    short2 = prof.entry(Config("short", "tflite", 2))
    assert short2.latency_ms == pytest.approx(1.25)
    assert short2.power_mw == pytest.approx(1500 + 2 * 800)  # two busy cores
    assert short2.dynamic_energy_uj(prof.idle_mw) == pytest.approx(1600 * 1.25)
    assert short2.quality == 0.9 and prof.entry(Config("full", "tflite", 1)).quality == 1.0
    assert all(r.invokes == 12 and r.closed for r in runners)
    path = tmp_path / "profile.json"
    prof.save(path)
    assert json.loads(path.read_text())["format_version"] == 1
    assert Profile.load(path) == prof


def test_profile_with_a_sensor_integrates_energy_over_time():
    clock = FakeTime()

    class RampSensor:
        """Power rises 100 mW per 10 ms: the trapezoid gives the exact mean of a linear ramp."""

        name = "ramp"

        def read(self):
            return PowerSample(clock.wall, 2000.0 + 10_000.0 * clock.wall, self.name)

    def sleep(dt):
        clock.wall += dt

    prof = profile(
        {"full": "full"},
        threads=(1,),
        sensor=RampSensor(),
        runs=10,
        warmup=0,
        idle_s=0.2,
        load=_fake_load(clock, []),
        clock=lambda: clock.wall,
        cpu_clock=lambda: clock.cpu,
        sleep=sleep,
    )
    assert not prof.estimated and prof.sensor == "ramp" and prof.power_model is None
    # idle sampled over t = 0 .. 0.2 s: mean of the ramp = 2000 + 10000 x 0.1 = 3000 mW
    assert prof.idle_mw == pytest.approx(3000.0)
    # then 10 runs of 8 ms from t = 0.2 s to 0.28 s: mean = 2000 + 10000 x 0.24 = 4400 mW
    assert prof.entries[0].power_mw == pytest.approx(4400.0)


def test_power_model_calibration_recovers_idle_and_per_core():
    exact = PowerModel.calibrate([(x, 1500.0 + 800.0 * x) for x in (0.0, 0.5, 1.0, 3.0)])
    assert (exact.idle_mw, exact.per_core_mw) == (pytest.approx(1500.0), pytest.approx(800.0))
    points = [(0.0, 1510.0), (1.0, 2290.0), (2.0, 3110.0), (4.0, 4690.0)]
    model = PowerModel.calibrate(points, source="UM25C on a Pi 5")
    slope, intercept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)  # independent least squares
    assert model.per_core_mw == pytest.approx(slope) and model.idle_mw == pytest.approx(intercept)
    assert PowerModel.from_dict(model.to_dict()) == model
    with pytest.raises(ValueError, match="two distinct activity levels"):
        PowerModel.calibrate([(1.0, 2000.0), (1.0, 2100.0)])
    with pytest.raises(ValueError, match="per_core_mw > 0"):
        PowerModel(idle_mw=1000, per_core_mw=0)


def test_profile_load_rejects_other_formats(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"format_version": 99}')
    with pytest.raises(ValueError, match="format_version 99 not supported; expected 1"):
        Profile.load(bad)
    bad.write_text("not json")
    with pytest.raises(ValueError, match="not a JSON profile"):
        Profile.load(bad)
    bad.write_text('{"format_version": 1, "entries": [{"config": {"variant": "x"}}]}')
    with pytest.raises(ValueError, match="missing or has a malformed field"):
        Profile.load(bad)


def test_profile_rejects_nonsense_entries():
    with pytest.raises(ValueError, match="latency must be > 0"):
        Profile((ConfigProfile(Config("x"), 0.0, 0.0, 100.0),), idle_mw=0.0, estimated=True, sensor="t")
    with pytest.raises(ValueError, match="at least one configuration"):
        Profile((), idle_mw=0.0, estimated=True, sensor="t")


def test_scaled_profile_changes_only_what_it_says():
    prof = Profile((ConfigProfile(Config("x"), 10.0, 12.0, 3000.0),), idle_mw=1000.0, estimated=False, sensor="t")
    scaled = prof.scaled(dynamic_power=1.3)
    assert scaled.entries[0].power_mw == pytest.approx(1000 + 2000 * 1.3)
    assert scaled.entries[0].latency_ms == 10.0 and scaled.idle_mw == 1000.0
