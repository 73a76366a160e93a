"""The field's measuring method as a library call.

Fixed input, warm-up runs, then timed runs; the statistics are order statistics of the
per-call times (median, p95, p99, max), never a mean alone. Tiny calls are timed in
batches so the clock's own cost does not dominate. Contenders are compared side by
side by interleaving them, so drift on a shared machine favours neither.

>>> stats = measure(lambda: sum(range(100)), runs=200)
>>> stats.median_us > 0
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

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

    @property
    def throughput_per_s(self) -> float:
        return 1e6 / self.median_us if self.median_us > 0 else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "throughput_per_s": self.throughput_per_s}


def summarize(per_call_us, batch: int = 1) -> Stats:
    """Statistics of per-call times in microseconds (as measured, one value per timed run)."""
    t = np.asarray(per_call_us, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no timings to summarize")
    p50, p95, p99 = np.percentile(t, [50, 95, 99])
    return Stats(
        int(t.size), batch, float(p50), float(p95), float(p99), float(t.max()), float(t.min()), float(t.mean())
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
) -> Stats:
    """Time ``fn()``: ``warmup`` calls, then ``runs`` timed runs of ``batch`` calls each.

    Args:
        batch: calls per timed run; None picks enough calls to last ``min_batch_s``.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    if batch is None:
        batch = _batch_size(fn, min_batch_s)
    times = np.empty(runs)
    clock = time.perf_counter
    for i in range(runs):
        start = clock()
        for _ in range(batch):
            fn()
        times[i] = (clock() - start) / batch
    return summarize(times * 1e6, batch)


def compare(
    contenders: dict[str, Callable[[], object]],
    *,
    warmup: int = 10,
    runs: int = 100,
    batch: int | None = 1,
    rounds: int = 5,
) -> dict[str, Stats]:
    """Measure several functions interleaved (A B C A B C ...), ``rounds`` slices each."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    batches = {name: (batch or _batch_size(fn, 200e-6)) for name, fn in contenders.items()}
    per_round = max(1, runs // rounds)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    clock = time.perf_counter
    for _ in range(rounds):
        for name, fn in contenders.items():
            b = batches[name]
            for _ in range(per_round):
                start = clock()
                for _ in range(b):
                    fn()
                samples[name].append((clock() - start) / b * 1e6)
    return {name: summarize(samples[name], batches[name]) for name in contenders}
