"""The scheduler as pure logic: injected sensor, clock and plant, hand-computed expectations."""

from __future__ import annotations

import math

import pytest

from edgeinf.errors import SensorError
from edgeinf.power.knobs import ThermalLimit
from edgeinf.power.profiles import Config, ConfigProfile, Profile
from edgeinf.power.scheduler import Request, Scheduler, lowest_power_config
from edgeinf.power.sensors import PowerSample, TempSample
from edgeinf.power.thermal import ThermalModel

A = Config("full", "tflite", 1)
B = Config("short", "tflite", 2)


def two_config_profile(quality_a=1.0, quality_b=0.8) -> Profile:
    # idle 1 W; A: 10 ms at 2 W (10 mJ above idle); B: 5 ms at 3 W (10 mJ above idle)
    return Profile(
        (ConfigProfile(A, 10.0, 11.0, 2000.0, quality_a), ConfigProfile(B, 5.0, 6.0, 3000.0, quality_b)),
        idle_mw=1000.0,
        estimated=False,
        sensor="test",
    )


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Plant:
    """A power sensor whose reading is the plant's power over the last period (truth x factor)."""

    name = "plant"

    def __init__(self, clock, profile, dynamic_factor=1.0, idle_offset_mw=0.0):
        self.clock = clock
        self.profile = profile
        self.factor = dynamic_factor
        self.idle_offset = idle_offset_mw
        self.power_mw = profile.idle_mw + idle_offset_mw
        self.fail = None
        self.frozen_t = None

    def run(self, config, rate_per_s):
        entry = self.profile.entry(config)
        served = min(rate_per_s, entry.capacity_per_s)
        self.power_mw = (
            self.profile.idle_mw
            + self.idle_offset
            + self.factor * served * entry.dynamic_energy_uj(self.profile.idle_mw) / 1000
        )
        return served

    def read(self):
        if self.fail:
            raise self.fail
        t = self.frozen_t if self.frozen_t is not None else self.clock()
        return PowerSample(t, self.power_mw, self.name)


def closed_loop(budget_w, **plant_options):
    """A scheduler with a budget of ``budget_w`` watts whose sensor is a `Plant` of
    two_config_profile() (``plant_options`` its errors), on a fake clock."""
    clock = Clock()
    profile = two_config_profile()
    plant = Plant(clock, profile, **plant_options)
    return Scheduler(budget_w, profile=profile, sensor=plant, clock=clock), plant, clock


