"""Batteries through the power_supply class.

``power_now`` is microwatts; without it, ``current_now`` (microamps) x ``voltage_now``
(microvolts). The sign of ``current_now`` differs between drivers, so magnitudes are
reported and the direction is taken from ``status``. USB-PD ``ucsi-source-psy-*``
entries are negotiated contracts, not measurements, and are skipped.
"""

from __future__ import annotations

import time
from pathlib import Path

from ...errors import SensorError
from .base import Clock, PowerSample, Sysfs, check_power_mw

POWER_SUPPLY_CLASS = "sys/class/power_supply"


class BatterySensor:
    def __init__(self, sysfs: Sysfs, directory: Path, clock: Clock = time.monotonic):
        self.sysfs = sysfs
        self.directory = directory
        self.clock = clock
        self.name = f"battery:{directory.name}"

    def read(self) -> PowerSample:
        status = self.sysfs.try_read_text(self.directory / "status") or ""
        voltage_uv = self._maybe("voltage_now")
        current_ua = self._maybe("current_now")
        if (self.directory / "power_now").exists():
            power_mw = abs(self.sysfs.read_int(self.directory / "power_now")) / 1000.0
        elif voltage_uv is not None and current_ua is not None:
            power_mw = abs(voltage_uv * current_ua) / 1e9  # uV * uA = pW
        else:
            raise SensorError(f"{self.directory}: neither power_now nor current_now and voltage_now")
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=check_power_mw(power_mw, self.name),
            source=self.name,
            voltage_mv=voltage_uv / 1000.0 if voltage_uv is not None else None,
            current_ma=abs(current_ua) / 1000.0 if current_ua is not None else None,
            status=status,
        )

    def _maybe(self, file: str):
        path = self.directory / file
        return self.sysfs.read_int(path) if path.exists() else None


def batteries(sysfs: Sysfs, clock: Clock = time.monotonic) -> list[BatterySensor]:
    base = sysfs.path(POWER_SUPPLY_CLASS)
    if not base.is_dir():
        return []
    found = []
    for entry in sorted(base.iterdir()):
        if entry.name.startswith("ucsi-source-psy"):
            continue
        if (sysfs.try_read_text(entry / "type") or "").lower() == "battery":
            found.append(BatterySensor(sysfs, entry, clock))
    return found
