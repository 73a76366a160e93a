"""Thermal zones, matched by their ``type`` (zone numbers are not stable). ``temp`` is in m°C."""

from __future__ import annotations

import time
from pathlib import Path

from ...errors import SensorError
from .base import Clock, Sysfs, TempSample

THERMAL_CLASS = "sys/class/thermal"


class ThermalZone:
    def __init__(self, sysfs: Sysfs, directory: Path, zone_type: str, clock: Clock = time.monotonic):
        self.sysfs = sysfs
        self.directory = directory
        self.name = zone_type
        self.clock = clock

    def read(self) -> TempSample:
        temp_mc = self.sysfs.read_int(self.directory / "temp")
        if not -60_000 <= temp_mc <= 200_000:
            raise SensorError(f"{self.directory}/temp: implausible {temp_mc} m°C")
        return TempSample(self.clock(), temp_mc, self.name)


def thermal_zones(sysfs: Sysfs, clock: Clock = time.monotonic) -> list[ThermalZone]:
    base = sysfs.path(THERMAL_CLASS)
    if not base.is_dir():
        return []
    zones = []
    for entry in sorted(base.glob("thermal_zone*")):
        zone_type = sysfs.try_read_text(entry / "type")
        if zone_type:
            zones.append(ThermalZone(sysfs, entry, zone_type, clock))
    return zones


def find_zone(sysfs: Sysfs, type_prefix: str, clock: Clock = time.monotonic) -> ThermalZone:
    """The first zone whose type starts with ``type_prefix`` (case-insensitive: ``cpu`` finds
    ``cpu-thermal``, ``CPU-therm`` and ``cpu``).

    Raises:
        SensorError: no such zone (the caller asked for this one).
    """
    zones = thermal_zones(sysfs, clock)
    for zone in zones:
        if zone.name.lower().startswith(type_prefix.lower()):
            return zone
    raise SensorError(f"no thermal zone of type {type_prefix!r}*; found: {[z.name for z in zones] or 'none'}")
