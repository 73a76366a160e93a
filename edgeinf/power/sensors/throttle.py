"""Throttling seen on the board, not predicted: the signals that the clocks are being held down.

* Raspberry Pi: the firmware flags of ``vcgencmd get_throttled`` (bits 1-3 now: frequency
  capped, throttled, soft temperature limit). Under-voltage (bit 0) is a supply problem,
  not heat, and is left out.
* Any Linux board: a cpufreq policy whose ``scaling_cur_freq`` is below its
  ``scaling_max_freq`` while work runs. With an on-demand governor an idle core is slow
  too, so this reader is only meaningful under load (the scheduler asks it only after a
  period in which it served work).
* Jetson and other SoCs whose kernel throttles: a thermal zone at or above its lowest
  passive trip point.

Every reader returns a `ThrottleSample`; a failed read raises `SensorError`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Protocol, runtime_checkable

from ...errors import SensorError
from .base import Clock
from .rpi import read_throttled
from .thermal import ThermalZone


@dataclass(frozen=True)
class ThrottleSample:
    """``throttled`` is True while the board holds its clocks down; ``detail`` says why."""

    timestamp_s: float
    throttled: bool
    source: str
    detail: str = ""


@runtime_checkable
class ThrottleSensor(Protocol):
    name: str

    def read(self) -> ThrottleSample: ...


class PiThrottleSensor:
    """``vcgencmd get_throttled``, rate limited like `PiPmicSensor` (a spawn costs milliseconds)."""

    name = "vcgencmd-get_throttled"

    def __init__(
        self,
        vcgencmd: str = "vcgencmd",
        runner=subprocess.run,
        clock: Clock = time.monotonic,
        min_interval_s: float = 0.25,
    ):
        self.vcgencmd = vcgencmd
        self.runner = runner
        self.clock = clock
        self.min_interval_s = min_interval_s
        self._last: Optional[ThrottleSample] = None

    def read(self) -> ThrottleSample:
        now = self.clock()
        if self._last is not None and now - self._last.timestamp_s < self.min_interval_s:
            return self._last
        flags = read_throttled(self.vcgencmd, self.runner)
        heat = [n for n in ("freq_capped", "throttled", "soft_temp_limit") if getattr(flags, n)]
        self._last = ThrottleSample(self.clock(), bool(heat), self.name, ", ".join(heat))
        return self._last


class CpufreqThrottleSensor:
    """Throttled when a policy's current clock is below its maximum by more than ``tolerance``.

    Args:
        policies: `knobs.CpuFreqPolicy` objects (``cpufreq_policies(root)``).
        tolerance: the relative shortfall below which a clock counts as full speed.
    """

    name = "cpufreq"

    def __init__(self, policies: Sequence, clock: Clock = time.monotonic, tolerance: float = 0.03):
        if not policies:
            raise SensorError("no cpufreq policy to watch")
        self.policies = list(policies)
        self.clock = clock
        self.tolerance = tolerance

    def read(self) -> ThrottleSample:
        slow = []
        for policy in self.policies:
            cur, top = policy.cur_khz, policy.max_khz
            if cur < top * (1.0 - self.tolerance):
                slow.append(f"{policy.name} at {cur} of {top} kHz")
        return ThrottleSample(self.clock(), bool(slow), self.name, "; ".join(slow))


class ZoneThrottleSensor:
    """Throttled when a thermal zone is at or above its lowest passive trip point (Jetson)."""

    name = "thermal-trips"

    def __init__(self, zones: Sequence[ThermalZone], clock: Clock = time.monotonic):
        trips = [(zone, zone.throttle_trip_mc()) for zone in zones]
        self.zones = [(zone, trip) for zone, trip in trips if trip is not None]
        if not self.zones:
            raise SensorError(f"no thermal zone reports a trip point among {[z.name for z in zones] or 'none'}")
        self.clock = clock

    def read(self) -> ThrottleSample:
        hot = []
        for zone, trip in self.zones:
            temp = zone.read().temp_mc
            if temp >= trip:
                hot.append(f"{zone.name} {temp / 1000:.1f} °C >= trip {trip / 1000:.1f} °C")
        return ThrottleSample(self.clock(), bool(hot), self.name, "; ".join(hot))
