"""Linux hwmon power sensors: INA2xx-style ``power*_input`` and the mainline INA3221.

Devices are found by their ``name`` file and channels by their ``*_label`` files,
never by the ``hwmonN`` number, which changes between boots. Units (kernel
sysfs-interface ABI): ``power*_input`` microwatts, ``in*_input`` millivolts,
``curr*_input`` milliamps.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import SensorError
from .base import Clock, PowerSample, Sysfs, check_power_mw

log = logging.getLogger(__name__)

HWMON_CLASS = "sys/class/hwmon"


@dataclass(frozen=True)
class HwmonDevice:
    """One hwmon device: its directory (symlinks resolved) and its driver ``name``."""

    path: Path
    name: str


def hwmon_devices(sysfs: Sysfs) -> list[HwmonDevice]:
    """Every hwmon device below the root, each once (class links and driver links lead to one place)."""
    found: dict[Path, HwmonDevice] = {}
    base = sysfs.path(HWMON_CLASS)
    if not base.is_dir():
        return []
    for entry in sorted(base.iterdir()):
        name = sysfs.try_read_text(entry / "name")
        if name is None:
            continue
        real = entry.resolve()
        found.setdefault(real, HwmonDevice(real, name))
    return list(found.values())


def _label_says_unused(label: str) -> bool:
    # "NC" marks an unconnected channel on Jetson carrier boards; match it as a word,
    # so that a rail like "VDD_SYNC" is kept.
    return "NC" in re.split(r"[^A-Za-z0-9]+", label.upper())


class HwmonPowerSensor:
    """A ``power<k>_input`` file (microwatts), with the device's bus voltage and current when present.

    Args:
        sysfs: the tree to read.
        device: the hwmon device.
        index: k in ``power<k>_input``.
        clock: timestamps samples.
    """

    def __init__(self, sysfs: Sysfs, device: HwmonDevice, index: int = 1, clock: Clock = time.monotonic):
        self.sysfs = sysfs
        self.device = device
        self.index = index
        self.clock = clock
        label = sysfs.try_read_text(device.path / f"power{index}_label")
        self.name = f"{device.name}:{label or f'power{index}'}"

    def read(self) -> PowerSample:
        power_uw = self.sysfs.read_int(self.device.path / f"power{self.index}_input")
        voltage = self._optional(f"in{self.index}_input") if self.device.name.startswith("ina2") else None
        current = self._optional(f"curr{self.index}_input")
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=check_power_mw(power_uw / 1000.0, self.name),
            source=self.name,
            voltage_mv=voltage,
            current_ma=current,
        )

    def _optional(self, file: str) -> Optional[float]:
        path = self.device.path / file
        if not path.exists():
            return None
        try:
            return float(self.sysfs.read_int(path))
        except SensorError:
            return None


class Ina2xxBusSensor(HwmonPowerSensor):
    """INA219/226 power with the bus voltage in ``in1_input`` (``in0_input`` is the shunt drop)."""

    def read(self) -> PowerSample:
        sample = super().read()
        bus = self._optional("in1_input")
        return PowerSample(sample.timestamp_s, sample.power_mw, sample.source, bus, sample.current_ma)


class Ina3221Channel:
    """One channel of the mainline ``ina3221`` driver: power = bus voltage x current.

    The driver has no power file; ``in<n>_input`` is millivolts and ``curr<n>_input``
    milliamps, so their product is microwatts. The two files are read one after the
    other, not atomically, which a changing load shows as a small error.
    """

    def __init__(self, sysfs: Sysfs, device: HwmonDevice, channel: int, label: str, clock: Clock = time.monotonic):
        self.sysfs = sysfs
        self.device = device
        self.channel = channel
        self.label = label
        self.name = label
        self.clock = clock

    def read(self) -> PowerSample:
        voltage_mv = self.sysfs.read_int(self.device.path / f"in{self.channel}_input")
        current_ma = self.sysfs.read_int(self.device.path / f"curr{self.channel}_input")
        power_mw = abs(voltage_mv * current_ma) / 1000.0
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=check_power_mw(power_mw, self.name),
            source=self.name,
            voltage_mv=float(voltage_mv),
            current_ma=float(current_ma),
        )


def ina3221_channels(sysfs: Sysfs, device: HwmonDevice, clock: Clock = time.monotonic) -> list[Ina3221Channel]:
    """The connected channels 1-3 of an ``ina3221`` hwmon device.

    Skipped: channels labelled ``NC``, channels whose ``in<n>_enable`` is 0, and the
    shunt-sum channel (``in7``/``curr4``), which would count the rails twice.
    """
    channels = []
    for n in (1, 2, 3):
        if not (device.path / f"curr{n}_input").exists():
            continue
        label = sysfs.try_read_text(device.path / f"in{n}_label") or f"{device.name}:ch{n}"
        if _label_says_unused(label) or "sum of shunt" in label.lower():
            continue
        if sysfs.try_read_text(device.path / f"in{n}_enable") == "0":
            continue
        channels.append(Ina3221Channel(sysfs, device, n, label, clock))
    return channels


INA2XX_NAMES = ("ina209", "ina219", "ina220", "ina226", "ina230", "ina231", "ina233", "ina238", "ina260")


def hwmon_power_sensors(sysfs: Sysfs, clock: Clock = time.monotonic) -> list[HwmonPowerSensor]:
    """Every ``power<k>_input`` of every hwmon device except ``ina3221`` (see `ina3221_channels`)."""
    sensors: list[HwmonPowerSensor] = []
    for device in hwmon_devices(sysfs):
        if device.name == "ina3221":
            continue
        for path in sorted(device.path.glob("power*_input")):
            match = re.fullmatch(r"power(\d+)_input", path.name)
            if not match:
                continue
            kind = Ina2xxBusSensor if device.name in INA2XX_NAMES else HwmonPowerSensor
            sensors.append(kind(sysfs, device, int(match.group(1)), clock))
    return sensors
