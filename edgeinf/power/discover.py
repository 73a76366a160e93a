"""Finds what the machine can measure: power sensors, the board total, temperatures, cpufreq.

A missing sensor is a normal state: `discover` returns what exists and lists what
exists but cannot be read, with the reason (e.g. RAPL being root-only). It spawns
``vcgencmd`` once, and only when the command is present.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import SensorError
from .knobs import CpuFreqPolicy, cpufreq_policies
from .sensors.base import Clock, Opener, PowerSensor, SumSensor, Sysfs
from .sensors.battery import batteries
from .sensors.hwmon import hwmon_power_sensors
from .sensors.jetson import jetson_rails, jetson_total
from .sensors.rapl import rapl_zones
from .sensors.rpi import PiPmicSensor, ThrottleFlags, read_throttled
from .sensors.serialmeter import LineMeter, UmMeter
from .sensors.tegrastats import TegrastatsSensor
from .sensors.thermal import ThermalZone, thermal_zones

log = logging.getLogger(__name__)


@dataclass
class Discovery:
    """What `discover` found.

    Attributes:
        total: the sensor that best measures the whole device, or None.
        total_reason: why that one (or why none).
        power: every readable power sensor (rails, meters, packages, batteries).
        thermal: thermal zones by type.
        cpufreq: cpufreq policies.
        unavailable: (sensor, reason) for sensors that exist but cannot be read.
        throttled: the Raspberry Pi firmware's under-voltage and throttling flags, if available.
    """

    total: Optional[PowerSensor] = None
    total_reason: str = "no power sensor found"
    power: list[PowerSensor] = field(default_factory=list)
    thermal: list[ThermalZone] = field(default_factory=list)
    cpufreq: list[CpuFreqPolicy] = field(default_factory=list)
    unavailable: list[tuple[str, str]] = field(default_factory=list)
    throttled: Optional[ThrottleFlags] = None

    def sensor(self, name: str) -> PowerSensor:
        """The power sensor called ``name``.

        Raises:
            SensorError: no such sensor (the caller asked for a specific one).
        """
        for sensor in self.power:
            if sensor.name == name:
                return sensor
        raise SensorError(f"no power sensor named {name!r}; found: {[s.name for s in self.power] or 'none'}")

    def close(self) -> None:
        for sensor in self.power:
            close = getattr(sensor, "close", None)
            if close:
                close()


def _meter(spec: str, clock: Clock) -> UmMeter | LineMeter:
    # "PORT" or "PORT@um" / "PORT@line"
    port, _, kind = spec.partition("@")
    if kind in ("", "um"):
        return UmMeter(port, clock=clock)
    if kind == "line":
        return LineMeter(port, clock=clock)
    raise ValueError(f"serial meter kind must be 'um' or 'line', got {kind!r} in {spec!r}")


def discover(
    root: str | Path = "/",
    *,
    vcgencmd: Optional[str] = "vcgencmd",
    tegrastats: Optional[str] = None,
    serial_ports: Sequence[str] = (),
    opener: Opener = open,
    clock: Clock = time.monotonic,
    runner=subprocess.run,
) -> Discovery:
    """Finds the sensors below ``root``.

    Args:
        root: the directory standing for ``/`` (a fake tree in tests).
        vcgencmd: the Pi's ``vcgencmd`` (name or path); None to skip the Pi PMIC.
        tegrastats: a ``tegrastats`` to run when the board exposes no rails in sysfs; None to skip.
        serial_ports: external meters as ``"/dev/rfcomm0"`` (UM series) or ``"/dev/ttyACM0@line"``.
        opener: replacement for ``open`` (fault injection).
        clock: monotonic seconds for timestamps.
        runner: ``subprocess.run`` or a replacement.

    Returns:
        A `Discovery`; the total is chosen in this order: an external meter, the Jetson
        board total, a single hwmon power sensor, the Pi 5 PMIC, a battery, RAPL packages.

    >>> discover("/nonexistent", vcgencmd=None).total is None
    True
    """
    sysfs = Sysfs(root, opener)
    found = Discovery(thermal=thermal_zones(sysfs, clock), cpufreq=cpufreq_policies(sysfs))
    candidates: list[tuple[PowerSensor, str]] = []

    for spec in serial_ports:
        meter = _meter(spec, clock)
        try:
            meter.read()
        except SensorError as exc:
            found.unavailable.append((meter.name, str(exc)))
            meter.close()
            continue
        found.power.append(meter)
        candidates.append((meter, f"external meter on {spec}"))

    rails = jetson_rails(sysfs, clock)
    found.power.extend(rails)
    total = jetson_total(rails, clock)
    if total is not None:
        candidates.append((total, f"Jetson {total.rule.board}: input power is {' + '.join(total.rule.rails)}"))
    elif rails:
        found.unavailable.append(("jetson-total", f"no board rule for rails {[r.name for r in rails]}; not summed"))

    hwmon = hwmon_power_sensors(sysfs, clock)
    found.power.extend(hwmon)
    if len(hwmon) == 1:
        candidates.append((hwmon[0], f"the only hwmon power sensor ({hwmon[0].name})"))

    if not rails and tegrastats and shutil.which(tegrastats):
        sensor = TegrastatsSensor(tegrastats, clock=clock)
        try:
            sensor.read()
            found.power.append(sensor)
            candidates.append((sensor, "tegrastats board total"))
        except SensorError as exc:
            sensor.close()
            found.unavailable.append(("tegrastats", str(exc)))

    if vcgencmd and shutil.which(vcgencmd):
        pmic = PiPmicSensor(vcgencmd, runner=runner, clock=clock)
        try:
            pmic.read()
            found.power.append(pmic)
            candidates.append((pmic, "Raspberry Pi 5 PMIC rails (SoC side, not the USB-C input)"))
        except SensorError as exc:
            found.unavailable.append((pmic.name, str(exc)))
        try:
            found.throttled = read_throttled(vcgencmd, runner=runner)
        except SensorError as exc:
            found.unavailable.append(("rpi-throttled", str(exc)))

    for battery in batteries(sysfs, clock):
        try:
            battery.read()
        except SensorError as exc:
            found.unavailable.append((battery.name, str(exc)))
            continue
        found.power.append(battery)
        candidates.append((battery, f"battery {battery.directory.name}"))

    packages, locked = rapl_zones(sysfs, clock)
    found.unavailable.extend(locked)
    found.power.extend(packages)
    if packages:
        total_rapl = packages[0] if len(packages) == 1 else SumSensor("rapl:packages", packages, clock)
        candidates.append((total_rapl, "RAPL package energy (CPU package, not the whole machine)"))

    if candidates:
        found.total, found.total_reason = candidates[0]
    log.debug("discover(%s): %d power sensors, total=%s", root, len(found.power), found.total_reason)
    return found
