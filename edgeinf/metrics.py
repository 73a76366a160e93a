"""Per-model counters and latency histograms, and their Prometheus text exposition.

Every `Model` owns a `ModelMetrics`. The hot path (`Model.run`, `invoke`, `run_image`)
adds four stage times and one bucket increment, under the lock the Model already
holds; nothing here takes a lock of its own. Readers copy the lists (atomic under the
GIL) and compute everything else at read time: counts, sums, percentiles.

Buckets are fixed (`LATENCY_BUCKETS_S`, ten per decade from 1 µs to 10 s), so two
processes or two models are always comparable and a percentile is read from the
histogram the way Prometheus' ``histogram_quantile`` reads it.

>>> import edgeinf.metrics
>>> text = edgeinf.metrics.render()            # every live Model, Prometheus text format
>>> exporter = edgeinf.metrics.serve(port=0)   # doctest: +SKIP
>>> exporter.url                               # doctest: +SKIP
'http://127.0.0.1:40123/metrics'
"""

from __future__ import annotations

import itertools
import logging
import math
import weakref
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Renard R10 steps: ten per decade keep the interpolated percentile within a few percent.
_R10 = (1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0)
LATENCY_BUCKETS_S: tuple[float, ...] = tuple(
    float(f"{step * 10.0**exp:.3g}") for exp in range(-6, 1) for step in _R10
) + (10.0,)
"""Upper bounds (seconds, inclusive) of the latency histogram; a last +Inf bucket follows."""

STAGES = ("preprocess", "inference", "postprocess")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_instances = itertools.count()
_registry: weakref.WeakSet = weakref.WeakSet()
_extra_collectors: weakref.WeakSet = weakref.WeakSet()


@dataclass(frozen=True)
class Snapshot:
    """A consistent-enough copy of one model's metrics.

    Attributes:
        calls: completed calls (successful ones; each lands in one bucket).
        errors: calls that raised.
        buckets: count per bucket (not cumulative), ``len(LATENCY_BUCKETS_S) + 1`` long.
        stage_s: seconds spent per stage, summed over calls, keyed by `STAGES`.
        sum_s: total seconds of the counted calls.
    """

    calls: int
    errors: int
    buckets: tuple[int, ...]
    stage_s: dict
    sum_s: float

    def quantile(self, q: float) -> float:
        """Latency (seconds) at quantile ``q`` in [0, 1], read from the buckets; nan without calls."""
        return bucket_quantile(q, self.buckets, LATENCY_BUCKETS_S)

    @property
    def p50_s(self) -> float:
        return self.quantile(0.50)

    @property
    def p95_s(self) -> float:
        return self.quantile(0.95)

    @property
    def p99_s(self) -> float:
        return self.quantile(0.99)

    @property
    def mean_s(self) -> float:
        return self.sum_s / self.calls if self.calls else math.nan

    def to_dict(self) -> dict:
        return {
            "calls": self.calls,
            "errors": self.errors,
            "sum_s": self.sum_s,
            "p50_s": self.p50_s,
            "p95_s": self.p95_s,
            "p99_s": self.p99_s,
            "stage_s": dict(self.stage_s),
        }


def bucket_quantile(q: float, counts: Iterable[int], bounds: tuple[float, ...]) -> float:
    """Quantile from non-cumulative bucket counts, interpolating linearly inside a bucket.

    The same rule as Prometheus' ``histogram_quantile``: the first bucket starts at 0, and
    a rank that falls in the +Inf bucket returns the highest finite bound.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    counts = list(counts)
    if len(counts) != len(bounds) + 1:
        raise ValueError(f"expected {len(bounds) + 1} bucket counts (bounds + Inf), got {len(counts)}")
    total = sum(counts)
    if total == 0:
        return math.nan
    rank = q * total
    cumulative = 0
    for i, count in enumerate(counts):
        if count and cumulative + count >= rank:
            if i == len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i else 0.0
            return lower + (bounds[i] - lower) * (rank - cumulative) / count
        cumulative += count
    return bounds[-1]


class ModelMetrics:
    """Counters of one Model. The Model writes the lists directly (see `Model.run`).

    Attributes:
        model: the model file's name (a label).
        backend: the backend name (a label).
        instance: a number unique in this process, so two Models of one file stay apart.
        buckets: per-bucket call counts, written by the Model under its lock.
        stage_s: [preprocess, inference, postprocess] seconds, written likewise.
        errors: calls that raised.
    """

    __slots__ = ("model", "backend", "instance", "buckets", "stage_s", "errors", "__weakref__")

    def __init__(self, model: str, backend: str):
        self.model = model
        self.backend = backend
        self.instance = next(_instances)
        self.buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self.stage_s = [0.0, 0.0, 0.0]
        self.errors = 0
        _registry.add(self)

    def observe(self, pre_s: float, infer_s: float, post_s: float) -> None:
        """Record one call (the Model inlines the same three lines on its hot path)."""
        s = self.stage_s
        s[0] += pre_s
        s[1] += infer_s
        s[2] += post_s
        self.buckets[bisect_left(LATENCY_BUCKETS_S, pre_s + infer_s + post_s)] += 1

    def snapshot(self) -> Snapshot:
        buckets = tuple(self.buckets)  # list copies are atomic under the GIL
        stage = list(self.stage_s)
        return Snapshot(
            calls=sum(buckets),
            errors=self.errors,
            buckets=buckets,
            stage_s=dict(zip(STAGES, stage)),
            sum_s=sum(stage),
        )

    def reset(self) -> None:
        self.buckets[:] = [0] * len(self.buckets)
        self.stage_s[:] = [0.0, 0.0, 0.0]
        self.errors = 0

    def labels(self) -> dict[str, str]:
        return {"model": self.model, "backend": self.backend, "instance": str(self.instance)}


def live() -> list[ModelMetrics]:
    """Metrics of every Model still referenced in this process, oldest first."""
    return sorted(_registry, key=lambda m: m.instance)


def register_collector(collector) -> None:
    """Add an object whose ``prometheus_families()`` yields more families (e.g. an `ABTest`).

    Held weakly: a collector disappears from the output when it is garbage collected.
    """
    _extra_collectors.add(collector)


# -- Prometheus text exposition format 0.0.4 -------------------------------------------


def escape_label_value(value: str) -> str:
    """Backslash, double quote and line feed escaped, as the format requires in label values."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Backslash and line feed escaped, as the format requires in HELP lines."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers without a fraction, ``+Inf``/``-Inf``/``NaN`` spelled the format's way."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in labels.items()) + "}"


