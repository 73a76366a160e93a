"""Raspberry Pi: the Pi 5 PMIC ADCs (``vcgencmd pmic_read_adc``) and ``get_throttled`` flags.

Each sample spawns a process, which costs CPU time next to inference; the sensor
therefore returns its previous sample when asked again within ``min_interval_s``
(10 Hz by default). Rails are paired by name (``VDD_CORE_A`` with ``VDD_CORE_V``),
never by the ADC index in parentheses, which differs between the two lines. The
sum is the PMIC-side power of the board's rails, not the power at the USB-C input.
"""

from __future__ import annotations

import logging
import math
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional

from ...errors import SensorError
from .base import Clock, PowerSample

log = logging.getLogger(__name__)

_PMIC_LINE = re.compile(r"^\s*(\S+)_([AV])\s+(current|volt)\(\d+\)=(\S+?)[AV]?\s*$")


@dataclass(frozen=True)
class PmicRail:
    name: str
    voltage_mv: Optional[float]
    current_ma: Optional[float]

    @property
    def power_mw(self) -> Optional[float]:
        if self.voltage_mv is None or self.current_ma is None:
            return None
        return self.voltage_mv * self.current_ma / 1000.0


def _milli(value: Optional[float]) -> Optional[float]:
    return None if value is None else value * 1000.0


def parse_pmic_read_adc(text: str) -> dict[str, PmicRail]:
    """Rails of one ``pmic_read_adc`` dump; values that are ``nan`` or unparsable are left as None.

    Raises:
        SensorError: the firmware answered with an error (e.g. no PMIC on this board).
    """
    if "error=" in text:
        raise SensorError(f"vcgencmd pmic_read_adc failed: {text.strip()[:120]}")
    volts: dict[str, Optional[float]] = {}
    amps: dict[str, Optional[float]] = {}
    for line in text.splitlines():
        match = _PMIC_LINE.match(line)
        if not match:
            continue
        rail, kind, _, raw = match.groups()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        (amps if kind == "A" else volts)[rail] = value if math.isfinite(value) else None
    names = sorted(set(volts) | set(amps))
    if not names:
        raise SensorError(f"vcgencmd pmic_read_adc: no rail lines in output {text.strip()[:80]!r}")
    return {
        name: PmicRail(
            name,
            _milli(volts.get(name)),
            _milli(amps.get(name)),
        )
        for name in names
    }


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _run(command: Sequence[str], runner: Runner, timeout_s: float) -> str:
    try:
        done = runner(
            list(command), capture_output=True, encoding="ascii", errors="replace", timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise SensorError(f"{command[0]}: command not found") from None
    except PermissionError:
        raise SensorError(f"{command[0]}: permission denied (the user needs the 'video' group)") from None
    except subprocess.TimeoutExpired:
        raise SensorError(f"{' '.join(command)}: no answer within {timeout_s} s") from None
    if done.returncode != 0:
        raise SensorError(
            f"{' '.join(command)} exited with {done.returncode}: {(done.stderr or done.stdout).strip()[:120]}"
        )
    return done.stdout


class PiPmicSensor:
    """Sum of the Pi 5 PMIC rails that have both a voltage and a current.

    Args:
        vcgencmd: the command (a path to a stub in tests).
        runner: ``subprocess.run`` or a replacement.
        clock: monotonic seconds.
        min_interval_s: the fastest rate at which a process is spawned.
    """

    def __init__(
        self,
        vcgencmd: str = "vcgencmd",
        runner: Runner = subprocess.run,
        clock: Clock = time.monotonic,
        min_interval_s: float = 0.1,
        timeout_s: float = 2.0,
    ):
        self.command = (vcgencmd, "pmic_read_adc")
        self.runner = runner
        self.clock = clock
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.name = "rpi5-pmic"
        self.spawns = 0
        self._last: Optional[PowerSample] = None

    def read_rails(self) -> dict[str, PmicRail]:
        self.spawns += 1
        return parse_pmic_read_adc(_run(self.command, self.runner, self.timeout_s))

    def read(self) -> PowerSample:
        now = self.clock()
        if self._last is not None and now - self._last.timestamp_s < self.min_interval_s:
            return self._last
        rails = self.read_rails()
        powers = [rail.power_mw for rail in rails.values() if rail.power_mw is not None]
        if not powers:
            raise SensorError("vcgencmd pmic_read_adc: no rail has both a voltage and a current")
        self._last = PowerSample(self.clock(), sum(powers), self.name)
        return self._last


def _flag(bit: int) -> property:
    """A read-only bool property: bit ``bit`` of ``raw``."""
    return property(lambda self: bool(self.raw >> bit & 1))


@dataclass(frozen=True)
class ThrottleFlags:
    """``vcgencmd get_throttled``: bits 0-3 are conditions now, bits 16-19 the same since boot."""

    raw: int

    under_voltage = _flag(0)
    freq_capped = _flag(1)
    throttled = _flag(2)
    soft_temp_limit = _flag(3)
    under_voltage_occurred = _flag(16)
    freq_capped_occurred = _flag(17)
    throttled_occurred = _flag(18)
    soft_temp_limit_occurred = _flag(19)

    def active(self) -> list[str]:
        names = ("under_voltage", "freq_capped", "throttled", "soft_temp_limit")
        now = [n for n in names if getattr(self, n)]
        return now + [f"{n}_occurred" for n in names if getattr(self, f"{n}_occurred")]


def read_throttled(
    vcgencmd: str = "vcgencmd", runner: Runner = subprocess.run, timeout_s: float = 2.0
) -> ThrottleFlags:
    """Parses ``throttled=0x50005``.

    Raises:
        SensorError: the command is missing, failed, or printed something else.
    """
    text = _run((vcgencmd, "get_throttled"), runner, timeout_s).strip()
    match = re.fullmatch(r"throttled=(0x[0-9a-fA-F]+|\d+)", text)
    if not match:
        raise SensorError(f"vcgencmd get_throttled: expected 'throttled=0x...', got {text[:60]!r}")
    return ThrottleFlags(int(match.group(1), 0))
