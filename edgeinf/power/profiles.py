"""Energy profiles: latency and energy per inference for each configuration.

A configuration is a model variant x backend x thread count (x an optional CPU clock
cap). `profile` measures each one back to back. With a power sensor, energy is the
trapezoid integral of the sensor's samples over the run; without one, power comes
from a `PowerModel` applied to the CPU time the run used, and the profile is marked
``estimated``. Profiles save and load as JSON.

The module is called ``profiles`` (not ``profile``) so that the function
`edgeinf.power.profile` does not shadow it.
"""

from __future__ import annotations

import json
import logging
import platform
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from ..errors import SensorError
from .sensors.base import PowerSample, PowerSensor, integrate_energy_uj
from .sensors.estimate import PowerModel

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


@dataclass(frozen=True, order=True)
class Config:
    """One way of running inference.

    >>> Config("face_detection_short_range", "tflite", 2).label
    'face_detection_short_range/tflite/t2'
    """

    variant: str
    backend: str = "tflite"
    threads: int = 1
    max_freq_khz: Optional[int] = None

    @property
    def label(self) -> str:
        cap = f"@{self.max_freq_khz}kHz" if self.max_freq_khz else ""
        return f"{self.variant}/{self.backend}/t{self.threads}{cap}"


@dataclass(frozen=True)
class ConfigProfile:
    """What one configuration costs when run back to back.

    Attributes:
        latency_ms: mean time per inference.
        latency_p95_ms: 95th percentile time per inference.
        power_mw: mean power of the device while running it.
        quality: the relative worth of this variant's results (1.0 = best), given by the user.
    """

    config: Config
    latency_ms: float
    latency_p95_ms: float
    power_mw: float
    quality: float = 1.0
    runs: int = 0

    @property
    def capacity_per_s(self) -> float:
        return 1000.0 / self.latency_ms

    @property
    def energy_per_inference_uj(self) -> float:
        return self.power_mw * self.latency_ms  # mW x ms = uJ

    def dynamic_energy_uj(self, idle_mw: float) -> float:
        """Energy per inference above the idle floor (what an extra inference costs)."""
        return max(0.0, self.power_mw - idle_mw) * self.latency_ms


@dataclass(frozen=True)
class Profile:
    """Profiles of every configuration, plus the idle power they are measured against."""

    entries: tuple[ConfigProfile, ...]
    idle_mw: float
    estimated: bool
    sensor: str
    power_model: Optional[dict] = None
    machine: str = field(default_factory=lambda: f"{platform.machine()} {platform.node()}")
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def __post_init__(self):
        if not self.entries:
            raise ValueError("a Profile needs at least one configuration")
        for entry in self.entries:
            if not (entry.latency_ms > 0 and entry.power_mw >= 0):
                raise ValueError(
                    f"{entry.config.label}: latency must be > 0 and power >= 0, got {entry.latency_ms} ms, {entry.power_mw} mW"
                )

    def entry(self, config: Config) -> ConfigProfile:
        for entry in self.entries:
            if entry.config == config:
                return entry
        raise KeyError(f"no profile for {config.label}; profiled: {[e.config.label for e in self.entries]}")

    @property
    def configs(self) -> tuple[Config, ...]:
        return tuple(e.config for e in self.entries)

    def scaled(self, *, dynamic_power: float = 1.0, latency: float = 1.0, idle: float = 1.0) -> Profile:
        """The same profile with its dynamic power, latency and idle power multiplied (what-if and tests)."""
        idle_mw = self.idle_mw * idle
        entries = tuple(
            replace(
                e,
                latency_ms=e.latency_ms * latency,
                latency_p95_ms=e.latency_p95_ms * latency,
                power_mw=idle_mw + max(0.0, e.power_mw - self.idle_mw) * dynamic_power,
            )
            for e in self.entries
        )
        return replace(self, entries=entries, idle_mw=idle_mw)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["format_version"] = FORMAT_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> Profile:
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"profile format_version {version!r} not supported; expected {FORMAT_VERSION}")
        entries = tuple(
            ConfigProfile(
                config=Config(**e["config"]),
                latency_ms=float(e["latency_ms"]),
                latency_p95_ms=float(e["latency_p95_ms"]),
                power_mw=float(e["power_mw"]),
                quality=float(e.get("quality", 1.0)),
                runs=int(e.get("runs", 0)),
            )
            for e in data["entries"]
        )
        return cls(
            entries=entries,
            idle_mw=float(data["idle_mw"]),
            estimated=bool(data["estimated"]),
            sensor=str(data["sensor"]),
            power_model=data.get("power_model"),
            machine=str(data.get("machine", "")),
            created=str(data.get("created", "")),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Raises: ValueError for a file that is not a profile of this format."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON profile ({exc})") from None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: profile is missing or has a malformed field ({exc!r})") from None


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _measure_idle(sensor: PowerSensor, idle_s: float, clock, sleep) -> float:
    samples: list[PowerSample] = [sensor.read()]
    end = clock() + idle_s
    while clock() < end:
        sleep(min(0.05, idle_s / 4))
        samples.append(sensor.read())
    duration = samples[-1].timestamp_s - samples[0].timestamp_s
    if duration <= 0:
        return samples[-1].power_mw
    return integrate_energy_uj(samples) / 1000.0 / duration


