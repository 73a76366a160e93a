"""Intel/AMD RAPL package energy through the powercap class.

``/sys/class/powercap/intel-rapl:<pkg>/energy_uj`` is a cumulative counter in
microjoules that wraps to zero after ``max_energy_range_uj``. Since Linux 5.10
(CVE-2020-8694) ``energy_uj`` is readable by root only; `rapl_zones` reports that
as a reason rather than failing. RAPL updates about every millisecond without
timestamps, so power is taken over intervals of at least ``min_interval_s``.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Callable, Optional

from ...errors import SensorError
from .base import Clock, PowerSample, Sysfs, check_power_mw, counter_delta

log = logging.getLogger(__name__)

POWERCAP_CLASS = "sys/class/powercap"
ROOT_ONLY_REASON = (
    "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694); run as root or grant read "
    "access with a udev rule or /etc/sysfs.conf 'mode class/powercap/intel-rapl:0/energy_uj = 0444'"
)


class RaplSensor:
    """Power of one RAPL domain, from the change of its energy counter.

    Args:
        sysfs: the tree to read.
        zone: the ``intel-rapl:<n>`` directory.
        clock: monotonic seconds.
        sleep: used once, to prime the first reading (tests pass a fake).
        min_interval_s: shorter intervals return the previous sample (RAPL is coarse in time).
    """

    def __init__(
        self,
        sysfs: Sysfs,
        zone: Path,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        min_interval_s: float = 0.05,
    ):
        self.sysfs = sysfs
        self.zone = zone
        self.clock = clock
        self.sleep = sleep
        self.min_interval_s = min_interval_s
        self.name = f"rapl:{sysfs.try_read_text(zone / 'name') or zone.name}"
        self.max_range_uj = sysfs.read_int(zone / "max_energy_range_uj")
        if self.max_range_uj <= 0:
            raise SensorError(f"{zone}/max_energy_range_uj: expected a positive range, got {self.max_range_uj}")
        self._last_raw: Optional[int] = None
        self._last_t = 0.0
        self._total_uj = 0  # unwrapped cumulative energy since the first read
        self._last_sample: Optional[PowerSample] = None

    def read_counter_uj(self) -> int:
        value = self.sysfs.read_int(self.zone / "energy_uj")
        if not 0 <= value <= self.max_range_uj:
            raise SensorError(f"{self.name}: energy_uj {value} outside 0..{self.max_range_uj}")
        return value

    def read(self) -> PowerSample:
        if self._last_raw is None:
            self._last_raw, self._last_t = self.read_counter_uj(), self.clock()
            self.sleep(self.min_interval_s)
        now = self.clock()
        if self._last_sample is not None and now - self._last_t < self.min_interval_s:
            return self._last_sample
        raw = self.read_counter_uj()
        delta_uj = counter_delta(self._last_raw, raw, self.max_range_uj)
        dt = now - self._last_t
        if dt <= 0:
            raise SensorError(f"{self.name}: clock did not advance between reads")
        self._total_uj += delta_uj
        self._last_raw, self._last_t = raw, now
        power_mw = check_power_mw(delta_uj / dt / 1000.0, self.name)
        self._last_sample = PowerSample(now, power_mw, self.name, energy_uj=float(self._total_uj))
        return self._last_sample


def rapl_zones(
    sysfs: Sysfs, clock: Clock = time.monotonic, sleep=time.sleep
) -> tuple[list[RaplSensor], list[tuple[str, str]]]:
    """Top-level RAPL domains (packages, psys) and the domains that cannot be read, with the reason.

    Sub-domains (``intel-rapl:0:0`` core, uncore, dram) are parts of their package and
    are left out so that nothing is counted twice.
    """
    sensors: list[RaplSensor] = []
    unavailable: list[tuple[str, str]] = []
    base = sysfs.path(POWERCAP_CLASS)
    if not base.is_dir():
        return sensors, unavailable
    for zone in sorted(base.iterdir()):
        if not re.fullmatch(r"intel-rapl:\d+", zone.name):
            continue
        label = f"rapl:{sysfs.try_read_text(zone / 'name') or zone.name}"
        try:
            sensor = RaplSensor(sysfs, zone, clock, sleep)
            sensor.read_counter_uj()
        except SensorError as exc:
            reason = ROOT_ONLY_REASON if "permission denied" in str(exc) else str(exc)
            unavailable.append((label, reason))
            continue
        sensors.append(sensor)
    return sensors, unavailable
