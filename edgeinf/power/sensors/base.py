"""Samples, the sensor protocol, sysfs access and energy integration.

Every value carries its unit in its name (``power_mw``, ``energy_uj``,
``temp_mc``, ``timestamp_s``). Readers never open a fixed system path: they take
a root directory (a fake tree in tests) and an ``opener`` so that a test can
inject a failure such as ``PermissionError`` even when it runs as root.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Optional, Protocol, runtime_checkable

from ...errors import SensorError

log = logging.getLogger(__name__)

Opener = Callable[..., IO[str]]
Clock = Callable[[], float]


@dataclass(frozen=True)
class PowerSample:
    """One power reading.

    Attributes:
        timestamp_s: when it was taken, on the sensor's clock (monotonic seconds).
        power_mw: power in milliwatts (always >= 0; direction is in ``status``).
        source: the sensor or rail that produced it.
        voltage_mv: bus voltage in millivolts, if the sensor measures it.
        current_ma: current in milliamps, if the sensor measures it.
        energy_uj: the sensor's own cumulative energy counter (already unwrapped), if any.
        estimated: True when the value comes from a power model, not a measurement.
        status: free text such as ``"Discharging"`` for batteries, else ``""``.
    """

    timestamp_s: float
    power_mw: float
    source: str
    voltage_mv: Optional[float] = None
    current_ma: Optional[float] = None
    energy_uj: Optional[float] = None
    estimated: bool = False
    status: str = ""


@dataclass(frozen=True)
class TempSample:
    """One temperature reading: ``temp_mc`` in millidegrees Celsius."""

    timestamp_s: float
    temp_mc: int
    source: str


@runtime_checkable
class PowerSensor(Protocol):
    """Anything that returns a `PowerSample` per `read()` and raises `SensorError` when it cannot."""

    name: str

    def read(self) -> PowerSample: ...


@runtime_checkable
class TempSensor(Protocol):
    name: str

    def read(self) -> TempSample: ...


class Sysfs:
    """Reads small text files below a root directory.

    Args:
        root: the directory that stands for ``/`` (a fake tree in tests).
        opener: a replacement for the builtin ``open`` (tests inject failures with it).

    >>> Sysfs("/").path("sys/class/hwmon")
    PosixPath('/sys/class/hwmon')
    """

    def __init__(self, root: str | os.PathLike[str] = "/", opener: Opener = open):
        self.root = Path(root)
        self.opener = opener

    def path(self, relative: str | Path) -> Path:
        """The real location of ``relative`` (a path as seen on a device) below the root."""
        return self.root / str(relative).lstrip("/")

    def _full(self, path: str | Path) -> Path:
        # Absolute paths come from globbing below the root already; others are relative to it.
        return Path(path) if Path(path).is_absolute() else self.path(path)

    def read_text(self, path: str | Path) -> str:
        """Returns the stripped content of ``path`` (absolute, or relative to the root).

        Raises:
            SensorError: the file is missing, unreadable, or the driver reports no data.
        """
        full = self._full(path)
        try:
            with self.opener(full, encoding="ascii", errors="replace") as handle:
                return handle.read().strip()
        except FileNotFoundError:
            raise SensorError(f"{full}: sensor file is gone (device removed or driver unloaded)") from None
        except PermissionError:
            raise SensorError(f"{full}: permission denied (needs root or a udev rule)") from None
        except OSError as exc:
            # ina3221 answers -ENODATA for a channel that is not connected.
            reason = "no data (channel disabled)" if exc.errno == errno.ENODATA else exc.strerror
            raise SensorError(f"{full}: {reason}") from None

    def read_int(self, path: str | Path) -> int:
        """Returns the integer in ``path``.

        Raises:
            SensorError: as `read_text`, or the content is not an integer (garbage).
        """
        text = self.read_text(path)
        try:
            return int(text)
        except ValueError:
            raise SensorError(f"{self._full(path)}: expected an integer, got {text[:40]!r}") from None

    def try_read_text(self, path: str | Path) -> Optional[str]:
        """Like `read_text` but returns None when the file cannot be read (used in discovery)."""
        try:
            return self.read_text(path)
        except SensorError:
            return None

    def writable(self, path: str | Path) -> bool:
        """True when ``path`` can be opened for writing (probing does not change it)."""
        full = self._full(path)
        try:
            with self.opener(full, "r+", encoding="ascii"):
                return True
        except OSError:
            return False

    def write_text(self, path: str | Path, value: str) -> None:
        full = self._full(path)
        try:
            with self.opener(full, "w", encoding="ascii") as handle:
                handle.write(value)
        except PermissionError:
            raise SensorError(f"{full}: permission denied writing {value!r} (needs root)") from None
        except OSError as exc:
            raise SensorError(f"{full}: the kernel rejected {value!r}: {exc.strerror}") from None


def counter_delta(previous: int, current: int, max_range: int) -> int:
    """Increase of a cumulative counter that wraps to zero after ``max_range``.

    One wrap between two reads is recovered; two cannot be told apart from one, so
    callers must read at least twice per wrap period.

    >>> counter_delta(990, 10, 1000)
    20
    """
    if max_range <= 0:
        raise ValueError(f"counter range must be positive, got {max_range}")
    delta = current - previous
    if delta < 0:
        delta += max_range
    return delta


def integrate_energy_uj(samples: Sequence[PowerSample]) -> float:
    """Energy in microjoules under the power curve, by the trapezoid rule over timestamps.

    Unevenly spaced samples are weighted by their spacing; averaging the samples and
    multiplying by the duration would over-weight clustered readings.

    >>> s = [PowerSample(0.0, 1000.0, "x"), PowerSample(2.0, 3000.0, "x")]
    >>> integrate_energy_uj(s)   # 2 s at a mean of 2 W
    4000000.0
    """
    total = 0.0
    for a, b in zip(samples, samples[1:]):
        dt = b.timestamp_s - a.timestamp_s
        if dt < 0:
            raise ValueError(f"samples out of time order: {a.timestamp_s} then {b.timestamp_s}")
        total += 0.5 * (a.power_mw + b.power_mw) * dt * 1000.0  # mW * s = mJ; *1000 = uJ
    return total


class EnergyMeter:
    """Accumulates energy from a stream of power samples (trapezoid), without keeping them.

    >>> m = EnergyMeter()
    >>> for t, p in ((0.0, 1000.0), (1.0, 1000.0), (3.0, 2000.0)):
    ...     m.add(PowerSample(t, p, "x"))
    >>> m.energy_uj, m.duration_s, m.mean_power_mw
    (4000000.0, 3.0, 1333.3333333333333)
    """

    def __init__(self):
        self.energy_uj = 0.0
        self.duration_s = 0.0
        self._last: Optional[PowerSample] = None

    def add(self, sample: PowerSample) -> None:
        last = self._last
        if last is not None:
            dt = sample.timestamp_s - last.timestamp_s
            if dt < 0:
                raise ValueError(f"sample at {sample.timestamp_s} s is older than the last one at {last.timestamp_s} s")
            self.energy_uj += 0.5 * (last.power_mw + sample.power_mw) * dt * 1000.0
            self.duration_s += dt
        self._last = sample

    def gap(self) -> None:
        """Marks a hole in the stream (sensor failure): the next sample starts a new segment."""
        self._last = None

    @property
    def mean_power_mw(self) -> float:
        return self.energy_uj / 1000.0 / self.duration_s if self.duration_s > 0 else math.nan


def check_power_mw(value: float, source: str, limit_mw: float = 10_000_000.0) -> float:
    """Rejects NaN, infinite, negative or absurd (> 10 kW) readings as garbage."""
    if not math.isfinite(value) or value < 0 or value > limit_mw:
        raise SensorError(f"{source}: implausible power reading {value!r} mW (expected 0..{limit_mw:g})")
    return value


class StuckGuard:
    """Wraps a power sensor and raises `SensorError` when its value stops changing.

    A live analogue sensor always jitters in its last bits; a reading that is exactly
    the same ``max_repeats`` times in a row comes from a hung driver or a stale cache.

    Args:
        sensor: the wrapped sensor.
        max_repeats: identical consecutive readings tolerated before declaring it stuck.
    """

    def __init__(self, sensor: PowerSensor, max_repeats: int = 20):
        if max_repeats < 2:
            raise ValueError(f"max_repeats must be >= 2, got {max_repeats}")
        self.sensor = sensor
        self.name = sensor.name
        self.max_repeats = max_repeats
        self._last_value: Optional[float] = None
        self._repeats = 0

    def read(self) -> PowerSample:
        sample = self.sensor.read()
        if sample.power_mw == self._last_value:
            self._repeats += 1
        else:
            self._repeats = 1
            self._last_value = sample.power_mw
        if self._repeats >= self.max_repeats:
            raise SensorError(f"{self.name}: reading stuck at {sample.power_mw} mW for {self._repeats} reads")
        return sample


class SumSensor:
    """Sum of several power sensors read together (e.g. the rails of a board that has no total rail)."""

    def __init__(self, name: str, parts: Iterable[PowerSensor], clock: Clock = time.monotonic):
        self.name = name
        self.parts = tuple(parts)
        if not self.parts:
            raise ValueError("SumSensor needs at least one part")
        self.clock = clock

    def read(self) -> PowerSample:
        samples = [part.read() for part in self.parts]
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=sum(s.power_mw for s in samples),
            source=self.name,
            estimated=any(s.estimated for s in samples),
        )