def profile(
    models: Mapping[str, str | Path],
    *,
    threads: Iterable[int] = (1,),
    backends: Iterable[str] = ("tflite",),
    sensor: Optional[PowerSensor] = None,
    power_model: Optional[PowerModel] = None,
    quality: Optional[Mapping[str, float]] = None,
    runs: int = 30,
    warmup: int = 3,
    idle_s: float = 0.5,
    load: Optional[Callable] = None,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
    sleep: Callable[[float], None] = time.sleep,
) -> Profile:
    """Measures latency and energy per inference of every variant x backend x threads.

    Args:
        models: variant name -> model file.
        threads: thread counts to try.
        backends: backends to try (each must be installed).
        sensor: a power sensor; None uses ``power_model`` and marks the profile estimated.
        power_model: the model used without a sensor (default `PowerModel()`).
        quality: variant -> relative worth of its results (default 1.0 each).
        runs: timed inferences per configuration.
        warmup: untimed inferences first.
        idle_s: how long idle power is sampled (with a sensor).
        load: ``load(path, backend, threads) -> runner`` (default `runner.load_runner`).
        clock, cpu_clock, sleep: injectable time sources.

    Returns:
        A `Profile`.

    >>> p = profile({"short": zoo.path("face_detection_short_range")}, threads=(1, 2))  # doctest: +SKIP
    >>> p.save("profile.json")                                                          # doctest: +SKIP
    """
    if runs < 2:
        raise ValueError(f"runs must be >= 2, got {runs}")
    if load is None:
        from .runner import load_runner

        load = load_runner
    model = power_model or PowerModel()
    quality = dict(quality or {})
    idle_mw = _measure_idle(sensor, idle_s, clock, sleep) if sensor else model.idle_mw
    entries = []
    for variant, path in models.items():
        for backend in backends:
            for n in threads:
                config = Config(variant, backend, int(n))
                runner = load(path, backend, int(n))
                try:
                    for _ in range(warmup):
                        runner.invoke()
                    latencies, power_mw = _timed_runs(runner, runs, sensor, model, clock, cpu_clock)
                finally:
                    runner.close()
                entry = ConfigProfile(
                    config=config,
                    latency_ms=statistics.fmean(latencies),
                    latency_p95_ms=_percentile(latencies, 95),
                    power_mw=power_mw,
                    quality=float(quality.get(variant, 1.0)),
                    runs=runs,
                )
                log.info("profiled %s: %.2f ms, %.0f mW", config.label, entry.latency_ms, entry.power_mw)
                entries.append(entry)
    return Profile(
        entries=tuple(entries),
        idle_mw=idle_mw,
        estimated=sensor is None,
        sensor=sensor.name if sensor else "power-model",
        power_model=None if sensor else model.to_dict(),
    )


def _timed_runs(runner, runs, sensor, model, clock, cpu_clock) -> tuple[list[float], float]:
    latencies = []
    samples: list[PowerSample] = []
    if sensor:
        samples.append(sensor.read())
    wall0, cpu0 = clock(), cpu_clock()
    for _ in range(runs):
        start = clock()
        runner.invoke()
        latencies.append((clock() - start) * 1000.0)
        if sensor:
            samples.append(sensor.read())
    wall, cpu = clock() - wall0, cpu_clock() - cpu0
    if not sensor:
        return latencies, model.power_mw(cpu / wall if wall > 0 else 0.0)
    duration = samples[-1].timestamp_s - samples[0].timestamp_s
    if duration <= 0:
        raise SensorError(f"{sensor.name}: no time passed between samples; use more runs or a faster sensor")
    return latencies, integrate_energy_uj(samples) / 1000.0 / duration
