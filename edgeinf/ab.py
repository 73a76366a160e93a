"""A/B variants: run a share of calls on a second model and record how far it drifts.

The caller always gets exactly what the primary returned; the candidate (another
backend, an int8 variant, a runtime upgrade) sees the same input on a fixed share of
calls, and each pair of outputs is scored by a comparer: the largest absolute error and
top-1 agreement for tensors, box IoU for detections. The report puts the drift next
to both latencies, which is how a runtime upgrade that silently loses accuracy is found.

>>> ab = edgeinf.ABTest(edgeinf.load("m.tflite"), edgeinf.load("m_int8.tflite"), fraction=0.1)  # doctest: +SKIP
>>> outputs = ab.run(x)            # the primary's outputs, unchanged             # doctest: +SKIP
>>> print(ab.report().to_text())                                                 # doctest: +SKIP
"""

from __future__ import annotations

import collections
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import metrics
from .bench import Stats, summarize

log = logging.getLogger(__name__)

Comparer = Callable[[object, object], Mapping[str, float]]


# -- comparers ------------------------------------------------------------------------------


def _as_float(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def compare_tensors(primary: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Drift between two dicts of outputs (matched by name, else by position).

    Returns:
        ``max_abs_error``: the largest ``|primary - candidate|`` over every output;
        ``top1_agreement``: the share of rows (first axis) whose largest element is at the
        same index in both, averaged over outputs; and ``max_abs_error:<name>`` per output.
    """
    p_items = list(primary.items())
    c_items = list(candidate.items())
    if len(p_items) != len(c_items):
        raise ValueError(f"primary has {len(p_items)} outputs, candidate {len(c_items)}: cannot compare")
    if {k for k, _ in p_items} == {k for k, _ in c_items}:
        c_items = [(k, candidate[k]) for k, _ in p_items]
    out: dict[str, float] = {}
    worst = 0.0
    agreements = []
    for (name, p), (_, c) in zip(p_items, c_items):
        p, c = _as_float(p), _as_float(c)
        if p.shape != c.shape:
            raise ValueError(f"output {name!r}: primary shape {p.shape}, candidate shape {c.shape}")
        error = float(np.max(np.abs(p - c))) if p.size else 0.0
        out[f"max_abs_error:{name}"] = error
        worst = max(worst, error)
        if p.size:
            rows = p.shape[0] if p.ndim > 1 else 1
            agree = np.argmax(p.reshape(rows, -1), axis=1) == np.argmax(c.reshape(rows, -1), axis=1)
            agreements.append(float(np.mean(agree)))
    out["max_abs_error"] = worst
    out["top1_agreement"] = float(np.mean(agreements)) if agreements else 1.0
    return out


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (xmin, ymin, xmax, ymax) boxes."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _boxes(detections) -> list[tuple[tuple[float, ...], float]]:
    out = []
    for d in detections:
        if hasattr(d, "box"):
            out.append((tuple(float(v) for v in d.box), float(getattr(d, "score", math.nan))))
        else:
            out.append((tuple(float(v) for v in d[:4]), float(d[4]) if len(d) > 4 else math.nan))
    return out


def compare_boxes(primary, candidate, match_iou: float = 0.5) -> dict[str, float]:
    """Drift between two lists of detections (objects with ``.box``/``.score``, e.g. `Face`, or rows).

    Each primary detection is paired with the unused candidate detection it overlaps
    most (best pairs first).

    Returns:
        ``box_iou``: mean IoU of each primary detection with its pair (0 when unpaired; 1
        when both lists are empty); ``matched``: the share of primary detections paired
        with IoU >= ``match_iou``; ``count_delta``: candidate count minus primary count;
        ``score_abs_error_max``: the largest score difference among pairs.
    """
    p, c = _boxes(primary), _boxes(candidate)
    if not p:
        return {
            "box_iou": 1.0 if not c else 0.0,
            "matched": 1.0,
            "count_delta": float(len(c)),
            "score_abs_error_max": 0.0,
        }
    pairs = sorted(
        ((box_iou(pb, cb), i, j) for i, (pb, _) in enumerate(p) for j, (cb, _) in enumerate(c)), reverse=True
    )
    best = [0.0] * len(p)
    used_p, used_c = set(), set()
    score_error = 0.0
    for iou, i, j in pairs:
        if iou <= 0 or i in used_p or j in used_c:
            continue
        used_p.add(i)
        used_c.add(j)
        best[i] = iou
        if not (math.isnan(p[i][1]) or math.isnan(c[j][1])):
            score_error = max(score_error, abs(p[i][1] - c[j][1]))
    return {
        "box_iou": float(np.mean(best)),
        "matched": float(np.mean([b >= match_iou for b in best])),
        "count_delta": float(len(c) - len(p)),
        "score_abs_error_max": score_error,
    }


def default_comparer(primary_output, candidate_output) -> dict[str, float]:
    """Tensors for dicts of arrays, boxes for lists of detections."""
    if isinstance(primary_output, Mapping):
        return compare_tensors(primary_output, candidate_output)
    return compare_boxes(primary_output, candidate_output)


# -- input adaptation (float primary, int8 candidate) -----------------------------------------


def adapt_inputs(inputs, specs):
    """Inputs for a Model ``candidate`` whose input dtypes differ (e.g. float -> int8 quantized)."""

    def convert(array, spec):
        array = np.asarray(array)
        if array.dtype == spec.dtype:
            return array
        if spec.quantization is not None and np.issubdtype(spec.dtype, np.integer):
            q = spec.quantization
            info = np.iinfo(spec.dtype)
            real = array.astype(np.float64)
            return np.clip(np.round(real / q.scale + q.zero_point), info.min, info.max).astype(spec.dtype)
        if np.issubdtype(spec.dtype, np.floating) and np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"cannot feed integer input {array.dtype} to the candidate's float input {spec.name!r}: "
                "give ABTest a candidate_input function"
            )
        return array.astype(spec.dtype)

    if isinstance(inputs, Mapping):
        by_name = {s.name: s for s in specs}
        return {k: convert(v, by_name[k]) if k in by_name else v for k, v in inputs.items()}
    if isinstance(inputs, (list, tuple)):
        return [convert(a, s) for a, s in zip(inputs, specs)]
    return convert(inputs, specs[0])


def _dequantized(outputs, specs) -> dict:
    by_name = {s.name: s for s in specs}
    out = {}
    for name, value in outputs.items():
        spec = by_name.get(name)
        if spec is not None and spec.quantization is not None and value.dtype in (np.int8, np.uint8, np.int16):
            value = spec.quantization.dequantize(value)
        out[name] = value
    return out


# -- the test ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriftStats:
    """One drift figure over the compared calls."""

    mean: float
    min: float
    max: float
    last: float
    count: int


@dataclass(frozen=True)
class ABReport:
    """What an `ABTest` has seen so far.

    Attributes:
        calls: calls answered (by the primary).
        compared: calls also run on the candidate and scored.
        skipped: sampled calls dropped because the background candidate was still busy.
        candidate_errors: candidate runs that raised (never passed to the caller).
        last_error: the last candidate error, as text.
        primary_latency: every primary call (µs).
        primary_latency_compared: the primary on the compared calls only (µs).
        candidate_latency: the candidate on the compared calls (µs).
        drift: per comparer figure, its statistics over the compared calls.
    """

    name: str
    calls: int
    compared: int
    skipped: int
    candidate_errors: int
    last_error: str | None
    primary_latency: Stats | None
    primary_latency_compared: Stats | None
    candidate_latency: Stats | None
    drift: dict

    @property
    def latency_ratio(self) -> float:
        """Candidate median over primary median on the same (compared) calls."""
        if not self.candidate_latency or not self.primary_latency_compared:
            return math.nan
        return self.candidate_latency.median_us / self.primary_latency_compared.median_us

    def to_dict(self) -> dict:
        def stats(s):
            return None if s is None else s.to_dict()

        return {
            "name": self.name,
            "calls": self.calls,
            "compared": self.compared,
            "skipped": self.skipped,
            "candidate_errors": self.candidate_errors,
            "last_error": self.last_error,
            "latency_us": {
                "primary": stats(self.primary_latency),
                "primary_compared": stats(self.primary_latency_compared),
                "candidate": stats(self.candidate_latency),
                "candidate_over_primary": self.latency_ratio,
            },
            "drift": {k: vars(v) for k, v in self.drift.items()},
        }

    def to_text(self) -> str:
        lines = [
            f"A/B {self.name}: {self.calls} calls, {self.compared} compared, {self.skipped} skipped, "
            f"{self.candidate_errors} candidate errors"
        ]
        for arm, s in (("primary", self.primary_latency_compared), ("candidate", self.candidate_latency)):
            if s is not None:
                lines.append(
                    f"  {arm:<9} median {s.median_us:10.1f} us  p95 {s.p95_us:10.1f} us  max {s.max_us:10.1f} us"
                )
        if not math.isnan(self.latency_ratio):
            lines.append(f"  candidate / primary median latency: {self.latency_ratio:.3f}")
        for key, d in sorted(self.drift.items()):
            lines.append(f"  {key:<28} mean {d.mean:.6g}  min {d.min:.6g}  max {d.max:.6g}")
        if self.last_error:
            lines.append(f"  last candidate error: {self.last_error}")
        return "\n".join(lines)


class ABTest:
    """Serve the primary, shadow a share of calls on the candidate, and score the difference.

    Args:
        primary: what answers the caller: a `Model`, a `FaceDetector`, or any object with
            the method called through this test (``run``, ``detect``) or a callable.
        candidate: the variant under test, called the same way. When both are Models and
            the candidate's inputs are quantized integers where the primary's are float,
            inputs are quantized with the candidate's parameters and its outputs
            dequantized before comparing.
        fraction: share of calls also run on the candidate, spread evenly (0.25: every
            fourth call). 0 never, 1 always.
        comparer: ``f(primary_output, candidate_output) -> {figure: value}``; default:
            `compare_tensors` for dicts of arrays, `compare_boxes` for detection lists.
        candidate_input: converts the caller's input for the candidate (default: the
            automatic float -> quantized conversion for Models, otherwise unchanged).
        background: run the candidate on a worker thread so the caller never waits for
            it; a sampled call that finds the worker busy is skipped (counted).
        name: the ``ab`` label in Prometheus output.
        window: how many latency samples per arm are kept (the most recent).

    Raises:
        ValueError: ``fraction`` outside [0, 1].
    """

    def __init__(
        self,
        primary,
        candidate,
        fraction: float = 0.1,
        *,
        comparer: Comparer | None = None,
        candidate_input: Callable | None = None,
        background: bool = False,
        name: str = "ab",
        window: int = 10000,
    ):
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise ValueError(f"fraction must be a number within [0, 1], got {fraction!r}")
        self.primary = primary
        self.candidate = candidate
        self.fraction = float(fraction)
        self.comparer = comparer or default_comparer
        self.candidate_input = candidate_input
        self.name = name
        self._lock = threading.Lock()
        self._credit = 0.0
        self._calls = 0
        self._compared = 0
        self._skipped = 0
        self._errors = 0
        self._last_error: str | None = None
        self._primary_us: collections.deque = collections.deque(maxlen=window)
        self._primary_compared_us: collections.deque = collections.deque(maxlen=window)
        self._candidate_us: collections.deque = collections.deque(maxlen=window)
        self._drift: dict[str, list[float]] = {}  # figure -> [sum, min, max, last, count]
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        if background:
            self._queue = queue.Queue(maxsize=1)
            self._worker = threading.Thread(
                target=self._serve, args=(self._queue,), name=f"edgeinf-ab-{name}", daemon=True
            )
            self._worker.start()
        metrics.register_collector(self)

    # -- calling --------------------------------------------------------------------------
    def run(self, inputs, **kwargs):
        """``primary.run(inputs, **kwargs)``; a share of calls also runs the candidate."""
        return self._call("run", inputs, kwargs)

    def detect(self, image, **kwargs):
        """``primary.detect(image, **kwargs)`` (e.g. `FaceDetector`); a share also runs the candidate."""
        return self._call("detect", image, kwargs)

    def __call__(self, inputs, **kwargs):
        """For callable primaries and candidates."""
        return self._call(None, inputs, kwargs)

    def _call(self, method: str | None, inputs, kwargs):
        fn = self.primary if method is None else getattr(self.primary, method)
        start = time.perf_counter()
        output = fn(inputs, **kwargs)
        primary_us = (time.perf_counter() - start) * 1e6
        with self._lock:
            self._calls += 1
            self._primary_us.append(primary_us)
            self._credit += self.fraction
            sampled = self._credit >= 1.0 - 1e-12
            if sampled:
                self._credit -= 1.0
        if sampled:
            if self._queue is None:
                self._shadow(method, inputs, kwargs, output, primary_us)
            else:
                job = (method, _copy(inputs), kwargs, _copy(output), primary_us)
                try:
                    self._queue.put_nowait(job)
                except queue.Full:
                    with self._lock:
                        self._skipped += 1
        return output

    def _shadow(self, method, inputs, kwargs, primary_output, primary_us: float) -> None:
        """Run the candidate on the same input and score it; errors are recorded, never raised."""
        try:
            fn = self.candidate if method is None else getattr(self.candidate, method)
            candidate_in, dequantize = self._candidate_args(method, inputs)
            call_kwargs = dict(kwargs)
            if dequantize:
                call_kwargs["dequantize"] = True
            start = time.perf_counter()
            candidate_output = fn(candidate_in, **call_kwargs)
            candidate_us = (time.perf_counter() - start) * 1e6
            reference = primary_output
            primary_specs = getattr(self.primary, "outputs", None)
            if isinstance(primary_output, Mapping) and isinstance(primary_specs, tuple):
                reference = _dequantized(primary_output, primary_specs)  # compare real values, not codes
            figures = dict(self.comparer(reference, candidate_output))
        except Exception as exc:  # the candidate must never break the caller's call
            log.warning("A/B %s: candidate failed: %s: %s", self.name, type(exc).__name__, exc)
            with self._lock:
                self._errors += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._compared += 1
            self._primary_compared_us.append(primary_us)
            self._candidate_us.append(candidate_us)
            for key, value in figures.items():
                value = float(value)
                d = self._drift.get(key)
                if d is None:
                    self._drift[key] = [value, value, value, value, 1]
                else:
                    d[0] += value
                    d[1] = min(d[1], value)
                    d[2] = max(d[2], value)
                    d[3] = value
                    d[4] += 1

    def _candidate_args(self, method, inputs):
        if self.candidate_input is not None:
            return self.candidate_input(inputs), False
        specs = getattr(self.candidate, "inputs", None)
        if method != "run" or not specs or not isinstance(specs, tuple):
            return inputs, False
        quantized = any(s.quantization is not None for s in (*self.candidate.outputs, *specs))
        return adapt_inputs(inputs, specs), quantized

    def _serve(self, jobs: queue.Queue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            self._shadow(*job)
            jobs.task_done()

    # -- reading ----------------------------------------------------------------------------
    def report(self) -> ABReport:
        with self._lock:
            primary = list(self._primary_us)
            primary_compared = list(self._primary_compared_us)
            candidate = list(self._candidate_us)
            drift = {k: DriftStats(d[0] / d[4], d[1], d[2], d[3], int(d[4])) for k, d in self._drift.items()}
            counts = (self._calls, self._compared, self._skipped, self._errors, self._last_error)
        return ABReport(
            self.name,
            *counts,
            summarize(primary) if primary else None,
            summarize(primary_compared) if primary_compared else None,
            summarize(candidate) if candidate else None,
            drift,
        )

    def wait(self, timeout: float = 10.0) -> None:
        """Background mode: wait until the queued candidate run (if any) is scored."""
        if self._queue is None:
            return
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.001)

    def close(self) -> None:
        """Stop the background worker (if any). The primary and candidate stay open."""
        worker, jobs = self._worker, self._queue
        if worker is not None and jobs is not None and worker.is_alive():
            self.wait()
            jobs.put(None)
            worker.join(timeout=10)

    def __enter__(self) -> ABTest:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def prometheus_families(self) -> list[metrics.Family]:
        """Counters, drift and latency of this test for `edgeinf.metrics.render`."""
        r = self.report()
        labels = {"ab": self.name}
        calls = metrics.Family("edgeinf_ab_calls_total", "counter", "Calls answered by the A/B primary.", [])
        calls.samples.append(("", labels, r.calls))
        compared = metrics.Family("edgeinf_ab_compared_total", "counter", "Calls also scored on the candidate.", [])
        compared.samples.append(("", labels, r.compared))
        errors = metrics.Family(
            "edgeinf_ab_candidate_errors_total", "counter", "Candidate runs that raised an error.", []
        )
        errors.samples.append(("", labels, r.candidate_errors))
        drift = metrics.Family(
            "edgeinf_ab_drift", "gauge", "Output drift of the candidate against the primary, per figure.", []
        )
        for key, d in sorted(r.drift.items()):
            drift.samples.append(("", {**labels, "figure": key, "stat": "mean"}, d.mean))
            drift.samples.append(("", {**labels, "figure": key, "stat": "max"}, d.max))
        latency = metrics.Family(
            "edgeinf_ab_latency_median_seconds", "gauge", "Median latency of each arm on the compared calls.", []
        )
        for arm, s in (("primary", r.primary_latency_compared), ("candidate", r.candidate_latency)):
            latency.samples.append(("", {**labels, "arm": arm}, s.median_us / 1e6 if s else math.nan))
        return [calls, compared, errors, drift, latency]


def _copy(value):
    """A private copy of arrays (the caller may reuse its buffers while the worker runs)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return value
