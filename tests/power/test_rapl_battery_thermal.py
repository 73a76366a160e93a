"""RAPL counters (wrap, root-only), batteries, thermal zones, integration, stuck readings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeinf.errors import SensorError
from edgeinf.power import discover
from edgeinf.power.sensors import (
    EnergyMeter,
    PowerSample,
    StuckGuard,
    Sysfs,
    batteries,
    counter_delta,
    find_zone,
    integrate_energy_uj,
    rapl_zones,
    thermal_zones,
)

from .conftest import failing_opener, permission_denied

RANGE = 262_143_328_850  # a typical max_energy_range_uj


class FakeClock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, dt):
        self.t += dt


def _rapl(tree, energy_uj, max_range=RANGE):
    base = "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0"
    tree.write(f"{base}/name", "package-0")
    tree.write(f"{base}/energy_uj", energy_uj)
    tree.write(f"{base}/max_energy_range_uj", max_range)
    tree.write(f"{base}/constraint_0_power_limit_uw", 65_000_000)
    tree.write(f"{base}/intel-rapl:0:0/name", "core")
    tree.write(f"{base}/intel-rapl:0:0/energy_uj", 5)
    tree.write(f"{base}/intel-rapl:0:0/max_energy_range_uj", max_range)
    tree.link("sys/class/powercap/intel-rapl:0", base)
    tree.link("sys/class/powercap/intel-rapl:0:0", f"{base}/intel-rapl:0:0")
    return tree.root / base


def test_rapl_power_from_counter_delta_and_wrap(fake_sys):
    zone = _rapl(fake_sys, RANGE - 1_000_000)
    clock = FakeClock()

    def sleep(dt):  # priming sleep: 0.05 s at 20 W
        clock.advance(dt)
        (zone / "energy_uj").write_text(f"{RANGE - 1_000_000 + 1_000_000}\n")

    sensors, unavailable = rapl_zones(Sysfs(fake_sys.root), clock, sleep)
    assert [s.name for s in sensors] == ["rapl:package-0"]  # the core sub-domain is inside the package
    assert unavailable == []
    sensor = sensors[0]
    first = sensor.read()
    assert first.power_mw == pytest.approx(20_000.0)
    # the counter wraps: from RANGE to 3_000_000 over 0.5 s = 3 J + 0 => 6 W
    clock.advance(0.5)
    (zone / "energy_uj").write_text("3000000\n")
    second = sensor.read()
    assert second.power_mw == pytest.approx(6000.0)
    assert second.energy_uj == 4_000_000  # unwrapped cumulative since the first read


def test_rapl_rate_limits_reads_below_min_interval(fake_sys):
    zone = _rapl(fake_sys, 0)
    clock = FakeClock()
    sensor = rapl_zones(Sysfs(fake_sys.root), clock, lambda dt: clock.advance(dt))[0][0]
    first = sensor.read()
    clock.advance(0.01)
    (zone / "energy_uj").write_text("999999\n")
    assert sensor.read() is first  # 10 ms: too short for RAPL, previous sample returned


def test_rapl_root_only_is_reported_with_the_reason(fake_sys):
    zone = _rapl(fake_sys, 10)
    opener = failing_opener(fake_sys.root / "sys/class/powercap/intel-rapl:0/energy_uj", permission_denied(zone))
    sensors, unavailable = rapl_zones(Sysfs(fake_sys.root, opener))
    assert sensors == []
    assert unavailable[0][0] == "rapl:package-0"
    assert "root only since Linux 5.10" in unavailable[0][1]
    found = discover(fake_sys.root, vcgencmd=None, opener=opener)
    assert found.total is None
    assert any("5.10" in reason for _, reason in found.unavailable)


@given(st.integers(0, 10**6), st.integers(0, 10**6 - 1), st.integers(1, 10**6))
def test_counter_delta_recovers_one_wrap(start, increase, max_range):
    start %= max_range
    increase %= max_range
    current = (start + increase) % max_range
    assert counter_delta(start, current, max_range) == increase


def test_battery_power_now_and_current_times_voltage_with_driver_sign(fake_sys):
    fake_sys.write("sys/class/power_supply/BAT0/type", "Battery")
    fake_sys.write("sys/class/power_supply/BAT0/status", "Discharging")
    fake_sys.write("sys/class/power_supply/BAT0/current_now", -1_250_000)  # negative: discharging (ABI)
    fake_sys.write("sys/class/power_supply/BAT0/voltage_now", 7_400_000)
    fake_sys.write("sys/class/power_supply/BAT1/type", "Battery")
    fake_sys.write("sys/class/power_supply/BAT1/status", "Charging")
    fake_sys.write("sys/class/power_supply/BAT1/power_now", 4_500_000)
    fake_sys.write("sys/class/power_supply/AC/type", "Mains")
    fake_sys.write("sys/class/power_supply/ucsi-source-psy-USBC000:001/type", "Battery")
    found = batteries(Sysfs(fake_sys.root))
    assert [b.name for b in found] == ["battery:BAT0", "battery:BAT1"]
    bat0, bat1 = (b.read() for b in found)
    assert bat0.power_mw == pytest.approx(9250.0)
    assert (bat0.current_ma, bat0.voltage_mv, bat0.status) == (1250.0, 7400.0, "Discharging")
    assert (bat1.power_mw, bat1.status) == (4500.0, "Charging")


def test_thermal_zones_by_type_case_insensitive(fake_sys):
    fake_sys.thermal_zone(0, "AO-therm", 38500)
    fake_sys.thermal_zone(1, "CPU-therm", 47000)
    sysfs = Sysfs(fake_sys.root)
    assert [z.name for z in thermal_zones(sysfs)] == ["AO-therm", "CPU-therm"]
    assert find_zone(sysfs, "cpu").read().temp_mc == 47000
    with pytest.raises(SensorError, match=r"no thermal zone of type 'gpu'.*AO-therm"):
        find_zone(sysfs, "gpu")


def test_trapezoid_energy_on_uneven_samples_matches_the_integral():
    # P(t) = 1000 + 500 t mW over 0..4 s, sampled unevenly: integral = 4000 + 4000 = 8000 mJ
    times = [0.0, 0.1, 0.2, 0.3, 2.0, 4.0]
    samples = [PowerSample(t, 1000 + 500 * t, "x") for t in times]
    assert integrate_energy_uj(samples) == pytest.approx(8_000_000.0)
    mean_times_duration = sum(s.power_mw for s in samples) / len(samples) * 4.0 * 1000
    assert abs(mean_times_duration - 8_000_000.0) > 1_000_000  # what averaging samples would give
    meter = EnergyMeter()
    for sample in samples:
        meter.add(sample)
    assert meter.energy_uj == pytest.approx(8_000_000.0)
    assert meter.mean_power_mw == pytest.approx(2000.0)
    with pytest.raises(ValueError, match="older"):
        meter.add(PowerSample(1.0, 5.0, "x"))


def test_energy_meter_gap_skips_the_hole():
    meter = EnergyMeter()
    meter.add(PowerSample(0.0, 1000.0, "x"))
    meter.add(PowerSample(1.0, 1000.0, "x"))
    meter.gap()
    meter.add(PowerSample(5.0, 3000.0, "x"))
    meter.add(PowerSample(6.0, 3000.0, "x"))
    assert meter.energy_uj == pytest.approx(4_000_000.0)
    assert meter.duration_s == 2.0


class Scripted:
    name = "scripted"

    def __init__(self, values):
        self.values = list(values)
        self.t = 0.0

    def read(self):
        self.t += 1
        return PowerSample(self.t, self.values.pop(0), self.name)


def test_stuck_readings_are_detected():
    guard = StuckGuard(Scripted([1.0, 2.0, 2.0, 2.0, 2.0, 3.0]), max_repeats=4)
    assert [guard.read().power_mw for _ in range(3)] == [1.0, 2.0, 2.0]
    guard.read()  # third identical
    with pytest.raises(SensorError, match="stuck at 2.0 mW for 4 reads"):
        guard.read()


def test_nan_power_is_rejected(fake_sys):
    fake_sys.hwmon(0, "platform/x", {"name": "ina219", "power1_input": 1})
    from edgeinf.power.sensors.base import check_power_mw

    with pytest.raises(SensorError, match="implausible"):
        check_power_mw(math.nan, "x")