def drive(scheduler, plant, clock, periods, period_s=0.25):
    decisions = []
    for _ in range(periods):
        decision = scheduler.step()
        served = plant.run(decision.config, decision.rate_per_s)
        scheduler.record(0.01, served * period_s)
        decisions.append(decision)
        clock.t += period_s
    return decisions


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"budget_w": 0}, "budget_w must be positive"),
        ({"budget_w": 2, "window_s": 0.1, "control_period_s": 0.25}, "control_period_s <= window_s"),
        ({"budget_w": 2, "gain": 0}, "gain must be in"),
        ({"budget_w": 2, "sensor_lag_periods": 0}, "sensor_lag_periods must be >= 1"),
        ({"budget_w": 2, "margin": 0.7}, "margin must be in"),
    ],
)
def test_bad_arguments_name_expected_and_given(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Scheduler(profile=two_config_profile(), **kwargs)


def test_choice_and_rate_match_hand_computation():
    clock = Clock()
    scheduler = Scheduler(2.0, profile=two_config_profile(), clock=clock)  # open loop: no sensor
    decision = scheduler.step()
    # target 2.0 W x (1 - 0.02) = 1960 mW; 960 mW above idle / 10 mJ = 96/s for both; both can serve it,
    # so the better variant (A, quality 1.0) is chosen
    assert decision.config == A
    assert decision.rate_per_s == pytest.approx(96.0)
    assert decision.predicted_mw == pytest.approx(1960.0)
    decision = scheduler.set_budget(3.0)
    # 2940 mW: 194/s allowed; A can do only 100/s, B 194/s: B serves more
    assert decision.config == B
    assert decision.rate_per_s == pytest.approx(194.0)


def test_demand_below_capacity_keeps_the_better_variant():
    clock = Clock()
    scheduler = Scheduler(3.0, profile=two_config_profile(), clock=clock)
    scheduler.step()
    for _ in range(8):  # 60 arrivals/s reported: A (100/s within 3 W) serves it all
        scheduler.record_arrivals(15)
        clock.t += 0.25
        decision = scheduler.step()
    assert decision.config == A


def test_feedback_corrects_a_profile_30_percent_low():
    scheduler, plant, clock = closed_loop(2.0, dynamic_factor=1.3)
    drive(scheduler, plant, clock, 40)
    assert scheduler.correction == pytest.approx(1.3, rel=0.03)
    assert plant.power_mw <= 2000.0 * 1.01


def test_token_bucket_removes_an_idle_error_the_profile_does_not_know():
    scheduler, plant, clock = closed_loop(2.0, idle_offset_mw=150.0)
    powers = []
    for _ in range(120):
        drive(scheduler, plant, clock, 1)
        powers.append(plant.power_mw)
    tail = powers[-40:]
    assert sum(tail) / len(tail) <= 2000.0 * 1.01
    assert sum(tail) / len(tail) >= 2000.0 * 0.95  # and does not over-correct into idleness


def test_sensor_failure_falls_back_in_the_same_period_and_recovers():
    scheduler, plant, clock = closed_loop(3.0)
    assert drive(scheduler, plant, clock, 8)[-1].config == B
    plant.fail = SensorError("ina3221: sensor file is gone")
    decision = drive(scheduler, plant, clock, 1)[0]
    assert decision.fallback and "gone" in decision.reason
    assert decision.config == lowest_power_config(plant.profile) == A
    # pessimistic rate: 2940 mW target, 1.25 x 10 mJ per inference above idle -> 155/s, capped by A's 100/s
    assert decision.rate_per_s == pytest.approx(100.0)
    plant.fail = None
    decision = drive(scheduler, plant, clock, 1)[0]
    assert not decision.fallback
    report = scheduler.report()
    assert (report.fallback_periods, report.sensor_failures) == (1, 1)


def test_nan_and_frozen_readings_count_as_failures():
    scheduler, plant, clock = closed_loop(3.0)
    drive(scheduler, plant, clock, 4)
    plant.power_mw = math.nan
    assert drive(scheduler, plant, clock, 1)[0].fallback
    plant.power_mw = 2000.0
    assert not drive(scheduler, plant, clock, 1)[0].fallback
    plant.frozen_t = clock.t  # timestamp stops advancing
    flags = [d.fallback for d in drive(scheduler, plant, clock, 4)]
    assert flags == [False, False, False, True]  # tolerated for two periods, then a failure


class Thermometer:
    name = "cpu-thermal"

    def __init__(self, clock, temp_mc):
        self.clock = clock
        self.temp_mc = temp_mc
        self.fail = False

    def read(self):
        if self.fail:
            raise SensorError("thermal_zone0/temp: sensor file is gone")
        return TempSample(self.clock(), self.temp_mc, self.name)


def test_thermal_limit_caps_the_target_by_the_model_and_fails_safe():
    clock = Clock()
    profile = two_config_profile()
    thermo = Thermometer(clock, 50_000)
    limit = ThermalLimit(trip_mc=80_000, margin_mc=3_000)
    model = ThermalModel(r_k_per_w=10.0, tau_s=30.0)
    scheduler = Scheduler(2.0, profile=profile, clock=clock, thermal=thermo, thermal_limit=limit, thermal_model=model)
    assert scheduler.step().rate_per_s == pytest.approx(96.0)  # cool: the budget binds
    thermo.temp_mc = 77_000  # the board sits at the limit
    for _ in range(400):
        clock.t += 0.25
        decision = scheduler.step()
    assert model.temp_c == pytest.approx(77.0, abs=0.2)
    assert "thermal limit binds" in decision.reason
    # the board at the limit must not heat further: the target drops below the budget's
    assert decision.target_mw < 0.9 * 2000.0
    thermo.temp_mc = 85_000  # above the limit: nothing is admitted
    for _ in range(8):
        clock.t += 0.25
        decision = scheduler.step()
    assert decision.rate_per_s == 0.0
    thermo.fail = True
    clock.t += 0.25
    assert scheduler.step().fallback
    assert scheduler.report().thermal_backoff_periods > 400


def test_lower_budget_discards_saved_energy_and_replans_at_once():
    scheduler, plant, clock = closed_loop(3.0)
    drive(scheduler, plant, clock, 20)
    decision = scheduler.set_budget(1.5)
    # (1470 - 1000) mW / 10 mJ = 47/s: no tokens carried over from the 3 W budget
    assert decision.rate_per_s == pytest.approx(47.0, rel=0.02)
    assert decision.timestamp_s == clock.t


def test_requests_by_priority_rate_and_deadline():
    clock = Clock()
    scheduler = Scheduler(2.0, profile=two_config_profile(), clock=clock)  # 96/s of A
    scheduler.step()
    scheduler.submit(Request(deadline_s=10.0, priority=0, payload="low"))
    scheduler.submit(Request(deadline_s=10.0, priority=5, payload="high"))
    scheduler.submit(Request(deadline_s=0.005, priority=9, payload="too late"))  # A needs 10 ms
    request, config, submitted = scheduler.next_request()
    assert (request.payload, config, submitted) == ("high", A, 0.0)
    assert scheduler.next_request() is None  # the admission rate allows the next one ~10.4 ms later
    assert scheduler.next_admission_s() == pytest.approx(1 / 96.0)
    clock.t = 1 / 96.0
    assert scheduler.next_request()[0].payload == "low"
    assert scheduler.report().dropped == 1


def test_full_queue_drops_and_counts():
    clock = Clock()
    scheduler = Scheduler(2.0, profile=two_config_profile(), clock=clock, max_queue=2)
    scheduler.step()
    results = [scheduler.submit(Request(deadline_s=5.0, payload=i)) for i in range(4)]
    assert results == [True, True, False, False]
    assert scheduler.report().dropped == 2


def test_report_counts_measured_windows_over_budget_and_latency_percentiles():
    clock = Clock()
    profile = two_config_profile()
    # a reading describes the period that just ended; the one at t=0 describes nothing yet
    readings = iter([1900.0] * 5 + [2200.0] * 4 + [2050.0] * 4)

    class Scripted:
        name = "scripted"

        def read(self):
            return PowerSample(clock(), next(readings), self.name)

    scheduler = Scheduler(2.0, 1.0, profile=profile, sensor=Scripted(), clock=clock)
    for i in range(13):
        scheduler.step()
        scheduler.record(0.001 * (i + 1))
        clock.t += 0.25
    report = scheduler.report()
    # windows of 1 s: 1.9 W, 2.2 W (over by 10 %), 2.05 W (over by 2.5 %: within tolerance)
    assert (report.windows, report.windows_over_budget) == (3, 1)
    assert report.worst_window_w == pytest.approx(2.2)
    assert (report.latency_p50_ms, report.latency_p99_ms) == (7.0, 13.0)
    assert report.served == 13
    # trapezoid over the 13 samples (t = 0 .. 3 s)
    assert report.energy_j == pytest.approx(
        1.9 + 0.25 * (1.9 + 2.2) / 2 + 0.75 * 2.2 + 0.25 * (2.2 + 2.05) / 2 + 0.75 * 2.05
    )
    assert report.mean_power_w == pytest.approx(report.energy_j / 3.0)


def test_budget_below_idle_admits_nothing():
    scheduler = Scheduler(0.5, profile=two_config_profile(), clock=Clock())
    decision = scheduler.step()
    assert decision.rate_per_s == 0.0 and "idle" in decision.reason
    assert not scheduler.admit()
    assert scheduler.next_admission_s() == math.inf


def test_admit_before_step_is_an_error():
    with pytest.raises(RuntimeError, match="step"):
        Scheduler(2.0, profile=two_config_profile(), clock=Clock()).admit()
