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

import time  # noqa: F401 - tests patch edgeinf.bench.time.perf_counter, the clock measure() reads

from ..memory import peak_rss_bytes, reset_peak_rss, rss_bytes
from .machine import StolenTime, cpu_model, environment
from .results import document, finish, machine_line, write_document
from .stats import Evictor, Stats, compare, last_level_cache_bytes, measure, summarize
from .sweep import IMAGE_RANGES, SCHEMA, VARIANTS, auto_variant, bench_model, image_input, random_inputs, variant_fits

__all__ = [
    "IMAGE_RANGES",
    "SCHEMA",
    "StolenTime",
    "VARIANTS",
    "Evictor",
    "Stats",
    "auto_variant",
    "bench_model",
    "compare",
    "cpu_model",
    "document",
    "environment",
    "finish",
    "image_input",
    "last_level_cache_bytes",
    "machine_line",
    "measure",
    "peak_rss_bytes",
    "random_inputs",
    "reset_peak_rss",
    "rss_bytes",
    "summarize",
    "variant_fits",
    "write_document",
]
