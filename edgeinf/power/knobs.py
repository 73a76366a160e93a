"""Actuators: cpufreq policy limits and governor, and the thermal limit.

Thread count, model variant and admission rate are chosen by the scheduler as part of
a `profiles.Config` and a rate; the knobs here are the ones that live in sysfs. All
cpufreq frequencies are kHz. Writing needs root on a real board; `CpuFreqPolicy.writable`
says whether this tree can be changed, and nothing is written when it cannot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import SensorError
from .sensors.base import Opener, Sysfs

log = logging.getLogger(__name__)

CPUFREQ_DIR = "sys/devices/system/cpu/cpufreq"


class CpuFreqPolicy:
    """One ``policyN`` directory (a group of cores that share a clock).

    Args:
        sysfs: the tree (a fake one in tests).
        directory: the ``policyN`` directory.
    """

    def __init__(self, sysfs: Sysfs, directory: Path):
        self.sysfs = sysfs
        self.directory = directory
        self.name = directory.name
        self._saved: Optional[tuple[str, int]] = None

    def _int(self, file: str) -> int:
        return self.sysfs.read_int(self.directory / file)

    @property
    def governor(self) -> str:
        return self.sysfs.read_text(self.directory / "scaling_governor")

    @property
    def available_governors(self) -> tuple[str, ...]:
        return tuple(self.sysfs.read_text(self.directory / "scaling_available_governors").split())

    @property
    def min_khz(self) -> int:
        return self._int("scaling_min_freq")

    @property
    def max_khz(self) -> int:
        return self._int("scaling_max_freq")

    @property
    def cur_khz(self) -> int:
        return self._int("scaling_cur_freq")

    @property
    def hardware_range_khz(self) -> tuple[int, int]:
        return self._int("cpuinfo_min_freq"), self._int("cpuinfo_max_freq")

    @property
    def available_khz(self) -> tuple[int, ...]:
        """Table frequencies (cpufreq-dt on ARM); empty with drivers that have no table (intel_pstate)."""
        text = self.sysfs.try_read_text(self.directory / "scaling_available_frequencies")
        return tuple(sorted(int(v) for v in text.split())) if text else ()

    @property
    def cpus(self) -> tuple[int, ...]:
        text = self.sysfs.try_read_text(self.directory / "affected_cpus") or ""
        return tuple(int(v) for v in text.split())

    @property
    def writable(self) -> bool:
        return self.sysfs.writable(self.directory / "scaling_max_freq") and self.sysfs.writable(
            self.directory / "scaling_governor"
        )

    def _save(self) -> None:
        if self._saved is None:
            self._saved = (self.governor, self.max_khz)

    def set_governor(self, governor: str) -> None:
        """Raises: ValueError for a governor the kernel does not offer; SensorError when not writable."""
        offered = self.available_governors
        if governor not in offered:
            raise ValueError(f"{self.name}: governor {governor!r} not available; expected one of {offered}")
        self._save()
        self.sysfs.write_text(self.directory / "scaling_governor", governor)

    def set_max_khz(self, khz: int) -> int:
        """Caps the policy's clock; returns the cap actually applied.

        The request is clamped to the hardware range and to ``scaling_min_freq``, and
        snapped down to a table frequency when the driver has a table.

        Raises:
            ValueError: ``khz`` is not a positive integer.
            SensorError: the tree is not writable or the kernel refused the value.
        """
        if not isinstance(khz, int) or khz <= 0:
            raise ValueError(f"{self.name}: expected a positive frequency in kHz, got {khz!r}")
        low, high = self.hardware_range_khz
        target = min(max(khz, low, self.min_khz), high)
        table = self.available_khz
        if table:
            below = [f for f in table if f <= target]
            target = below[-1] if below else table[0]
        self._save()
        self.sysfs.write_text(self.directory / "scaling_max_freq", str(target))
        applied = self.max_khz
        if applied != target:
            log.warning("%s: asked for %d kHz, the kernel applied %d kHz", self.name, target, applied)
        return applied

    def restore(self) -> None:
        """Puts back the governor and cap found before the first change."""
        if self._saved is None:
            return
        governor, max_khz = self._saved
        self.sysfs.write_text(self.directory / "scaling_max_freq", str(max_khz))
        self.sysfs.write_text(self.directory / "scaling_governor", governor)
        self._saved = None

    def describe(self) -> dict:
        try:
            return {
                "policy": self.name,
                "governor": self.governor,
                "min_khz": self.min_khz,
                "max_khz": self.max_khz,
                "hardware_range_khz": list(self.hardware_range_khz),
                "available_khz": list(self.available_khz),
                "writable": self.writable,
            }
        except SensorError as exc:
            return {"policy": self.name, "error": str(exc)}


def cpufreq_policies(root: str | Path | Sysfs = "/", opener: Opener = open) -> list[CpuFreqPolicy]:
    """The cpufreq policies of the tree (empty on machines without cpufreq)."""
    sysfs = root if isinstance(root, Sysfs) else Sysfs(root, opener)
    base = sysfs.path(CPUFREQ_DIR)
    if not base.is_dir():
        return []
    return [CpuFreqPolicy(sysfs, d) for d in sorted(base.glob("policy*")) if (d / "scaling_max_freq").exists()]


class FrequencyKnob:
    """Applies the clock cap of a scheduler decision (``Config.max_freq_khz``) to cpufreq policies.

    Writes only when the cap changes; a configuration without a cap leaves the clocks alone.
    On a tree that is not writable it logs once and does nothing, so a scheduler can still
    choose among variants and threads.
    """

    def __init__(self, policies: list[CpuFreqPolicy]):
        self.policies = [p for p in policies if p.writable]
        self._applied: Optional[int] = None
        if policies and not self.policies:
            log.warning("cpufreq is read-only here: clock caps in profiles will not be applied")

    def apply(self, max_freq_khz: Optional[int]) -> Optional[int]:
        """Caps every writable policy at ``max_freq_khz``; returns the cap applied by the first one."""
        if max_freq_khz is None or max_freq_khz == self._applied or not self.policies:
            return self._applied
        applied = [policy.set_max_khz(max_freq_khz) for policy in self.policies]
        self._applied = max_freq_khz
        return applied[0]

    def restore(self) -> None:
        for policy in self.policies:
            policy.restore()
        self._applied = None


@dataclass(frozen=True)
class ThermalLimit:
    """Where the board throttles (``trip_mc``) and how far below it the scheduler holds the
    predicted peak temperature (``margin_mc``). Millidegrees Celsius.

    The default trip is the Raspberry Pi firmware's 80 °C; `ThermalLimit.for_zone` reads
    the lowest passive trip point a thermal zone reports instead.

    >>> ThermalLimit(trip_mc=85_000, margin_mc=3_000).hold_mc
    82000
    """

    trip_mc: int = 80_000
    margin_mc: int = 3_000

    def __post_init__(self):
        if self.margin_mc < 0:
            raise ValueError(f"ThermalLimit margin_mc must be >= 0, got {self.margin_mc}")
        if not -60_000 < self.trip_mc - self.margin_mc < 200_000:
            raise ValueError(f"ThermalLimit: implausible limit {self.trip_mc - self.margin_mc} m°C")

    @property
    def hold_mc(self) -> int:
        """The temperature the predicted peak is held under."""
        return self.trip_mc - self.margin_mc

    @classmethod
    def for_zone(cls, zone, margin_mc: int = 3_000, default_trip_mc: int = 80_000) -> ThermalLimit:
        """The limit of a `ThermalZone`: its lowest passive trip point (where the kernel starts
        throttling), else ``default_trip_mc``."""
        trip = zone.throttle_trip_mc() if hasattr(zone, "throttle_trip_mc") else None
        return cls(trip_mc=trip if trip is not None else default_trip_mc, margin_mc=margin_mc)