@dataclass
class Family:
    """One metric family: a name, its HELP and TYPE, and samples ``(suffix, labels, value)``."""

    name: str
    type: str
    help: str
    samples: list

    def add_histogram(self, labels: dict, buckets, sum_s: float, count: int | None = None) -> None:
        """The samples of one histogram series from per-bucket (not cumulative) counts over
        LATENCY_BUCKETS_S and +Inf; ``count`` defaults to the buckets' total."""
        cumulative = 0
        for bound, n in zip(LATENCY_BUCKETS_S + (math.inf,), buckets):
            cumulative += n
            le = "+Inf" if math.isinf(bound) else repr(bound)
            self.samples.append(("_bucket", {**labels, "le": le}, cumulative))
        self.samples.append(("_sum", labels, sum_s))
        self.samples.append(("_count", labels, cumulative if count is None else count))

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {escape_help(self.help)}", f"# TYPE {self.name} {self.type}"]
        for suffix, labels, value in self.samples:
            out.append(f"{self.name}{suffix}{_labels(labels)} {format_value(value)}")
        return out


def model_families(metrics: Iterable[ModelMetrics]) -> list[Family]:
    """The Prometheus families of the given models' metrics."""
    calls = Family("edgeinf_model_calls_total", "counter", "Completed model calls.", [])
    errors = Family("edgeinf_model_errors_total", "counter", "Model calls that raised an error.", [])
    latency = Family(
        "edgeinf_model_latency_seconds",
        "histogram",
        "Latency of a model call (preprocess + inference + postprocess), in seconds.",
        [],
    )
    stages = Family(
        "edgeinf_model_stage_seconds_total",
        "counter",
        "Seconds spent per stage of model calls: preprocess (input checks, copy or image conversion), "
        "inference (the runtime), postprocess (output naming and dequantization).",
        [],
    )
    quantiles = Family(
        "edgeinf_model_latency_quantile_seconds",
        "gauge",
        "Latency percentiles estimated from the histogram buckets (NaN before the first call).",
        [],
    )
    for m in metrics:
        snap = m.snapshot()
        labels = m.labels()
        calls.samples.append(("", labels, snap.calls))
        errors.samples.append(("", labels, snap.errors))
        latency.add_histogram(labels, snap.buckets, snap.sum_s, count=snap.calls)
        for stage in STAGES:
            stages.samples.append(("", {**labels, "stage": stage}, snap.stage_s[stage]))
        for q in (0.5, 0.95, 0.99):
            quantiles.samples.append(("", {**labels, "quantile": repr(q)}, snap.quantile(q)))
    return [calls, errors, latency, stages, quantiles]


def render(models: Iterable | None = None) -> str:
    """Prometheus text exposition (format 0.0.4) of every live Model, or of ``models``.

    Args:
        models: `Model` or `ModelMetrics` objects; default: all live ones, plus registered
            collectors such as A/B tests.

    Returns:
        The exposition text, ending with a line feed.
    """
    if models is None:
        chosen = live()
        extra = sorted(_extra_collectors, key=id)
    else:
        chosen = [getattr(m, "metrics", m) for m in models]
        extra = []
    families = model_families(chosen)
    for collector in extra:
        families.extend(collector.prometheus_families())
    lines = [line for family in merge_families(families) for line in family.lines()]
    return "\n".join(lines) + "\n"


def merge_families(families: Iterable[Family]) -> list[Family]:
    """One family per name, its samples in order of appearance.

    The format allows one HELP and TYPE per metric and all its samples together; two
    collectors of one kind (two A/B tests, two pipelines) each yield the same families,
    which must go out as one.

    Raises:
        ValueError: two families share a name but not a type.
    """
    by_name: dict[str, Family] = {}
    for family in families:
        first = by_name.get(family.name)
        if first is None:
            by_name[family.name] = Family(family.name, family.type, family.help, list(family.samples))
        elif first.type != family.type:
            raise ValueError(f"metric {family.name!r} is both a {first.type} and a {family.type}")
        else:
            first.samples.extend(family.samples)
    return list(by_name.values())


# -- the optional exporter (edgeinf.exporter, imported only when serving) -----------------


def serve(port: int = 9464, host: str = "127.0.0.1", *, timeout_s: float = 10.0, max_connections: int = 32):
    """Serve `render()` over HTTP on ``host:port``, each client on its own daemon thread.

    Localhost by default: expose it wider only on purpose (``host="0.0.0.0"``).
    ``port=0`` picks a free port (read it back from ``exporter.port``). A client that
    stalls is dropped after ``timeout_s`` without a byte and never delays another scrape.
    Returns an `edgeinf.exporter.Exporter`; stop it with ``close()``.
    """
    from .exporter import Exporter

    return Exporter(port=port, host=host, timeout_s=timeout_s, max_connections=max_connections)
