"""The server's own Prometheus families: requests by code and latency histograms.

Written only from the event loop (no lock); `/metrics` renders them after the families of
`edgeinf.metrics` (every loaded model's calls and latency, and the A/B drift).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from .. import metrics
from ..metrics import LATENCY_BUCKETS_S, Family


class ServerStats:
    def __init__(self):
        self.requests: defaultdict = defaultdict(int)  # (route, model, variant, code) -> count
        self.latency: dict = {}  # (model, variant) -> [bucket counts..., sum]
        self.in_flight = 0
        self.reloads: defaultdict = defaultdict(int)  # (model, outcome) -> count

    def observe(self, route: str, model: str, variant: str, code: int, seconds: float | None) -> None:
        self.requests[(route, model, variant, str(code))] += 1
        if seconds is not None and route == "predict":
            entry = self.latency.get((model, variant))
            if entry is None:
                entry = self.latency[(model, variant)] = [0] * (len(LATENCY_BUCKETS_S) + 1) + [0.0]
            entry[bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
            entry[-1] += seconds

    def families(self, registry) -> list[Family]:
        requests = Family("edgeinf_serve_requests_total", "counter", "HTTP requests answered, by route and code.", [])
        for (route, model, variant, code), n in sorted(self.requests.items()):
            labels = {"route": route, "model": model, "variant": variant, "code": code}
            requests.samples.append(("", labels, n))
        latency = Family(
            "edgeinf_serve_request_latency_seconds",
            "histogram",
            "Time from a predict request's arrival to its answer (body, decode, queue, model, encode).",
            [],
        )
        for (model, variant), entry in sorted(self.latency.items()):
            latency.add_histogram({"model": model, "variant": variant}, entry[:-1], entry[-1])
        in_flight = Family("edgeinf_serve_in_flight", "gauge", "Requests being answered now.", [])
        in_flight.samples.append(("", {}, self.in_flight))
        queue = Family("edgeinf_serve_queue_depth", "gauge", "Requests waiting or running, per variant.", [])
        deadline = Family("edgeinf_serve_deadline_seconds", "gauge", "The deadline of each variant's requests.", [])
        replaced = Family(
            "edgeinf_serve_workers_replaced_total",
            "counter",
            "Workers replaced after a call ran past its deadline.",
            [],
        )
        for entry in registry.values():
            for name, variant in entry.variants.items():
                labels = {"model": entry.config.name, "variant": name, "sha256": variant.sha256}
                queue.samples.append(("", labels, variant.pool.pending))
                deadline.samples.append(("", labels, variant.pool.deadline_s))
                replaced.samples.append(("", labels, variant.pool.replaced))
        reloads = Family("edgeinf_serve_reloads_total", "counter", "Model reloads by outcome.", [])
        for (model, outcome), n in sorted(self.reloads.items()):
            reloads.samples.append(("", {"model": model, "outcome": outcome}, n))
        return [requests, latency, in_flight, queue, deadline, replaced, reloads]

    def render(self, registry) -> str:
        lines = [line for family in self.families(registry) for line in family.lines()]
        return metrics.render() + "\n".join(lines) + "\n"
