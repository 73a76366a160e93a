"""`Pipeline`: stages chained as a small graph, each on its own workers, with deadlines.

A frame enters, the stages whose inputs are ready run (a stage with no inputs takes the
frame), and the frame's `FrameResult` is complete when every stage has an outcome. A
stage runs on its own worker threads (or processes: `edgeinf.pipeline.process`), so
frame N+1 is detected while frame N's crops go through the second model.

Nothing blocks forever: a stage call that overruns its ``timeout_s`` is marked
``timeout`` for that frame (the stages after it are ``skipped``) and its worker is
replaced; a frame that overruns the pipeline's ``timeout_s`` is answered with what is
done. A stage that keeps failing is opened by its `CircuitBreaker` (marked ``open``,
not called) and tried again after ``reset_s``.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import EdgeInfError, InputError
from ..sources import Frame, Source, SourceEnded
from .breaker import CLOSED, CircuitBreaker
from .metrics import PipelineMetrics

if TYPE_CHECKING:
    from types import EllipsisType

log = logging.getLogger(__name__)

MIN_RATE_HZ = 1e-3
"""The lowest rate limit: a scheduler's rate of 0 becomes one call per ~17 minutes, not a division by 0."""

MAX_STUCK_WORKERS = 4
"""Hung calls a stage may leave behind (each holds a thread) before it gets no new worker."""

PACING_WINDOW = 16
"""Recent calls per stage whose median predicts the stage's next call (pacing)."""

PACING_MIN_CALLS = 4
"""Calls every stage must have made before admission is paced (no prediction before)."""

_UNREACHED = object()  # a stage a frame has not reached yet (not in its results)


class PipelineError(EdgeInfError, RuntimeError):
    """The pipeline is closed, or a frame was refused because it is full."""


@dataclass(frozen=True)
class StageResult:
    """What one stage did with one frame.

    Attributes:
        status: ``ok``; ``error`` (it raised); ``timeout`` (over its deadline or the
            frame's); ``open`` (its circuit breaker is open); ``skipped`` (an input was
            not ok, or its rate limit let the frame pass).
        value: the stage's return value (a list, one per item, for a fan-out stage).
        error: why it is not ok.
        latency_s: time in the stage's call.
    """

    status: str
    value: Any = None
    error: str | None = None
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class FrameResult:
    """Every stage's outcome for one frame.

    Attributes:
        frame: the frame (its ``seq`` and ``timestamp_s`` included).
        stages: `StageResult` by stage name.
        latency_s: from the frame's timestamp (capture) to this answer.
    """

    frame: Frame
    stages: dict[str, StageResult] = field(default_factory=dict)
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.stages.values())

    def __getitem__(self, stage: str) -> Any:
        """The value of a stage that succeeded; raises `PipelineError` naming why it did not."""
        result = self.stages[stage]
        if not result.ok:
            raise PipelineError(
                f"stage {stage!r} has no value for frame {self.frame.seq}: {result.status}: {result.error}"
            )
        return result.value

    def to_dict(self) -> dict:
        """JSON-ready: seq, timestamp, latency and each stage's status, value (via ``to_json``) and error."""
        return {
            "seq": self.frame.seq,
            "timestamp_s": self.frame.timestamp_s,
            "latency_s": self.latency_s,
            "stages": {
                name: {
                    "status": r.status,
                    "latency_s": r.latency_s,
                    **({"value": to_json(r.value)} if r.ok else {"error": r.error}),
                }
                for name, r in self.stages.items()
            },
        }


