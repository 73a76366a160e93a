"""The thermal model learnt online, throttle readers, and the loop closed through a fake sysfs tree."""

from __future__ import annotations

import math

import pytest

from edgeinf.errors import SensorError
from edgeinf.power import simulate as sim
from edgeinf.power.knobs import ThermalLimit, cpufreq_policies
from edgeinf.power.scheduler import Scheduler
from edgeinf.power.sensors import Sysfs, TempSample, find_zone
from edgeinf.power.sensors.throttle import (
    CpufreqThrottleSensor,
    PiThrottleSensor,
    ThrottleSample,
    ZoneThrottleSensor,
)
from edgeinf.power.thermal import ThermalModel

from .conftest import make_stub


def _plant_readings(r=8.0, tau=60.0, ambient=35.0, step_c=1.0, seconds=1200, dt=0.25):
    """Exact first-order plant under a power that steps every 90 s, read with 1 °C quantisation."""
    temp, out = ambient, []
    for i in range(int(seconds / dt)):
        power = (2.5, 5.0, 3.5, 4.5)[int(i * dt // 90) % 4]
        temp += (1 - math.exp(-dt / tau)) * (ambient + r * power - temp)
        out.append(((i + 1) * dt, round(temp / step_c) * step_c, power))
    return out


def test_model_learns_r_tau_and_ambient_through_1_degree_steps():
    model = ThermalModel()
    for t, temp, power in _plant_readings():
        model.observe(t, temp, power)
    assert model.fits > 0
    assert model.r_k_per_w == pytest.approx(8.0, rel=0.10)
    assert model.tau_s == pytest.approx(60.0, rel=0.15)
    assert model.ambient_c == pytest.approx(35.0, abs=2.0)
    # the prediction it makes: steady state under 4 W
    assert model.steady_c(4.0) == pytest.approx(35.0 + 32.0, abs=2.0)


def test_model_without_excitation_keeps_its_prior_and_still_holds_the_readings():
    model = ThermalModel(r_k_per_w=10.0, tau_s=30.0)
    for i in range(2000):
        model.observe(i * 0.25, 70.0, 4.0)  # constant power: R cannot be told from the ambient
    assert model.fits == 0 and model.r_k_per_w == 10.0
    assert model.temp_c == pytest.approx(70.0, abs=0.1)
    # at the readings' steady state the cap to hold 70 °C is the present power, whatever R
    assert model.max_power_w(70.0, 10.0) == pytest.approx(4.0, rel=0.02)


def test_model_learnt_in_the_scheduler_matches_the_simulated_plant():
    trace = sim.make_trace("hot", seed=sim.HELD_OUT_SEEDS[0], duration_s=900.0)
    built = {}
    factory = sim.scheduler_factory(5.5)

    def make(sensor, thermal, clock):
        built["scheduler"] = factory(sensor, thermal, clock)
        return built["scheduler"]

    sim.simulate(trace, make)
    params = built["scheduler"].thermal_model.params
    truth = sim.PlantParams()
    assert params.r_k_per_w == pytest.approx(truth.thermal_r_k_per_w, rel=0.15)
    assert params.tau_s == pytest.approx(truth.thermal_tau_s, rel=0.15)
    assert params.ambient_c == pytest.approx(40.0, abs=3.0)
    assert built["scheduler"].report().thermal_model["tau_s"] == params.tau_s


def test_model_rejects_non_finite_readings():
    with pytest.raises(ValueError, match="finite"):
        ThermalModel().observe(0.0, math.nan, 1.0)


class _Zone:
    name = "cpu-thermal"

    def __init__(self, clock, temp_mc):
        self.clock, self.temp_mc = clock, temp_mc

    def read(self):
        return TempSample(self.clock(), self.temp_mc, self.name)


class _Throttle:
    name = "flags"

    def __init__(self, clock):
        self.clock, self.throttled = clock, False

    def read(self):
        return ThrottleSample(self.clock(), self.throttled, self.name)


def test_throttling_seen_lowers_the_target_in_the_same_step():
    clock = [0.0]
    profile = sim.synthetic_profile()
    zone = _Zone(lambda: clock[0], 60_000)  # a zone that reads cool (the wrong sensor, or a slow one)
    flags = _Throttle(lambda: clock[0])
    scheduler = Scheduler(5.5, profile=profile, clock=lambda: clock[0], thermal=zone, throttle=flags)
    for _ in range(8):
        clock[0] += 0.25
        scheduler.record_arrivals(100)
        scheduler.record(0.005, 50)
        calm = scheduler.step()
    flags.throttled = True
    clock[0] += 0.25
    scheduler.record_arrivals(100)
    scheduler.record(0.005, 50)
    seen = scheduler.step()
    assert seen.target_mw < calm.target_mw * 0.8, (calm, seen)
    assert scheduler.thermal_model.temp_c >= 80.0
    assert scheduler.report().throttled_periods == 1


def test_limit_comes_from_the_zone_trip_point(fake_sys):
    fake_sys.thermal_zone(0, "CPU-therm", 50_000)
    for k, (kind, temp) in enumerate((("active", 60_000), ("passive", 96_500), ("critical", 105_000))):
        fake_sys.write(f"sys/class/thermal/thermal_zone0/trip_point_{k}_type", kind)
        fake_sys.write(f"sys/class/thermal/thermal_zone0/trip_point_{k}_temp", temp)
    zone = find_zone(Sysfs(fake_sys.root), "cpu")
    assert zone.throttle_trip_mc() == 96_500
    assert ThermalLimit.for_zone(zone).hold_mc == 93_500
    scheduler = Scheduler(5.0, profile=sim.synthetic_profile(), thermal=zone)
    assert scheduler.thermal_limit.trip_mc == 96_500
    throttle = ZoneThrottleSensor([zone])
    assert not throttle.read().throttled
    fake_sys.write("sys/class/thermal/thermal_zone0/temp", 97_000)
    sample = throttle.read()
    assert sample.throttled and "CPU-therm" in sample.detail


def test_zone_without_trip_points_falls_back_to_80_degrees(fake_sys):
    fake_sys.thermal_zone(0, "cpu-thermal", 50_000)
    zone = find_zone(Sysfs(fake_sys.root), "cpu")
    assert ThermalLimit.for_zone(zone) == ThermalLimit(trip_mc=80_000, margin_mc=3_000)
    with pytest.raises(SensorError, match="no thermal zone reports a trip point"):
        ZoneThrottleSensor([zone])


def test_cpufreq_below_max_is_throttling(fake_sys):
    base = "sys/devices/system/cpu/cpufreq/policy0"
    for name, value in (("scaling_cur_freq", 2_400_000), ("scaling_max_freq", 2_400_000)):
        fake_sys.write(f"{base}/{name}", value)
    for name, value in (("cpuinfo_min_freq", 1_500_000), ("cpuinfo_max_freq", 2_400_000), ("affected_cpus", "0 1")):
        fake_sys.write(f"{base}/{name}", value)
    fake_sys.write(f"{base}/scaling_governor", "performance")
    sensor = CpufreqThrottleSensor(cpufreq_policies(fake_sys.root))
    assert not sensor.read().throttled
    fake_sys.write(f"{base}/scaling_cur_freq", 1_800_000)
    sample = sensor.read()
    assert sample.throttled and "1800000 of 2400000" in sample.detail


def test_pi_firmware_flags(tmp_path):
    state = tmp_path / "flags"
    state.write_text("throttled=0x0\n")
    stub = make_stub(tmp_path / "bin", "vcgencmd", f'cat "{state}"\n')
    sensor = PiThrottleSensor(str(stub), min_interval_s=0.0)
    assert not sensor.read().throttled
    state.write_text("throttled=0x50001\n")  # under-voltage now is not heat
    assert not sensor.read().throttled
    state.write_text("throttled=0x80008\n")  # soft temperature limit now
    sample = sensor.read()
    assert sample.throttled and sample.detail == "soft_temp_limit"


def test_loop_closed_in_real_time_through_a_fake_sysfs_tree(tmp_path):
    # the plant is 30x faster than a board (tau 3 s), so a few seconds show heating up to the limit
    plant = sim.SysfsPlant(tmp_path, sim.synthetic_profile(), ambient_c=40.0, tau_s=3.0)
    out = sim.run_on_sysfs_plant(
        plant,
        5.5,
        8.0,
        thermal_model=ThermalModel(tau_s=1.5, block_s=0.25, window_s=10.0),
        thermal_horizon_s=0.5,
    )
    assert out["limit"] == {"trip_mc": 80_000, "hold_mc": 77_000}  # read from the fake zone's trip point
    assert out["throttled_s"] == 0.0 and out["max_temp_c"] < 80.0
    report = out["report"]
    assert report["thermal_backoff_periods"] > 0  # the temperature limit bound, not only the budget
    late = [temp for t, temp, _, _ in out["log"] if t > 6.0]
    assert late and min(late) > 70.0  # it kept running near the limit rather than idling
