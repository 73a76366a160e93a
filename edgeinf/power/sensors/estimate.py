"""A calibratable power model, for machines without a power sensor.

    power_mw = idle_mw + per_core_mw x active_cores

``active_cores`` is the CPU time this process used per second of wall time (1.0 = one
core busy). The defaults are a Raspberry Pi 5 measured at the board: about 1.6 W idle
and about 4.5 W with four cores loaded, i.e. about 0.74 W per busy core. They are a
starting point, not a fact about your board: `PowerModel.calibrate` fits both numbers
by least squares to (active_cores, measured_mw) pairs from any meter, e.g. a USB meter
read while `profile` runs. Everything derived from the model is marked ``estimated``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from ...errors import SensorError
from .base import Clock, PowerSample


@dataclass(frozen=True)
class PowerModel:
    """Linear power model of a board in terms of busy CPU cores.

    >>> PowerModel(idle_mw=1600, per_core_mw=740).power_mw(2.0)
    3080.0
    """

    idle_mw: float = 1600.0
    per_core_mw: float = 740.0
    source: str = "default: Raspberry Pi 5 board figures (1.6 W idle, ~4.5 W at 4 busy cores)"

    def __post_init__(self):
        if not (self.idle_mw >= 0 and self.per_core_mw > 0):
            raise ValueError(
                f"PowerModel needs idle_mw >= 0 and per_core_mw > 0, got {self.idle_mw}, {self.per_core_mw}"
            )

    def power_mw(self, active_cores: float) -> float:
        return self.idle_mw + self.per_core_mw * max(0.0, active_cores)

    @classmethod
    def calibrate(cls, points: Sequence[tuple[float, float]], source: str = "calibrated") -> PowerModel:
        """Least-squares fit of idle and per-core power to (active_cores, measured_mw) points.

        Raises:
            ValueError: fewer than two distinct activity levels.
        """
        xs = [float(x) for x, _ in points]
        ys = [float(y) for _, y in points]
        n = len(xs)
        if n < 2 or max(xs) - min(xs) < 1e-6:
            raise ValueError(f"calibration needs at least two distinct activity levels, got {sorted(set(xs))}")
        mean_x, mean_y = sum(xs) / n, sum(ys) / n
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        return cls(idle_mw=max(0.0, mean_y - slope * mean_x), per_core_mw=slope, source=source)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PowerModel:
        return cls(float(data["idle_mw"]), float(data["per_core_mw"]), str(data.get("source", "")))


class CpuActivity:
    """Busy cores of this process between two calls (CPU time / wall time), from injectable clocks."""

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time, clock: Clock = time.monotonic):
        self.cpu_clock = cpu_clock
        self.clock = clock
        self._last = (self.clock(), self.cpu_clock())

    def __call__(self) -> float:
        now, cpu = self.clock(), self.cpu_clock()
        wall = now - self._last[0]
        busy = cpu - self._last[1]
        if wall <= 0:
            return 0.0
        self._last = (now, cpu)
        return max(0.0, busy / wall)


class ModelSensor:
    """A `PowerSensor` that estimates power from a `PowerModel` and measured CPU activity.

    Args:
        model: the power model.
        activity: returns busy cores since its previous call (default: this process).
        clock: timestamps samples.
        min_interval_s: shorter intervals return the previous sample (CPU time is coarse).
    """

    def __init__(
        self,
        model: Optional[PowerModel] = None,
        activity: Optional[Callable[[], float]] = None,
        clock: Clock = time.monotonic,
        min_interval_s: float = 0.02,
    ):
        self.model = model or PowerModel()
        self.clock = clock
        self.activity = activity or CpuActivity(clock=clock)
        self.min_interval_s = min_interval_s
        self.name = "power-model"
        self._last: Optional[PowerSample] = None

    def read(self) -> PowerSample:
        now = self.clock()
        if self._last is not None and now - self._last.timestamp_s < self.min_interval_s:
            return self._last
        cores = self.activity()
        if cores != cores:  # NaN
            raise SensorError("power model: activity source returned NaN")
        self._last = PowerSample(now, self.model.power_mw(cores), self.name, estimated=True)
        return self._last