def to_json(value: Any) -> Any:
    """Plain JSON data from a stage value: arrays become lists, objects with ``to_dict`` dicts."""
    if hasattr(value, "to_dict"):
        return to_json(value.to_dict())
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: to_json(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


class ThreadStage:
    """A stage whose worker threads each build their own callable: give this as ``fn`` to `Pipeline.add`.

    For a callable that serves one thread at a time, such as one holding a `Model` (a
    Model runs one call at a time, so ``workers=2`` over one shared callable queues its
    calls). Each worker calls ``factory(*args, **options)`` once, in its own thread, on its
    first frame, and keeps what it returns. N workers then run N calls at once wherever
    the runtime releases the GIL (LiteRT, NCNN, ONNX Runtime and the int8 engine do). Threads
    share the frame with no copy and no pipe; their Python steps still take turns on the GIL
    (`ProcessStage` runs them in processes instead).

    >>> pipe.add("landmarks", ThreadStage(face_mesh_stage), workers=2)  # doctest: +SKIP
    """

    def __init__(self, factory: Callable[..., Callable], *args: Any, options: dict | None = None):
        if not callable(factory):
            raise InputError(f"ThreadStage needs a callable factory, got {factory!r}")
        self.factory = factory
        self.args = args
        self.options = dict(options or {})

    def build(self) -> Callable:
        built = self.factory(*self.args, **self.options)
        if not callable(built):
            raise InputError(f"{self.factory!r} built {built!r}, which is not callable")
        return built

    def __call__(self, *args):
        raise PipelineError("a ThreadStage runs on a Pipeline's workers, each with its own callable, not directly")


class Stage:
    """One step of a pipeline: a callable, its inputs, its workers and its limits.

    Created by `Pipeline.add`; the scheduler-facing knobs (``rate_hz``, ``variant``,
    ``workers``) are changed through `Pipeline.configure`.
    """

    def __init__(
        self,
        name: str,
        fn: Callable | dict[str, Callable],
        *,
        inputs: Sequence[str],
        for_each: str | None,
        timeout_s: float | None,
        workers: int,
        breaker: CircuitBreaker,
        rate_hz: float | None,
        inline: bool = False,
    ):
        self.name = name
        self.variants = dict(fn) if isinstance(fn, dict) else {"default": fn}
        if not self.variants or not all(callable(f) for f in self.variants.values()):
            raise InputError(f"stage {name!r} needs a callable (or a dict of callables by variant), got {fn!r}")
        self.variant = next(iter(self.variants))
        self.inputs = tuple(inputs)
        self.for_each = for_each
        self.timeout_s = timeout_s
        self.inline = inline
        self.workers = 0 if inline else workers
        self.breaker = breaker
        self.rate_hz = rate_hz
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.live_workers: list[_Worker] = []
        self.stuck_workers = 0
        self.last_start_s = -float("inf")
        self.recent_s: collections.deque[float] = collections.deque(maxlen=PACING_WINDOW)  # ok calls' times

    def paced(self) -> bool:
        """Whether admission paces frames for this stage: not when it may pass frames without a call
        (a rate limit, an open breaker, no worker), which its recent call times do not predict."""
        return self.rate_hz is None and self.breaker.state == CLOSED and (self.inline or bool(self.live_workers))

    def predicted_s(self) -> float | None:
        """The median of the recent calls' times (0 inline); None before `PACING_MIN_CALLS` calls."""
        if self.inline:
            return 0.0
        if len(self.recent_s) < PACING_MIN_CALLS:
            return None
        return sorted(self.recent_s)[len(self.recent_s) // 2]

    @property
    def fn(self) -> Callable:
        return self.variants[self.variant]

    # How the stage runs its calls; `edgeinf.pipeline.process` overrides these for processes.
    def new_worker(self, pipeline: Pipeline) -> _Worker:
        return _Worker(pipeline, self)

    def call_on(self, worker: _Worker, job: _Job) -> Any:
        fn = self.fn
        return self.call(job, worker.own(fn) if isinstance(fn, ThreadStage) else fn)

    def abandon(self, pipeline: Pipeline, worker: _Worker) -> None:
        """A call hung: leave its thread to finish on its own and serve the stage with a new one."""
        worker.retired = worker.abandoned = True
        if worker in self.live_workers:
            self.live_workers.remove(worker)
        self.stuck_workers += 1
        if self.stuck_workers <= MAX_STUCK_WORKERS:
            pipeline._fit_workers(self)
        else:
            log.error("stage %s: %d calls hung; no new worker until one returns", self.name, self.stuck_workers)

    def returned(self, pipeline: Pipeline, worker: _Worker) -> None:
        """A hung call finally returned: its thread ends, and the stage may get a worker back."""
        if worker.abandoned:
            self.stuck_workers -= 1
            if not pipeline._closed:
                pipeline._fit_workers(self)

    def wait_ready(self) -> None:
        """Return once the stage's workers can take calls (threads: at once)."""

    def close(self) -> None:
        """Release what the stage holds beyond its threads (processes, shared memory)."""

    def call(self, job: _Job, fn: Callable | None = None) -> Any:
        """Run the stage on a frame: ``fn(frame, *inputs)``, once per item for a fan-out stage."""
        frame = job.frame
        args = [job.settled(name).value for name in self.inputs]
        fn = fn or self.fn
        if self.for_each is None:
            return fn(frame, *args)
        at = self.inputs.index(self.for_each)
        out = []
        for item in args[at]:
            args[at] = item
            out.append(fn(frame, *args))
        return out


class _Worker:
    """A thread serving one stage; abandoned (and replaced) when a call hangs."""

    def __init__(self, pipeline: Pipeline, stage: Stage):
        self.pipeline = pipeline
        self.stage = stage
        self.retired = False  # stop after the current task (hung, or fewer workers wanted)
        self.abandoned = False  # its call hung and a new worker took over
        self.current: tuple | None = None  # (job, started_s) while in a call
        self.built: dict[ThreadStage, Callable] = {}  # this thread's own callable of each ThreadStage variant
        self.thread = threading.Thread(target=self._loop, name=f"edgeinf-stage:{stage.name}", daemon=True)

    def own(self, spec: ThreadStage) -> Callable:
        """This worker's callable of a `ThreadStage`, built on first use (the stage holds the spec)."""
        fn = self.built.get(spec)
        if fn is None:
            fn = self.built[spec] = spec.build()
        return fn

    def _loop(self) -> None:
        stage, pipeline = self.stage, self.pipeline
        while not self.retired:
            job = stage.queue.get()
            if job is not None:  # None wakes the workers up to see which of them retired
                pipeline._run_task(self, job)


class _Job:
    __slots__ = ("id", "frame", "results", "future", "deadline_s", "done")

    def __init__(self, id_: int, frame: Frame, deadline_s: float | None):
        self.id = id_
        self.frame = frame
        self.results: dict[str, StageResult | None] = {}  # None: queued or running
        self.future: Future = Future()
        self.deadline_s = deadline_s
        self.done = False

    def settled(self, stage: str) -> StageResult:
        """The outcome of a stage that has settled for this frame."""
        result = self.results[stage]
        assert result is not None, f"stage {stage!r} has not settled"
        return result


class Pipeline:
    """Stages as a graph, threads per stage, deadlines and circuit breakers.

    Args:
        name: for metrics and messages.
        timeout_s: the deadline of a whole frame (None: per-stage deadlines only).
        max_in_flight: frames inside the pipeline at once; `submit` waits (or refuses)
            beyond it, so a camera source drops stale frames instead of queueing them.
            Default: one per stage worker (every worker busy, no frame waiting in a queue).
        pacing: within ``max_in_flight``, admit a frame only once it is predicted to pass
            every stage without waiting in a queue (from each stage's recent call times):
            the wait happens before the frame is taken (`run`) or stamped (`submit` of an
            array), so the frame that goes in is the newest. Off by default: it lowers the
            median latency where other processes share the cores, and costs throughput on
            cores the pipeline has to itself (docs/pipeline.md).
        clock: injected for tests.

    >>> pipe = Pipeline("faces", timeout_s=1.0)                       # doctest: +SKIP
    >>> pipe.add("faces", lambda frame: detector.detect(frame.data, frame.format))
    >>> pipe.add("landmarks", landmarker, inputs=["faces"], for_each="faces", timeout_s=0.2)
    >>> for result in pipe.run(edgeinf.sources.open("picamera2")):
    ...     print(result.to_dict())
    """

    def __init__(
        self,
        name: str = "pipeline",
        *,
        timeout_s: float | None = None,
        max_in_flight: int | None = None,
        pacing: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        _check_timeout("the pipeline's timeout_s", timeout_s)
        if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
            raise InputError(f"max_in_flight must be an integer >= 1, got {max_in_flight!r}")
        self.name = name
        self.timeout_s = timeout_s
        self.clock = clock
        self.stages: dict[str, Stage] = {}
        self.metrics = PipelineMetrics(name)
        self._max_in_flight = max_in_flight
        self.pacing = pacing
        self._lock = threading.Lock()
        self._paced = threading.Condition(self._lock)  # notified when a stage settles: a paced frame may go in
        self._slots: threading.BoundedSemaphore | None = None
        self._ids = itertools.count()
        self._seq = itertools.count()
        self._jobs: dict[int, _Job] = {}
        self._timers: list[tuple[float, int, str, _Job, Stage | None, _Worker | None]] = []  # a heap
        self._timer_wakeup = threading.Condition(self._lock)
        self._watchdog: threading.Thread | None = None
        self._order: list[Stage] = []
        self._started = False
        self._closed = False
        self._ready = threading.Event()  # set once every stage's workers are ready
        self._resolved: list[tuple[Future, FrameResult]] = []  # answered under the lock, delivered after it
        self._inline: list[tuple[_Job, Stage]] = []  # inline stages made ready, run after the lock

    # -- building ----------------------------------------------------------------------
    def add(
        self,
        name: str,
        fn: Callable | dict[str, Callable],
        *,
        inputs: Sequence[str] = (),
        for_each: str | None = None,
        timeout_s: float | None = None,
        workers: int = 1,
        breaker: CircuitBreaker | None = None,
        rate_hz: float | None = None,
        inline: bool = False,
    ) -> Stage:
        """Add a stage called as ``fn(frame, *values of inputs)``.

        Args:
            name: unique stage name; its value appears under this name in each result.
            fn: the callable, or ``{variant: callable}`` (the first is used until
                `configure` picks another). A `ProcessStage` runs in child processes; a
                `ThreadStage` gives each worker thread a callable of its own.
            inputs: names of earlier stages whose values the stage takes.
            for_each: one of ``inputs`` whose value is a list: ``fn`` is called per item
                (fan-out) and the stage's value is the list of results (the join).
            timeout_s: deadline of one call; over it the frame's result is ``timeout``.
            workers: threads (or processes) serving the stage.
            breaker: its circuit breaker (default: open after 3 failures, retry after 5 s).
            rate_hz: call at most this often; frames in between are ``skipped``.
            inline: run on the thread that settled the stage's last input, right after
                it, instead of on workers of its own: for cheap glue (picking a value,
                formatting) that is not worth a thread hand-off. No ``timeout_s``.

        Raises:
            InputError: a duplicate name, an unknown input, or a bad limit.
        """
        if self._started:
            raise PipelineError("stages must be added before the first frame")
        if name in self.stages:
            raise InputError(f"a stage named {name!r} already exists")
        if isinstance(inputs, str):
            raise InputError(f"inputs must be a list of stage names, got the string {inputs!r}")
        unknown = [i for i in inputs if i not in self.stages]
        if unknown:
            raise InputError(f"stage {name!r} takes unknown input(s) {unknown}; stages so far: {list(self.stages)}")
        if for_each is not None and for_each not in inputs:
            raise InputError(f"for_each must name one of the stage's inputs {list(inputs)}, got {for_each!r}")
        _check_timeout(f"stage {name!r} timeout_s", timeout_s)
        if not isinstance(workers, int) or not 1 <= workers <= 64:
            raise InputError(f"workers must be an integer from 1 to 64, got {workers!r}")
        if rate_hz is not None and not rate_hz > 0:
            raise InputError(f"rate_hz must be positive, got {rate_hz!r}")
        from .process import ProcessStage

        if inline and (isinstance(fn, (ProcessStage, ThreadStage)) or timeout_s is not None):
            raise InputError(
                f"stage {name!r}: an inline stage runs on another stage's thread: no ProcessStage, ThreadStage or timeout_s"
            )
        cls = ProcessStage.stage_class if isinstance(fn, ProcessStage) else Stage
        stage = cls(
            name,
            fn,
            inputs=inputs,
            for_each=for_each,
            timeout_s=timeout_s,
            workers=workers,
            breaker=breaker or CircuitBreaker(clock=self.clock),
            rate_hz=rate_hz,
            inline=inline,
        )
        self.stages[name] = stage
        self._order.append(stage)
        self.metrics.add_stage(name)
        return stage

    def configure(
        self,
        stage: str,
        *,
        rate_hz: float | None | EllipsisType = ...,
        variant: str | None = None,
        workers: int | None = None,
    ) -> None:
        """Change a stage while running: its rate limit, its variant, its worker count.

        The power `Scheduler` (or the app) calls this to trade quality for power.
        """
        target = self.stages.get(stage)
        if target is None:
            raise InputError(f"no stage {stage!r}; stages are {list(self.stages)}")
        with self._lock:
            if rate_hz is not ...:
                if rate_hz is not None and not rate_hz > 0:
                    raise InputError(f"rate_hz must be positive or None, got {rate_hz!r}")
                target.rate_hz = rate_hz
            if variant is not None:
                if variant not in target.variants:
                    raise InputError(f"stage {stage!r} has variants {list(target.variants)}, not {variant!r}")
                target.variant = variant
            if workers is not None:
                if not isinstance(workers, int) or not 1 <= workers <= 64:
                    raise InputError(f"workers must be an integer from 1 to 64, got {workers!r}")
                if target.inline:
                    raise InputError(f"stage {stage!r} is inline: it runs on its input's thread, with no workers")
                target.workers = workers
                if self._started:
                    self._fit_workers(target)

    def apply(self, stage: str, decision) -> None:
        """Follow a power `Scheduler` decision for one stage: its variant and its admission rate.

        The stage's variants are named by the profiled configuration's label
        (``"face_detection_short_range/tflite/t1"``) or its variant name; an infinite
        rate lifts the limit.

        >>> pipe.apply("faces", scheduler.step())         # doctest: +SKIP
        """
        target = self.stages.get(stage)
        if target is None:
            raise InputError(f"no stage {stage!r}; stages are {list(self.stages)}")
        config = decision.config
        variant = next((v for v in (config.label, config.variant) if v in target.variants), None)
        if variant is None:
            raise InputError(
                f"stage {stage!r} has variants {list(target.variants)}: none is {config.label!r} or {config.variant!r}"
            )
        rate = float(decision.rate_per_s)
        rate_hz = None if math.isinf(rate) else max(rate, MIN_RATE_HZ)
        self.configure(stage, variant=variant, rate_hz=rate_hz)

    # -- running -----------------------------------------------------------------------
    def start(self) -> Pipeline:
        """Start the workers and wait until they are ready (the first `submit` does it too).

        Process stages start their processes and build their models here, so that the
        first frames' deadlines are not spent on it.
        """
        with self._lock:
            if self._closed:
                raise PipelineError(f"pipeline {self.name!r} is closed")
            if self._started:
                ready = True
            else:
                ready = False
                self._start_locked()
        if not ready:
            for stage in self._order:
                stage.wait_ready()
            self._ready.set()
        self._ready.wait()
        return self

    def _start_locked(self) -> None:
        if not self.stages:
            raise PipelineError("a pipeline needs at least one stage")
        self._started = True
        workers = sum(s.workers for s in self._order)
        self._slots = threading.BoundedSemaphore(self._max_in_flight or max(1, workers))
        for stage in self._order:
            self._fit_workers(stage)
        self._watchdog = threading.Thread(target=self._watch, name=f"edgeinf-watchdog:{self.name}", daemon=True)
        self._watchdog.start()

    @property
    def _room(self) -> threading.BoundedSemaphore:
        """The slots of the frames in flight, made when the pipeline starts."""
        assert self._slots is not None, "the pipeline has not started"
        return self._slots

    def submit(
        self, frame: Frame | np.ndarray, *, format: str = "bgr", block: bool = True, timeout_s: float | None = None
    ) -> Future:
        """Send a frame in; returns a `concurrent.futures.Future` of its `FrameResult`.

        Args:
            frame: a `Frame` from a source, or an image array (given a sequence number
                and the time it is admitted, in ``format``).
            block: wait for room when ``max_in_flight`` frames are inside; else raise.
            timeout_s: how long to wait for room.

        Raises:
            PipelineError: the pipeline is closed, or full and ``block`` is False / the
                wait timed out (counted in ``metrics.frames_rejected``).
        """
        self.start()
        if not isinstance(frame, (Frame, np.ndarray)):
            raise InputError(f"expected an edgeinf.sources.Frame or an image array, got {type(frame).__name__}")
        waited = time.monotonic()
        if not self._room.acquire(blocking=block, timeout=timeout_s if block else None):
            with self._lock:
                self.metrics.frames_rejected += 1
            raise PipelineError(f"pipeline {self.name!r} is full ({self._max_in_flight or 'default'} frames in flight)")
        if block:
            left = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - waited))
            self._wait_for_pace(left)
        if not isinstance(frame, Frame):  # stamped once admitted: its latency starts inside the pipeline
            frame = Frame(frame, format, next(self._seq), self.clock())
        with self._lock:
            if self._closed:
                self._room.release()
                raise PipelineError(f"pipeline {self.name!r} is closed")
            deadline = self.clock() + self.timeout_s if self.timeout_s is not None else None
            job = _Job(next(self._ids), frame, deadline)
            self._jobs[job.id] = job
            self.metrics.frames_submitted += 1
            if deadline is not None:
                self._arm(deadline, "frame", job, None, None)
            self._advance(job)
        self._deliver()
        return job.future

    def process(self, frame: Frame | np.ndarray, **options) -> FrameResult:
        """Submit one frame and wait for its result."""
        return self.submit(frame, **options).result()

    async def asubmit(self, frame: Frame | np.ndarray, **options) -> FrameResult:
        """`submit` for asyncio: awaits the frame's result without blocking the event loop."""
        loop = asyncio.get_running_loop()
        future = await loop.run_in_executor(None, lambda: self.submit(frame, **options))
        return await asyncio.wrap_future(future)

    def run(self, source: Source, *, max_frames: int | None = None) -> Generator[FrameResult, None, None]:
        """Feed a source's newest frames in as room frees up; yield results as they complete.

        Frames the pipeline had no room for are the source's to drop (``source.stats``):
        the pipeline always works on the newest frames. Ends at the end of the source.
        """
        done: queue.SimpleQueue = queue.SimpleQueue()
        pending = taken = 0
        self.start()  # processes and models ready before the first frame is captured
        with source:
            while max_frames is None or taken < max_frames:
                # Wait for room first, then take the newest frame: never one that aged in a queue.
                self._room.acquire()
                self._room.release()
                self._wait_for_pace(None)
                try:
                    frame = source.read()
                except SourceEnded:
                    break
                finally:
                    self.metrics.frames_dropped_by_source = source.stats.dropped
                self.submit(frame).add_done_callback(done.put)
                pending += 1
                taken += 1
                while pending and not done.empty():
                    pending -= 1
                    yield done.get().result()
        while pending:
            pending -= 1
            yield done.get().result()

    async def arun(self, source: Source, *, max_frames: int | None = None):
        """`run` as an async iterator."""
        loop = asyncio.get_running_loop()
        results = self.run(source, max_frames=max_frames)
        sentinel = object()
        try:
            while True:
                result = await loop.run_in_executor(None, next, results, sentinel)
                if result is sentinel:
                    return
                yield result
        finally:
            results.close()

    def close(self) -> None:
        """Stop the workers and answer every frame still inside (as ``timeout``). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for job in list(self._jobs.values()):
                self._finish_frame(job, "the pipeline was closed")
            for stage in self._order:
                for worker in stage.live_workers:
                    worker.retired = True
                    stage.queue.put(None)
                stage.live_workers = []
            self._timer_wakeup.notify_all()
            self._paced.notify_all()
        self._deliver()
        for stage in self._order:
            stage.close()

    def __enter__(self) -> Pipeline:
        return self  # workers start with the first frame, once every stage is added

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals (called with self._lock held unless said otherwise) ------------------
    def _fit_workers(self, stage: Stage) -> None:
        while len(stage.live_workers) < stage.workers:
            worker = stage.new_worker(self)
            stage.live_workers.append(worker)
            worker.thread.start()
        while len(stage.live_workers) > stage.workers:
            stage.live_workers.pop().retired = True
            stage.queue.put(None)

    def _advance(self, job: _Job) -> None:
        """Start or settle every stage whose inputs are all settled."""
        progressed = True
        while progressed and not job.done:
            progressed = False
            for stage in self._order:
                if stage.name in job.results:  # settled, or queued (None)
                    continue
                inputs = [job.results.get(i) for i in stage.inputs]
                settled = [r for r in inputs if r is not None]
                if len(settled) < len(inputs):
                    continue
                progressed = True
                failed = [i for i, r in zip(stage.inputs, settled) if not r.ok]
                now = self.clock()
                if failed:
                    self._settle(job, stage, StageResult("skipped", error=f"input {failed[0]!r} was not ok"))
                elif stage.rate_hz is not None and now - stage.last_start_s < 1.0 / stage.rate_hz:
                    self._settle(job, stage, StageResult("skipped", error=f"rate limit {stage.rate_hz} Hz"))
                elif not stage.live_workers and not stage.inline:
                    self._settle(job, stage, StageResult("open", error=f"no worker: {stage.stuck_workers} calls hung"))
                elif not stage.breaker.allow():
                    self._settle(job, stage, StageResult("open", error="circuit breaker open after repeated failures"))
                else:
                    stage.last_start_s = now
                    job.results[stage.name] = None  # queued: neither settled nor to be started again
                    if stage.inline:
                        self._inline.append((job, stage))
                    else:
                        stage.queue.put(job)
        if not job.done and len(job.results) == len(self._order) and all(job.results.values()):
            self._complete(job)

    def _run_task(self, worker: _Worker, job: _Job) -> None:
        """On a worker thread, without the lock: one stage call for one frame."""
        stage = worker.stage
        with self._lock:
            if job.done or job.results.get(stage.name) is not None:
                return
            started = self.clock()
            worker.current = (job, started)
            if stage.timeout_s is not None:
                self._arm(started + stage.timeout_s, "stage", job, stage, worker)
        try:
            value = stage.call_on(worker, job)
            status, error = "ok", None
        except Exception as exc:  # a stage's failure is the frame's result, never the pipeline's end
            value, status, error = None, "error", f"{type(exc).__name__}: {exc}"
        with self._lock:
            worker.current = None
            latency = self.clock() - started
            if worker.abandoned:
                stage.returned(self, worker)
            elif not job.done and job.results.get(stage.name) is None:  # else: it timed out meanwhile
                stage.breaker.record(status == "ok")
                if status == "ok":
                    self.metrics.stage_latency[stage.name].observe(latency)
                    stage.recent_s.append(latency)
                self._settle(job, stage, StageResult(status, value, error, latency))
                self._advance(job)
        self._deliver()

    def _settle(self, job: _Job, stage: Stage, result: StageResult) -> None:
        job.results[stage.name] = result
        self.metrics.stage_outcomes[stage.name][result.status] += 1
        if self.pacing:  # a paced admission may be waiting for this stage
            self._paced.notify_all()

    def _wait_for_pace(self, limit_s: float | None) -> None:
        """Without the lock: wait until a new frame is predicted to pass every stage unqueued.

        The first prediction bounds the wait (a hung call cannot hold admission); a stage
        that settles earlier than predicted lets the frame in earlier.
        """
        if not self.pacing:
            return
        with self._lock:
            now = self.clock()
            until = self._admission_time(now)
            if limit_s is not None:
                until = min(until, now + limit_s)
            while not self._closed and now < until:
                if not self._paced.wait(until - now):
                    return  # the predicted time passed
                now = self.clock()
                until = min(until, self._admission_time(now))

    def _admission_time(self, now: float) -> float:
        """The earliest time a frame entering then waits in no stage's queue, predicted from
        each stage's median call time and the frames inside; ``now`` before every stage has one.
        """
        predicted: dict[str, float] = {}
        paced = [stage for stage in self._order if stage.paced()]
        for stage in self._order:
            seconds = stage.predicted_s() if stage in paced else 0.0
            if seconds is None:
                return now
            predicted[stage.name] = seconds
        # When each stage's workers are free, once the frames inside went through (in order).
        free = {stage.name: [now] * max(1, stage.workers) for stage in self._order}
        for job in self._jobs.values():
            ends: dict[str, float] = {}
            for stage in self._order:
                result = job.results.get(stage.name, _UNREACHED)
                if result is not None and result is not _UNREACHED:  # settled: holds no worker
                    ends[stage.name] = now
                    continue
                cost, workers = predicted[stage.name], free[stage.name]
                arrival = max((ends[name] for name in stage.inputs), default=now)
                running = next((w.current[1] for w in stage.live_workers if w.current and w.current[0] is job), None)
                if running is not None:  # its call started: it ends as predicted, or soon if overdue
                    arrival, cost = now, max(0.0, running + cost - now)
                earliest = workers.index(min(workers))
                workers[earliest] = ends[stage.name] = max(arrival, workers[earliest]) + cost
        # A new frame reaches each stage this long after it enters, when nothing waits.
        offsets: dict[str, float] = {}
        start = now
        for stage in self._order:
            offsets[stage.name] = max((offsets[name] + predicted[name] for name in stage.inputs), default=0.0)
            if stage in paced:
                start = max(start, min(free[stage.name]) - offsets[stage.name])
        return start

    def _complete(self, job: _Job) -> None:
        job.done = True
        del self._jobs[job.id]
        self.metrics.frames_completed += 1
        latency = self.clock() - job.frame.timestamp_s
        self.metrics.end_to_end.observe(latency)
        result = FrameResult(job.frame, {s.name: job.settled(s.name) for s in self._order}, latency)
        self._room.release()
        self._resolved.append((job.future, result))

    def _deliver(self) -> None:
        """Run the inline stages made ready, then set the futures answered meanwhile, without the lock.

        Futures' callbacks may submit frames.
        """
        self._run_inline()
        with self._lock:
            resolved, self._resolved = self._resolved, []
        for future, result in resolved:
            future.set_result(result)

    def _run_inline(self) -> None:
        """Without the lock, on this thread: the inline stages made ready meanwhile (and those they make ready)."""
        while True:
            with self._lock:
                if not self._inline:
                    return
                job, stage = self._inline.pop(0)
                if job.done or job.results.get(stage.name) is not None:
                    continue
                started = self.clock()
            try:
                value, status, error = stage.call(job), "ok", None
            except Exception as exc:  # as on a worker: the frame's result, never the pipeline's end
                value, status, error = None, "error", f"{type(exc).__name__}: {exc}"
            with self._lock:
                if job.done or job.results.get(stage.name) is not None:
                    continue
                latency = self.clock() - started
                stage.breaker.record(status == "ok")
                if status == "ok":
                    self.metrics.stage_latency[stage.name].observe(latency)
                self._settle(job, stage, StageResult(status, value, error, latency))
                self._advance(job)

    def _finish_frame(self, job: _Job, why: str, overran: bool = False) -> None:
        """Answer a frame with what is done; ``overran``: its deadline passed (else: closing)."""
        for stage in self._order:
            if stage.name in job.results and job.results[stage.name] is None:  # queued or running
                running = next((w for w in stage.live_workers if w.current and w.current[0] is job), None)
                if overran and running is not None:
                    # A call still running at the frame's deadline overran it: a failure, and its
                    # worker is replaced, as when the stage's own deadline passes.
                    stage.breaker.record(False)
                    stage.abandon(self, running)
                else:
                    stage.breaker.release()  # a trial call that never ran must not hold the breaker
            if job.results.get(stage.name) is None:
                self._settle(job, stage, StageResult("timeout", error=why))
        self._complete(job)

    def _arm(self, deadline: float, kind: str, job: _Job, stage: Stage | None, worker: _Worker | None) -> None:
        heapq.heappush(self._timers, (deadline, next(self._ids), kind, job, stage, worker))
        self._timer_wakeup.notify()

    def _expire(self, kind: str, job: _Job, stage: Stage | None, worker: _Worker | None) -> None:
        if job.done:
            return
        if kind == "frame":
            self._finish_frame(job, f"the frame's deadline of {self.timeout_s} s passed", overran=True)
            return
        assert stage is not None and worker is not None  # a stage's deadline names both
        if job.results.get(stage.name) is not None or worker.current is None or worker.current[0] is not job:
            return  # the call finished in time
        stage.breaker.record(False)
        self._settle(job, stage, StageResult("timeout", error=f"over the stage's deadline of {stage.timeout_s} s"))
        stage.abandon(self, worker)
        self._advance(job)

    def _watch(self) -> None:
        """The watchdog thread: fires stage and frame deadlines."""
        while True:
            with self._lock:
                if self._closed:
                    return
                now = self.clock()
                while self._timers and self._timers[0][0] <= now:
                    _, _, kind, job, stage, worker = heapq.heappop(self._timers)
                    self._expire(kind, job, stage, worker)
                if not self._resolved:
                    self._timer_wakeup.wait(self._timers[0][0] - now if self._timers else None)
            self._deliver()


def _check_timeout(what: str, value) -> None:
    if value is not None and not (isinstance(value, (int, float)) and value > 0):
        raise InputError(f"{what} must be a positive number of seconds or None, got {value!r}")
