"""Thermal zones, matched by their ``type`` (zone numbers are not stable). ``temp`` is in m°C.

A zone's trip points (``trip_point_<k>_temp`` and ``trip_point_<k>_type``) say where the
kernel acts: ``passive`` trips throttle the clocks (Jetson, most SoCs), ``active`` ones
start a fan, ``hot`` and ``critical`` ones shut down.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

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

    def trip_points(self) -> list[tuple[str, int]]:
        """``(type, m°C)`` of each readable trip point, in the zone's order (unreadable ones skipped)."""
        points = []
        for k in range(64):
            kind = self.sysfs.try_read_text(self.directory / f"trip_point_{k}_type")
            if kind is None:
                break
            temp = self.sysfs.try_read_text(self.directory / f"trip_point_{k}_temp")
            try:
                value = int(temp) if temp is not None else None
            except ValueError:
                value = None
            if value is not None and -60_000 <= value <= 200_000:
                points.append((kind, value))
        return points

    def throttle_trip_mc(self) -> Optional[int]:
        """Where the kernel starts throttling: the lowest ``passive`` trip point, else the lowest
        ``hot`` or ``critical`` one; None when the zone reports none."""
        points = self.trip_points()
        for kinds in (("passive",), ("hot", "critical")):
            temps = [temp for kind, temp in points if kind in kinds]
            if temps:
                return min(temps)
        return None


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
