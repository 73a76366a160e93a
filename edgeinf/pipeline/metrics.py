"""Per-stage and end-to-end latency of pipelines, exposed through `edgeinf.metrics.render`."""

from __future__ import annotations

import math
from bisect import bisect_left

from .. import metrics as base

STATUSES = ("ok", "error", "timeout", "open", "skipped")


class Histogram:
    """Latency counts in `edgeinf.metrics.LATENCY_BUCKETS_S`; written under the pipeline's lock."""

    def __init__(self):
        self.buckets = [0] * (len(base.LATENCY_BUCKETS_S) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(base.LATENCY_BUCKETS_S, seconds)] += 1
        self.sum_s += seconds

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def quantile(self, q: float) -> float:
        return base.bucket_quantile(q, self.buckets, base.LATENCY_BUCKETS_S)


class PipelineMetrics:
    """Frames in and out, per-stage outcomes and latency, end-to-end latency.

    Attributes:
        frames_submitted, frames_completed: frames given to and answered by the pipeline.
        frames_rejected: frames refused because the pipeline was full (``block=False``).
        frames_dropped_by_source: frames the source replaced before `Pipeline.run` took
            them (the newest frame goes in; the stale ones are counted here).
        stage_latency: per stage, the latency of the calls that finished in time.
        stage_outcomes: per stage, a count per status (`STATUSES`).
        end_to_end: from the frame's capture (or submission) to its answer.
    """

    def __init__(self, name: str):
        self.name = name
        self.frames_submitted = 0
        self.frames_completed = 0
        self.frames_rejected = 0
        self.frames_dropped_by_source = 0
        self.stage_latency: dict[str, Histogram] = {}
        self.stage_outcomes: dict[str, dict[str, int]] = {}
        self.end_to_end = Histogram()
        base.register_collector(self)

    def add_stage(self, stage: str) -> None:
        self.stage_latency[stage] = Histogram()
        self.stage_outcomes[stage] = dict.fromkeys(STATUSES, 0)

    def summary(self) -> dict:
        """Counts and p50/p99 latencies (seconds) as plain data."""

        def latency(h: Histogram) -> dict:
            return {"count": h.count, "p50_s": _finite(h.quantile(0.5)), "p99_s": _finite(h.quantile(0.99))}

        return {
            "frames_submitted": self.frames_submitted,
            "frames_completed": self.frames_completed,
            "frames_rejected": self.frames_rejected,
            "frames_dropped_by_source": self.frames_dropped_by_source,
            "end_to_end": latency(self.end_to_end),
            "stages": {
                name: {"latency": latency(self.stage_latency[name]), **self.stage_outcomes[name]}
                for name in self.stage_latency
            },
        }

    def prometheus_families(self) -> list[base.Family]:
        labels = {"pipeline": self.name}
        frames = base.Family("edgeinf_pipeline_frames_total", "counter", "Frames by fate.", [])
        for fate, value in (
            ("submitted", self.frames_submitted),
            ("completed", self.frames_completed),
            ("rejected", self.frames_rejected),
            ("dropped_by_source", self.frames_dropped_by_source),
        ):
            frames.samples.append(("", {**labels, "fate": fate}, value))
        outcomes = base.Family(
            "edgeinf_pipeline_stage_calls_total", "counter", "Stage calls per frame, by outcome.", []
        )
        for stage, counts in self.stage_outcomes.items():
            for status, value in counts.items():
                outcomes.samples.append(("", {**labels, "stage": stage, "status": status}, value))
        latency = base.Family(
            "edgeinf_pipeline_latency_seconds",
            "histogram",
            'Latency per stage, and end to end (stage="end_to_end") from capture to answer.',
            [],
        )
        for stage, histogram in (*self.stage_latency.items(), ("end_to_end", self.end_to_end)):
            stage_labels = {**labels, "stage": stage}
            cumulative = 0
            for bound, count in zip(base.LATENCY_BUCKETS_S + (math.inf,), histogram.buckets):
                cumulative += count
                le = "+Inf" if math.isinf(bound) else repr(bound)
                latency.samples.append(("_bucket", {**stage_labels, "le": le}, cumulative))
            latency.samples.append(("_sum", stage_labels, histogram.sum_s))
            latency.samples.append(("_count", stage_labels, histogram.count))
        return [frames, outcomes, latency]


def _finite(value: float):
    return None if math.isnan(value) else value
