"""The measuring method: warm-up, timed runs, order statistics; interleaved comparisons.

Fixed input, warm-up runs, then timed runs; the statistics are order statistics of the
per-call times (median, p95, p99, max), never a mean alone. Tiny calls are timed in
batches so the clock's own cost does not dominate. Contenders are compared side by
side by interleaving them, so drift on a shared machine favours neither. `Evictor`
empties the caches between calls for cold-cache figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Stats:
    """Per-call latency statistics in microseconds."""

    runs: int
    batch: int
    median_us: float
    p95_us: float
    p99_us: float
    max_us: float
    min_us: float
    mean_us: float
    samples_us: np.ndarray | None = field(default=None, repr=False, compare=False)  # per timed run

    @property
    def throughput_per_s(self) -> float:
        return 1e6 / self.median_us if self.median_us > 0 else float("inf")

    def to_dict(self) -> dict:
        """The statistics (not the samples) and the throughput."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "samples_us"}
        return {**out, "throughput_per_s": self.throughput_per_s}


def summarize(per_call_us, batch: int = 1) -> Stats:
    """Statistics of per-call times in microseconds (as measured, one value per timed run)."""
    t = np.asarray(per_call_us, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no timings to summarize")
    p50, p95, p99 = np.percentile(t, [50, 95, 99])
    return Stats(
        int(t.size),
        batch,
        float(p50),
        float(p95),
        float(p99),
        float(t.max()),
        float(t.min()),
        float(t.mean()),
        samples_us=t,
    )


def _batch_size(fn: Callable[[], object], target_s: float) -> int:
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(1, int(target_s / max(once, 1e-9)))


def measure(
    fn: Callable[[], object],
    *,
    warmup: int = 10,
    runs: int = 100,
    batch: int | None = 1,
    min_batch_s: float = 200e-6,
    on_run: Callable[[int], object] | None = None,
    clock: Callable[[], float] | None = None,
) -> Stats:
    """Time ``fn()``: ``warmup`` calls, then ``runs`` timed runs of ``batch`` calls each.

    Args:
        batch: calls per timed run; None picks enough calls to last ``min_batch_s``.
        on_run: called with the number of finished timed runs after each one (outside
            the timed span), e.g. to draw a progress bar.
        clock: seconds; default `time.perf_counter` (wall time). `time.thread_time`
            counts only this thread's CPU time, which other work on a busy machine does
            not inflate (for single-threaded work).
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    if batch is None:
        batch = _batch_size(fn, min_batch_s)
    times = np.empty(runs)
    clock = clock or time.perf_counter
    for i in range(runs):
        start = clock()
        for _ in range(batch):
            fn()
        times[i] = (clock() - start) / batch
        if on_run is not None:
            on_run(i + 1)
    return summarize(times * 1e6, batch)


def compare(
    contenders: dict[str, Callable[[], object]],
    *,
    warmup: int = 10,
    runs: int = 100,
    batch: int | None = 1,
    rounds: int = 5,
    clock: Callable[[], float] | None = None,
) -> dict[str, Stats]:
    """Measure several functions interleaved (A B C A B C ...), ``rounds`` slices each.

    ``clock`` as in `measure`.
    """
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    batches = {name: (batch or _batch_size(fn, 200e-6)) for name, fn in contenders.items()}
    per_round = max(1, runs // rounds)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    clock = clock or time.perf_counter
    for _ in range(rounds):
        for name, fn in contenders.items():
            b = batches[name]
            for _ in range(per_round):
                start = clock()
                for _ in range(b):
                    fn()
                samples[name].append((clock() - start) / b * 1e6)
    return {name: summarize(samples[name], batches[name]) for name in contenders}


# -- cold caches ---------------------------------------------------------------------------


def last_level_cache_bytes(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The largest CPU cache in bytes, from sysfs (32 MiB where it cannot be read)."""
    sizes = []
    for path in cache_dir.glob("index*/size"):
        text = path.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KM")) * scale)
        except ValueError:
            continue
    return max(sizes, default=32 << 20)


class Evictor:
    """Calling it reads a buffer twice the size of the last-level cache, one byte per 64-byte
    line, so that nothing a timed call used before is left in any cache: a "cold" call then
    starts from the same state for every contender (as when a camera delivers a new frame
    to DRAM, or a model's other layers ran in between). Reads only: no dirty lines are left
    for the next call to write back."""

    def __init__(self, cache_bytes: int | None = None):
        size = 2 * (cache_bytes if cache_bytes is not None else last_level_cache_bytes())
        self.lines = np.ones(size, np.uint8)[::64]

    def __call__(self) -> None:
        self.lines.max()
