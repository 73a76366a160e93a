"""A scheduler that holds a power budget while serving as many inferences as it can.

Pure logic: it reads an injected sensor and an injected clock, and only decides (a
configuration and an admission rate); the caller runs the inferences and reports
them back. Every control period (`step`):

1. Feed-forward: each profiled configuration's power at a rate r is predicted as
   ``idle + k x r x dynamic_energy``, where ``k`` corrects the profile.
2. Feedback: ``k`` follows the ratio of measured to predicted dynamic power of the
   period the reading describes (an exponential filter), so a profile that is 30 %
   off is corrected within a few periods.
3. Energy token bucket: tokens (joules) accumulate at the budget rate and are spent
   by the measured power; overspending lowers the next target, saving allows a
   small burst (at most ``margin`` of a window's energy). It removes steady error.
4. Thermal limit: a first-order thermal model learnt online (`thermal.ThermalModel`)
   gives the most power that keeps the predicted temperature under the limit
   (`knobs.ThermalLimit`: a margin below the trip point); the target is the lower of
   that and the budget. Throttling seen on the board corrects the model at once.
5. Choice: the configuration that serves the most of the estimated demand within the
   target; among near-ties the higher ``quality`` variant, then the lower power.
6. Sensor failure (an error, NaN, or a reading that stopped advancing): in that same
   step, fall back to the lowest-power configuration at a rate the profile says is
   safe with a pessimistic correction, until readings return.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..errors import SensorError
from .knobs import ThermalLimit
from .profiles import Config, Profile
from .sensors.base import Clock, EnergyMeter, PowerSample, PowerSensor, TempSensor
from .sensors.throttle import ThrottleSensor
from .thermal import ThermalModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """What to run until the next control period.

    Attributes:
        config: the configuration to run.
        rate_per_s: the admission rate (inferences per second); requests above it wait or drop.
        target_mw: the power the choice aims at.
        predicted_mw: the power predicted for this choice at the demand estimate.
        fallback: True when chosen without a working sensor.
        reason: a short explanation (for logs and reports).
    """

    timestamp_s: float
    config: Config
    rate_per_s: float
    target_mw: float
    predicted_mw: float
    fallback: bool
    reason: str


@dataclass(frozen=True)
class Request:
    """A unit of work submitted to the scheduler: it is served before ``deadline_s`` or dropped."""

    deadline_s: float
    priority: int = 0
    payload: Any = None


@dataclass(frozen=True)
class SchedulerReport:
    """What the scheduler did (measured by its own sensor).

    Attributes:
        windows_over_budget: budget windows whose measured mean power exceeded the budget by more than ``tolerance``.
        config_seconds: time spent in each configuration (by label).
        correction: the final profile correction factor ``k``.
    """

    duration_s: float
    budget_w: float
    window_s: float
    tolerance: float
    energy_j: float
    mean_power_w: float
    windows: int
    windows_over_budget: int
    violation_fraction: float
    worst_window_w: float
    served: int
    dropped: int
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    fallback_periods: int
    sensor_failures: int
    thermal_backoff_periods: int
    config_seconds: dict
    correction: float
    estimated: bool
    throttled_periods: int = 0
    thermal_model: Optional[dict] = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Period:
    config: Config
    duration_s: float
    served: float
    raw_dynamic_mw: float
    mixed: bool


class LatencyHistogram:
    """Latencies in 10 µs bins: exact enough for percentiles, bounded in memory."""

    def __init__(self):
        self.bins: dict[int, float] = {}
        self.count = 0.0

    def add(self, latency_s: float, count: float = 1.0) -> None:
        key = round(latency_s * 1e5)
        self.bins[key] = self.bins.get(key, 0.0) + count
        self.count += count

    def percentile_ms(self, q: float) -> float:
        if self.count <= 0:
            return math.nan
        threshold = q / 100.0 * self.count
        running = 0.0
        for key in sorted(self.bins):
            running += self.bins[key]
            if running >= threshold:
                return key / 100.0
        return max(self.bins) / 100.0


class Scheduler:
    """Chooses configuration and admission rate every control period to stay within ``budget_w``.

    Args:
        budget_w: the power budget in watts, as a mean over ``window_s``.
        window_s: the averaging window of the budget (1 s suits supplies; 0.1 s for brown-out limits).
        profile: the configurations it may choose from and what they cost.
        sensor: a power sensor; None runs open loop on the profile alone.
        clock: monotonic seconds (a virtual clock in simulation).
        control_period_s: how often `step` is expected to be called.
        thermal: a temperature sensor (a `ThermalZone`); with it the scheduler also holds a temperature limit.
        thermal_limit: the trip point and the margin below it to hold the predicted peak under
            (default: the zone's lowest passive trip point, else 80 °C, with a 3 °C margin).
        throttle: a `ThrottleSensor` (Pi firmware flags, cpufreq, Jetson trip points); a throttled
            period raises the thermal model's estimate and lowers the target in the same step.
        thermal_model: the model to learn into (default `ThermalModel()` with pessimistic priors).
        thermal_horizon_s: how far ahead the temperature is predicted; shorter reacts faster but
            overshoots more when the model is wrong.
        margin: aim this fraction below the budget (absorbs sensor noise).
        tolerance: a window counts as a violation above budget x (1 + tolerance).
        sensor_lag_periods: how many periods back the newest reading describes (1 = the last one).
        gain: filter gain of the profile correction (0..1].
        max_queue: submitted requests kept waiting at most.

    >>> sched = Scheduler(5.0, profile=prof, sensor=found.total)      # doctest: +SKIP
    >>> decision = sched.step()                                       # doctest: +SKIP
    """

    def __init__(
        self,
        budget_w: float,
        window_s: float = 1.0,
        *,
        profile: Profile,
        sensor: Optional[PowerSensor] = None,
        clock: Clock = time.monotonic,
        control_period_s: float = 0.25,
        thermal: Optional[TempSensor] = None,
        thermal_limit: Optional[ThermalLimit] = None,
        throttle: Optional[ThrottleSensor] = None,
        thermal_model: Optional[ThermalModel] = None,
        thermal_horizon_s: float = 10.0,
        margin: float = 0.02,
        tolerance: float = 0.05,
        sensor_lag_periods: int = 1,
        gain: float = 0.3,
        max_queue: int = 1000,
    ):
        if not budget_w > 0:
            raise ValueError(f"budget_w must be positive, got {budget_w!r}")
        if not 0 < control_period_s <= window_s:
            raise ValueError(f"need 0 < control_period_s <= window_s, got {control_period_s} and {window_s}")
        if not 0 < gain <= 1:
            raise ValueError(f"gain must be in (0, 1], got {gain}")
        if not 0 <= margin < 0.5:
            raise ValueError(f"margin must be in [0, 0.5), got {margin}")
        if sensor_lag_periods < 1:
            raise ValueError(f"sensor_lag_periods must be >= 1, got {sensor_lag_periods}")
        self.budget_w = float(budget_w)
        self.window_s = float(window_s)
        self.profile = profile
        self.sensor = sensor
        self.clock = clock
        self.control_period_s = float(control_period_s)
        if not thermal_horizon_s > 0:
            raise ValueError(f"thermal_horizon_s must be positive, got {thermal_horizon_s}")
        self.thermal = thermal
        self.thermal_limit = thermal_limit or (ThermalLimit.for_zone(thermal) if thermal else None)
        self.throttle = throttle
        self.thermal_model = thermal_model or ThermalModel()
        self.thermal_horizon_s = float(thermal_horizon_s)
        self.margin = margin
        self.tolerance = tolerance
        self.sensor_lag_periods = sensor_lag_periods
        self.gain = gain
        self.max_queue = max_queue

        self._idle_mw = profile.idle_mw
        self._entries = profile.entries
        # Per-configuration constants, precomputed: the plan runs every control period.
        self._index = {e.config: i for i, e in enumerate(self._entries)}
        self._dynamic_mj = [e.dynamic_energy_uj(self._idle_mw) / 1000.0 for e in self._entries]
        self._capacity = [e.capacity_per_s for e in self._entries]
        self._latency_s = [e.latency_ms / 1000.0 for e in self._entries]
        self._safest = min(self._entries, key=lambda e: (e.power_mw, e.dynamic_energy_uj(self._idle_mw)))
        self._k = 1.0
        self._tokens_j = 0.0
        self._history: deque[_Period] = deque(maxlen=max(8, sensor_lag_periods + 2))
        self._demand_per_s: Optional[float] = None
        self._last_demand_per_s = 0.0
        self._started: Optional[float] = None
        self._last_step: Optional[float] = None
        self._last_sample_t: Optional[float] = None
        self._last_fresh: Optional[float] = None
        self._decision: Optional[Decision] = None
        self._period_served = 0.0
        self._period_arrivals = 0.0
        self._period_mixed = False
        self._thermal_cap_mw = math.inf
        self._temps: deque[tuple[float, float]] = deque(maxlen=sensor_lag_periods)
        self._throttled_periods = 0
        self._throttle_error_logged = False
        # accounting
        self._meter = EnergyMeter()
        self._window_start: Optional[float] = None
        self._window_energy_j = 0.0
        self._window_budget_j = 0.0
        self._window_time_s = 0.0
        self._windows = 0
        self._windows_over = 0
        self._worst_window_w = 0.0
        self._served: float = 0
        self._dropped: float = 0
        self._fallback_periods = 0
        self._sensor_failures = 0
        self._thermal_periods = 0
        self._config_seconds: dict[str, float] = {}
        self._latency = LatencyHistogram()
        self._estimated = profile.estimated
        # requests
        self._queue: list = []
        self._sequence = itertools.count()
        self._admit_tokens = 1.0
        self._admit_t: Optional[float] = None

    # ------------------------------------------------------------------ control

    @property
    def decision(self) -> Optional[Decision]:
        """The decision in force (None before the first `step`)."""
        return self._decision

    @property
    def correction(self) -> float:
        """The factor by which measured dynamic power exceeds the profile's."""
        return self._k

    def set_budget(self, budget_w: float, now: Optional[float] = None) -> Decision:
        """Changes the budget and re-plans at once (within the current control period).

        Energy saved under the old budget is not carried into a lower one.
        """
        if not budget_w > 0:
            raise ValueError(f"budget_w must be positive, got {budget_w!r}")
        now = self.clock() if now is None else now
        lower = budget_w < self.budget_w
        self._close_window_part(now)
        self.budget_w = float(budget_w)
        if lower:
            self._tokens_j = min(self._tokens_j, 0.0)
        self._period_mixed = True
        fallback = self._decision.fallback if self._decision else False
        self._decision = self._fallback(now, "budget changed while the sensor is down") if fallback else self._plan(now)
        return self._decision

    def step(self, now: Optional[float] = None) -> Decision:
        """Runs one control period: read the sensors, correct, choose. Call every ``control_period_s``."""
        now = self.clock() if now is None else now
        if self._started is None:
            self._started = self._window_start = now
        dt = now - self._last_step if self._last_step is not None else 0.0
        if dt < 0:
            raise ValueError(f"clock went backwards: {now} after {self._last_step}")
        self._end_period(dt)
        self._last_step = now

        sample, power_failure = self._read_power(now)
        thermal_failure = self._read_thermal(now, sample)
        failure = power_failure or thermal_failure
        if failure:
            self._sensor_failures += 1
            self._fallback_periods += 1
            self._meter.gap()
            self._close_window_part(now, dt, None)
            self._decision = self._fallback(now, failure)
        else:
            if sample is not None:
                self._account(sample, now, dt)
                self._correct(sample)
            if self._decision is not None and self._decision.fallback:
                log.warning("power scheduler: sensors are back, leaving the fallback")
            self._decision = self._plan(now)
            if self._decision.target_mw >= self._thermal_cap_mw:
                self._thermal_periods += 1
        self._prune_expired(now)
        return self._decision

    def _end_period(self, dt: float) -> None:
        decision = self._decision
        if decision is None or dt <= 0:
            self._period_served = self._period_arrivals = 0.0
            return
        label = decision.config.label
        self._config_seconds[label] = self._config_seconds.get(label, 0.0) + dt
        rate = self._period_served / dt
        raw_dynamic_mw = rate * self._dynamic_mj[self._index[decision.config]]
        self._history.append(_Period(decision.config, dt, self._period_served, raw_dynamic_mw, self._period_mixed))
        arrivals_per_s = self._period_arrivals / dt
        self._last_demand_per_s = arrivals_per_s
        if self._period_arrivals > 0 or self._demand_per_s is not None:
            previous = self._demand_per_s if self._demand_per_s is not None else arrivals_per_s
            self._demand_per_s = previous + 0.3 * (arrivals_per_s - previous)
        self._period_served = self._period_arrivals = 0.0
        self._period_mixed = False

    def _read_power(self, now: float) -> tuple[Optional[PowerSample], Optional[str]]:
        if self.sensor is None:
            return None, None
        try:
            sample = self.sensor.read()
        except SensorError as exc:
            return None, f"sensor failed: {exc}"
        if not (math.isfinite(sample.power_mw) and sample.power_mw >= 0):
            return None, f"sensor returned {sample.power_mw!r} mW"
        if self._last_sample_t is None or sample.timestamp_s > self._last_sample_t:
            self._last_sample_t = sample.timestamp_s
            self._last_fresh = now
        elif (unchanged_s := now - (self._last_fresh or now)) > 2 * self.control_period_s:
            return None, f"sensor reading has not changed for {unchanged_s:.2f} s"
        self._estimated = self._estimated or sample.estimated
        return sample, None

    def _read_thermal(self, now: float, sample: Optional[PowerSample]) -> Optional[str]:
        """Feeds the thermal model and sets the power cap that keeps the predicted peak under the limit."""
        if self.thermal is None or self.thermal_limit is None:
            self._thermal_cap_mw = math.inf
            return None
        try:
            temp = self.thermal.read()
        except SensorError as exc:
            return f"thermal sensor failed: {exc}"
        if sample is not None:
            power_w = sample.power_mw / 1000.0
        else:  # open loop: the power the last decision was predicted to draw
            power_w = (self._decision.predicted_mw if self._decision else self._idle_mw) / 1000.0
        # The power reading describes the period ``sensor_lag_periods`` back; the temperature at
        # its end was read ``sensor_lag_periods - 1`` steps ago. Pair those.
        self._temps.append((now, temp.temp_mc / 1000.0))
        model = self.thermal_model
        model.observe(*self._temps[0], power_w)
        if self._throttled_now():
            self._throttled_periods += 1
            model.saw_throttling(self.thermal_limit.trip_mc / 1000.0)
        cap_w = model.max_power_w(self.thermal_limit.hold_mc / 1000.0, self.thermal_horizon_s)
        self._thermal_cap_mw = cap_w * 1000.0
        return None

    def _throttled_now(self) -> bool:
        """The throttle sensor's verdict, asked only after a period that served work (an idle core
        runs slow under on-demand governors, and with nothing running there is nothing to cool)."""
        if self.throttle is None or not self._history or self._history[-1].served <= 0:
            return False
        try:
            return self.throttle.read().throttled
        except SensorError as exc:
            if not self._throttle_error_logged:
                log.warning("power scheduler: throttle sensor failed, relying on the thermal model: %s", exc)
                self._throttle_error_logged = True
            return False

    def _account(self, sample: PowerSample, now: float, dt: float) -> None:
        self._meter.add(sample)
        power_w = sample.power_mw / 1000.0
        if dt > 0:
            self._tokens_j += (self.budget_w - power_w) * dt
            self._tokens_j = min(self._tokens_j, self.margin * self.budget_w * self.window_s)
            self._tokens_j = max(self._tokens_j, -self.budget_w * self.window_s)
        self._close_window_part(now, dt, power_w)

    def _close_window_part(self, now: float, dt: float = 0.0, power_w: Optional[float] = None) -> None:
        if self._window_start is None:
            return
        if power_w is not None and dt > 0:
            self._window_energy_j += power_w * dt
            self._window_budget_j += self.budget_w * dt
            self._window_time_s += dt
        if now - self._window_start >= self.window_s - 1e-9:
            if self._window_time_s > 0:
                mean_w = self._window_energy_j / self._window_time_s
                allowed_w = self._window_budget_j / self._window_time_s
                self._windows += 1
                self._worst_window_w = max(self._worst_window_w, mean_w)
                if mean_w > allowed_w * (1 + self.tolerance):
                    self._windows_over += 1
            self._window_start = now
            self._window_energy_j = self._window_budget_j = self._window_time_s = 0.0

    def _correct(self, sample: PowerSample) -> None:
        if len(self._history) < self.sensor_lag_periods:
            return
        period = self._history[-self.sensor_lag_periods]
        if period.mixed or period.raw_dynamic_mw < 0.05 * max(self._idle_mw, 1.0):
            return
        ratio = (sample.power_mw - self._idle_mw) / period.raw_dynamic_mw
        ratio = min(5.0, max(0.2, ratio))
        self._k += self.gain * (ratio - self._k)

    def _target_mw(self) -> float:
        budget_mw = self.budget_w * 1000.0
        target = budget_mw * (1 - self.margin)
        if self.sensor is not None:
            target += self._tokens_j / self.window_s * 1000.0
        target = min(target, budget_mw)
        return min(target, self._thermal_cap_mw)

    def _demand_high(self) -> float:
        if self._demand_per_s is None:
            return math.inf  # no arrivals reported: a saturated loop
        return 1.25 * max(self._demand_per_s, self._last_demand_per_s)

    def _budget_rate(self, i: int, target_mw: float, k: float) -> float:
        """Inferences per second of configuration i that the target allows (not capped by capacity:
        an admission rate above capacity just means running back to back)."""
        dynamic_mj = k * self._dynamic_mj[i]
        if dynamic_mj <= 0:
            return math.inf
        return max(0.0, (target_mw - self._idle_mw) / dynamic_mj)

    def _plan(self, now: float) -> Decision:
        target = self._target_mw()
        demand = self._demand_high()
        k = self._k
        current = self._index.get(self._decision.config) if self._decision and not self._decision.fallback else None
        served_by = []
        for i in range(len(self._entries)):
            rate = self._budget_rate(i, target, k)
            served_by.append((min(rate, self._capacity[i], demand), rate))
        most = max(served for served, _ in served_by)
        floor = most * 0.99 - 1e-9
        best: Optional[tuple[tuple[float, bool, float, int], int, float, float, float]] = None
        for i, (served, rate) in enumerate(served_by):
            if served < floor:
                continue
            power = self._idle_mw + k * served * self._dynamic_mj[i]
            # near-ties: the better variant, then staying put (no reload), then lower power
            key = (-self._entries[i].quality, i != current, power, i)
            if best is None or key < best[0]:
                best = (key, i, served, rate, power)
        assert best is not None, "the configuration serving the most is above the floor"
        _, i, served, rate, predicted = best
        if rate <= 0:
            reason = "target at or below idle power: admit nothing"
        elif self.thermal_limit is not None and target >= self._thermal_cap_mw:
            reason = (
                f"thermal limit binds: {target / 1000:.2f} W keeps the peak under"
                f" {self.thermal_limit.hold_mc / 1000:.1f} °C"
            )
        else:
            reason = f"max service within {target / 1000:.2f} W (k={k:.2f})"
        return Decision(now, self._entries[i].config, min(rate, 1e6), target, predicted, False, reason)

    def _fallback(self, now: float, why: str) -> Decision:
        entry = self._safest
        i = self._index[entry.config]
        pessimistic_k = max(self._k, 1.0) * 1.25
        target = self.budget_w * 1000.0 * (1 - self.margin)
        rate = min(self._budget_rate(i, target, pessimistic_k), self._capacity[i])
        predicted = self._idle_mw + pessimistic_k * min(rate, self._demand_high()) * self._dynamic_mj[i]
        if not (self._decision and self._decision.fallback):  # log the transition, not every period
            log.warning("power scheduler falls back to %s at %.1f/s: %s", entry.config.label, rate, why)
        return Decision(now, entry.config, rate, target, predicted, True, why)

    # ------------------------------------------------------------------ work

    def record(self, latency_s: float, count: float = 1.0) -> None:
        """Reports ``count`` inferences served with the given latency (request wait + run)."""
        if count <= 0:
            return
        self._period_served += count
        self._served += count
        self._latency.add(latency_s, count)

    def record_arrivals(self, count: float = 1.0) -> None:
        """Reports work that arrived (frames, requests) when not using `submit`; sets the demand estimate."""
        self._period_arrivals += count

    def record_drops(self, count: float = 1.0) -> None:
        self._dropped += count

    def admit(self, now: Optional[float] = None) -> bool:
        """True when one more inference may start now under the admission rate (token bucket)."""
        now = self.clock() if now is None else now
        decision = self._decision
        if decision is None:
            raise RuntimeError("call step() before admit()")
        if decision.rate_per_s <= 0:
            self._admit_tokens, self._admit_t = 0.0, now
            return False
        if self._admit_t is not None:
            burst = max(1.0, decision.rate_per_s * 0.02)
            self._admit_tokens = min(burst, self._admit_tokens + decision.rate_per_s * (now - self._admit_t))
        self._admit_t = now
        if self._admit_tokens >= 1.0:
            self._admit_tokens -= 1.0
            return True
        return False

    def next_admission_s(self, now: Optional[float] = None) -> float:
        """The earliest time at which `admit` can return True (inf while the rate is zero)."""
        now = self.clock() if now is None else now
        rate = self._decision.rate_per_s if self._decision else 0.0
        if rate <= 0:
            return math.inf
        if self._admit_tokens >= 1.0:
            return now
        return now + (1.0 - self._admit_tokens) / rate

    def submit(self, request: Request, now: Optional[float] = None) -> bool:
        """Queues a request; returns False (and counts a drop) when the queue is full."""
        self._period_arrivals += 1
        if len(self._queue) >= self.max_queue:
            self._dropped += 1
            return False
        now = self.clock() if now is None else now
        heapq.heappush(self._queue, (-request.priority, request.deadline_s, next(self._sequence), now, request))
        return True

    def next_request(self, now: Optional[float] = None) -> Optional[tuple[Request, Config, float]]:
        """The next request to run now, as (request, config, submitted_s); None when nothing may run yet.

        Requests that cannot finish before their deadline with the current configuration are dropped.
        """
        now = self.clock() if now is None else now
        if self._decision is None:
            raise RuntimeError("call step() before next_request()")
        self._prune_expired(now)
        if not self._queue or not self.admit(now):
            return None
        _, _, _, submitted, request = heapq.heappop(self._queue)
        return request, self._decision.config, submitted

    def _prune_expired(self, now: float) -> None:
        if not self._queue or self._decision is None:
            return
        latency_s = self._latency_s[self._index[self._decision.config]]
        kept = [item for item in self._queue if item[1] >= now + latency_s]
        if len(kept) != len(self._queue):
            self._dropped += len(self._queue) - len(kept)
            heapq.heapify(kept)
            self._queue = kept

    # ------------------------------------------------------------------ report

    def report(self) -> SchedulerReport:
        now = self._last_step if self._last_step is not None else 0.0
        duration = now - self._started if self._started is not None else 0.0
        windows = self._windows
        return SchedulerReport(
            duration_s=duration,
            budget_w=self.budget_w,
            window_s=self.window_s,
            tolerance=self.tolerance,
            energy_j=self._meter.energy_uj / 1e6,
            mean_power_w=self._meter.mean_power_mw / 1000.0 if self._meter.duration_s > 0 else math.nan,
            windows=windows,
            windows_over_budget=self._windows_over,
            violation_fraction=self._windows_over / windows if windows else 0.0,
            worst_window_w=self._worst_window_w,
            served=int(round(self._served)),
            dropped=int(round(self._dropped)),
            latency_p50_ms=self._latency.percentile_ms(50),
            latency_p95_ms=self._latency.percentile_ms(95),
            latency_p99_ms=self._latency.percentile_ms(99),
            fallback_periods=self._fallback_periods,
            sensor_failures=self._sensor_failures,
            thermal_backoff_periods=self._thermal_periods,
            config_seconds=dict(self._config_seconds),
            correction=self._k,
            estimated=self._estimated,
            throttled_periods=self._throttled_periods,
            thermal_model=asdict(self.thermal_model.params) if self.thermal is not None else None,
        )


def lowest_power_config(profile: Profile) -> Config:
    """The configuration with the lowest running power (the scheduler's fallback)."""
    return min(profile.entries, key=lambda e: (e.power_mw, e.dynamic_energy_uj(profile.idle_mw))).config
