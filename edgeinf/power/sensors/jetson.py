"""Jetson power rails (INA3221 in both driver layouts) and the board-total rule.

JetPack <= 4 uses NVIDIA's ``ina3221x`` IIO driver:
``/sys/bus/i2c/drivers/ina3221x/<bus>-0040/iio:device<k>/rail_name_<n>`` with
``in_power<n>_input`` in milliwatts. JetPack >= 5 uses the mainline ``ina3221``
hwmon driver (see `hwmon.ina3221_channels`). What counts as the board's total
differs per board; `choose_total` encodes it so that rails are never double counted.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .base import Clock, PowerSample, PowerSensor, Sysfs, check_power_mw
from .hwmon import _label_says_unused, hwmon_devices, ina3221_channels

log = logging.getLogger(__name__)

IIO_DRIVER = "sys/bus/i2c/drivers/ina3221x"


class IioRail:
    """One rail of the JetPack 4 ``ina3221x`` IIO driver (``in_power<n>_input`` in mW)."""

    def __init__(self, sysfs: Sysfs, directory: Path, index: int, rail: str, clock: Clock = time.monotonic):
        self.sysfs = sysfs
        self.directory = directory
        self.index = index
        self.name = rail
        self.clock = clock

    def read(self) -> PowerSample:
        power_mw = self.sysfs.read_int(self.directory / f"in_power{self.index}_input")
        voltage = self.sysfs.try_read_text(self.directory / f"in_voltage{self.index}_input")
        current = self.sysfs.try_read_text(self.directory / f"in_current{self.index}_input")
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=check_power_mw(float(power_mw), self.name),
            source=self.name,
            voltage_mv=float(voltage) if voltage and voltage.lstrip("-").isdigit() else None,
            current_ma=float(current) if current and current.lstrip("-").isdigit() else None,
        )


def iio_rails(sysfs: Sysfs, clock: Clock = time.monotonic) -> list[IioRail]:
    """The named rails of every ``ina3221x`` chip (JetPack 4), skipping ``NC`` channels."""
    rails: list[IioRail] = []
    base = sysfs.path(IIO_DRIVER)
    if not base.is_dir():
        return rails
    for device in sorted(base.glob("*/iio:device*")):
        for name_file in sorted(device.glob("rail_name_*")):
            match = re.fullmatch(r"rail_name_(\d+)", name_file.name)
            rail = sysfs.try_read_text(name_file)
            if not match or not rail or _label_says_unused(rail):
                continue
            rails.append(IioRail(sysfs, device, int(match.group(1)), rail, clock))
    return rails


def jetson_rails(sysfs: Sysfs, clock: Clock = time.monotonic) -> list[PowerSensor]:
    """Rails from both layouts (a board exposes one of them)."""
    rails: list[PowerSensor] = list(iio_rails(sysfs, clock))
    for device in hwmon_devices(sysfs):
        if device.name == "ina3221":
            rails.extend(ina3221_channels(sysfs, device, clock))
    return rails


@dataclass(frozen=True)
class TotalRule:
    """Which rails make up the board's input power, and why."""

    board: str
    rails: tuple[str, ...]


# A board with a rail at its power input: that rail alone is the total; the others are
# parts of it (Nano: POM_5V_IN; TX2, Xavier NX, Orin NX/Nano: VDD_IN; Thor: VIN).
_INPUT_RAILS = (("VDD_IN", "TX2 / Xavier NX / Orin NX / Orin Nano"), ("POM_5V_IN", "Nano"), ("VIN", "Thor"))
# Boards with no input rail: their module rails are disjoint and are summed.
_SUMMED = (
    (("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"), "AGX Xavier"),
    # AGX Orin: VIN_SYS_5V0 is a separate 5 V I/O rail, not the total; compute is these two.
    (("VDD_GPU_SOC", "VDD_CPU_CV"), "AGX Orin"),
)


def choose_total(rail_names: Sequence[str]) -> TotalRule | None:
    """The board's total-power rule for the rails present, or None when no rule fits.

    >>> choose_total(["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"])
    TotalRule(board='Nano', rails=('POM_5V_IN',))
    """
    present = set(rail_names)
    for rail, board in _INPUT_RAILS:
        if rail in present:
            return TotalRule(board, (rail,))
    for rails, board in _SUMMED:
        if set(rails) <= present:
            return TotalRule(board, rails)
    return None


class RailTotal:
    """Board input power: the rails of a `TotalRule`, read together and summed."""

    def __init__(self, rule: TotalRule, rails: Mapping[str, PowerSensor], clock: Clock = time.monotonic):
        self.rule = rule
        self.parts = tuple(rails[name] for name in rule.rails)
        self.name = f"jetson-total ({rule.board}: {' + '.join(rule.rails)})"
        self.clock = clock

    def read(self) -> PowerSample:
        samples = [part.read() for part in self.parts]
        return PowerSample(timestamp_s=self.clock(), power_mw=sum(s.power_mw for s in samples), source=self.name)


def jetson_total(rails: Sequence[PowerSensor], clock: Clock = time.monotonic) -> RailTotal | None:
    """The board-total sensor for these rails, or None when the board is not recognised."""
    by_name = {rail.name: rail for rail in rails}
    rule = choose_total(list(by_name))
    return RailTotal(rule, by_name, clock) if rule else None
