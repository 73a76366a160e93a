"""Runs real models for profiling and for the scheduler's loop.

`load_runner` returns an object with ``invoke()`` and ``close()`` whose input is
filled once with fixed data: a model loaded with ``edgeinf.load`` on any backend. The
rest of `edgeinf.power` only sees the small `InferenceRunner` protocol, so tests and
simulations pass their own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Optional, Protocol

import numpy as np

from .profiles import Config


class InferenceRunner(Protocol):
    def invoke(self) -> None: ...
    def close(self) -> None: ...


def _fill(buffer: np.ndarray, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    if np.issubdtype(buffer.dtype, np.floating):
        buffer[...] = rng.uniform(-1.0, 1.0, buffer.shape).astype(buffer.dtype)
    else:
        info = np.iinfo(buffer.dtype)
        buffer[...] = rng.integers(info.min, info.max, buffer.shape, endpoint=True, dtype=buffer.dtype)


class _ModelRunner:
    def __init__(self, model):
        self.model = model
        for i in range(len(model.inputs)):
            _fill(model.input_buffer(i), seed=7 + i)

    def invoke(self) -> None:
        self.model.invoke()

    def close(self) -> None:
        self.model.close()


def load_runner(path: str | Path, backend: str = "tflite", threads: int = 1) -> InferenceRunner:
    """A runner for ``path`` on ``backend`` with ``threads`` threads, input filled with fixed data.

    Raises:
        BackendUnavailableError: the backend's runtime is not installed.
    """
    from ..model import load

    # check=False: profiling and scheduling run models the caller already chose to run.
    return _ModelRunner(load(path, backend=backend, num_threads=threads, check=False))


def run_loop(
    scheduler,
    runners: Mapping[Config, InferenceRunner],
    duration_s: float,
    *,
    frame_rate_hz: Optional[float] = None,
    budget_steps: Mapping[float, float] = {},
    frequency=None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
):
    """Drives real inference under a `Scheduler` for ``duration_s`` seconds.

    Frames arrive at ``frame_rate_hz`` (a camera; only the newest waiting frame is kept, older
    ones count as drops) or, with None, work is always available (a batch job). Each control
    period the scheduler decides; each admitted frame runs on the decided configuration.

    Args:
        scheduler: a `Scheduler` built on the same clock.
        runners: a ready runner for every configuration of the scheduler's profile.
        duration_s: how long to run.
        frame_rate_hz: arrival rate of work, or None for always.
        budget_steps: {seconds after start: new budget in W}, applied with `Scheduler.set_budget`.
        frequency: a `knobs.FrequencyKnob` that applies each decision's clock cap, or None.
        clock, sleep: time sources.

    Returns:
        The scheduler's `SchedulerReport` at the end.
    """
    missing = [c.label for c in scheduler.profile.configs if c not in runners]
    if missing:
        raise ValueError(f"no runner for configurations {missing}")
    period = scheduler.control_period_s
    start = clock()
    pending_steps = sorted(budget_steps.items())
    next_step = start
    next_frame = start
    waiting = 0 if frame_rate_hz else 1
    while True:
        now = clock()
        if now - start >= duration_s:
            break
        while pending_steps and now - start >= pending_steps[0][0]:
            scheduler.set_budget(pending_steps.pop(0)[1], now)
        if now >= next_step:
            decision = scheduler.step(now)
            if frequency is not None:
                frequency.apply(decision.config.max_freq_khz)
            next_step = max(next_step + period, now + period / 4)
        if frame_rate_hz:
            while next_frame <= now:
                scheduler.record_arrivals(1)
                if waiting:
                    scheduler.record_drops(1)  # the camera overwrote the unserved frame
                waiting = 1
                next_frame += 1.0 / frame_rate_hz
        if waiting and scheduler.admit(now):
            config = scheduler.decision.config
            runners[config].invoke()
            scheduler.record(clock() - now)
            if frame_rate_hz:
                waiting = 0
            continue
        wake = min(next_step, next_frame if frame_rate_hz else math.inf)
        if waiting:
            wake = min(wake, scheduler.next_admission_s(now))
        sleep(max(0.0002, min(wake - now, period)))
    scheduler.step(clock())
    return scheduler.report()
