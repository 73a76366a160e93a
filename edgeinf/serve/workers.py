"""Worker threads that run one variant's model calls off the event loop.

Each worker owns one loaded model. Requests wait in one queue per variant, bounded by
``capacity`` (waiting plus running, and places reserved by bodies being decoded): one more is
`Overloaded` (503). A request carries its deadline: a worker skips a request whose deadline
passed while it waited, or would pass during a call of the usual length (after a stall the
queue drains faster, and no call is spent on an answer nobody waits for), and a call that
runs past it is answered 504 by the server, which calls `Pool.expire`: a worker stuck in a
call is retired (it exits, closing its model, whenever the call returns) and a new worker
with a freshly loaded model takes its place, so a hung model never holds the service.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ab import ABTest

log = logging.getLogger(__name__)

RECENT_CALLS = 32  # calls remembered to tell a stuck call from a slow one
STUCK_FACTOR = 2.0  # a stuck call has run this many times longer than the slowest recent one


class Overloaded(Exception):
    """The variant's queue is full."""


class DeadlineExceeded(Exception):
    """The request's deadline passed before a worker reached it."""


class Job:
    """One call: ``call(model)`` runs on a worker; ``future`` gets its result."""

    __slots__ = ("call", "deadline", "future", "released")

    def __init__(self, call: Callable, deadline: float):
        self.call = call
        self.deadline = deadline
        self.future: Future = Future()
        self.released = False


class Worker(threading.Thread):
    def __init__(self, pool: Pool, model=None):
        super().__init__(name=f"edgeinf-serve-{pool.name}", daemon=True)
        self.pool = pool
        self.model = model
        self.retired = False
        self.job: Job | None = None  # the call running now, and since when (monotonic)
        self.call_started: float | None = None

    def run(self) -> None:
        pool = self.pool
        if self.model is None:
            try:
                self.model = pool.loader()
            except Exception:  # never let it escape the thread; the pool runs on its other workers
                log.exception("%s: loading a replacement model failed", pool.name)
                pool._lost(self)
                return
        try:
            while not self.retired:
                job = pool.queue.get()
                if job is None:
                    break
                if not job.future.set_running_or_notify_cancel():
                    continue  # expired while waiting: the server already answered
                if time.monotonic() + pool.typical_call_s() > job.deadline:
                    job.future.set_exception(DeadlineExceeded())  # it would answer too late: no call wasted on it
                    continue
                self.job = job
                self.call_started = started = time.monotonic()
                try:
                    result = pool.invoke(job.call, self.model)
                except BaseException as exc:  # handed to the request, never raised in the thread
                    job.future.set_exception(exc)
                else:
                    job.future.set_result(result)
                finally:
                    self.call_started = self.job = None
                    if not self.retired:  # a stuck call's time would excuse the next stuck one
                        pool.recent_calls.append(time.monotonic() - started)
        finally:
            pool._lost(self)
            _close(self.model)


class Pool:
    """The workers and the queue of one variant.

    Args:
        name: for thread names and logs (``model/variant``).
        loader: loads one more model (a replacement worker's).
        models: the loaded models, one worker each.
        capacity: requests waiting or running at most.
        deadline_s: a request's time once admitted.
    """

    def __init__(self, name: str, loader: Callable, models: list, capacity: int, deadline_s: float):
        self.name = name
        self.loader = loader
        self.capacity = capacity
        self.deadline_s = deadline_s
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.ab: ABTest | None = None  # an ABTest whose primary is this variant (set by the registry)
        self._lock = threading.Lock()
        self._pending = 0
        self._workers: list[Worker] = []
        self._closed = False
        self.replaced = 0
        self.recent_calls: deque[float] = deque(maxlen=RECENT_CALLS)  # seconds of the last calls that returned
        for model in models:
            self._start(Worker(self, model))

    # -- the request side (event loop) --------------------------------------------------------
    def reserve(self) -> bool:
        """Hold a place for a request still being decoded; False when the queue is full.

        The place counts toward ``capacity`` at once, so a flood of bodies is refused before
        any is decoded, rather than decoded and then refused.
        """
        with self._lock:
            if self._closed or self._pending >= self.capacity:
                return False
            self._pending += 1
            return True

    def unreserve(self) -> None:
        """Give back a place from `reserve` that no job will use."""
        with self._lock:
            self._pending -= 1

    def submit(self, call: Callable, reserved: bool = False) -> Job:
        """Queue ``call(model)``, in a place from `reserve` or a new one.

        Raises:
            Overloaded: the queue is full (or closed: a reserved place is then given back).
        """
        with self._lock:
            if reserved and self._closed:
                self._pending -= 1
            if self._closed or (not reserved and self._pending >= self.capacity):
                raise Overloaded(self.name)
            if not reserved:
                self._pending += 1
        job = Job(call, time.monotonic() + self.deadline_s)
        job.future.add_done_callback(lambda _f: self._release(job))
        self.queue.put(job)
        return job

    def expire(self, job: Job) -> None:
        """A request's deadline passed: free its place, and replace any worker stuck in a call.

        A worker is stuck when this request's call has run for more than half the deadline, or
        any call for more than a whole one, and in both cases for more than twice the slowest
        of the recent calls that returned. A call that started late (its request waited in the
        queue) is left to finish, and so is one as slow as its neighbours (cores shared with
        decoding under load stretch every call): an overloaded but healthy model keeps its
        workers, and loading a replacement would only add to the load.
        """
        job.future.cancel()  # still queued: the worker skips it
        self._release(job)
        now = time.monotonic()
        with self._lock:
            stuck = [w for w in self._workers if not w.retired and self._stuck(w, job, now)]
            for worker in stuck:
                worker.retired = True
                self.replaced += 1
            closed = self._closed
        for _ in stuck:
            log.warning("%s: a call ran past the %.3f s deadline; starting a new worker", self.name, self.deadline_s)
            if not closed:
                self._start(Worker(self))

    def typical_call_s(self) -> float:
        """The median of the recent calls (0 before any): what a call about to start will take."""
        recent = sorted(self.recent_calls)
        return recent[len(recent) // 2] if recent else 0.0

    def _stuck(self, worker: Worker, job: Job, now: float) -> bool:
        started = worker.call_started
        if started is None:
            return False
        ran = now - started
        limit = self.deadline_s / 2 if worker.job is job else self.deadline_s
        return ran > limit and ran > STUCK_FACTOR * max(self.recent_calls, default=0.0)

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def live_workers(self) -> int:
        with self._lock:
            return sum(1 for w in self._workers if not w.retired)

    def any_model(self):
        """A model of this variant (the A/B candidate runs on it: `Model` calls are thread-safe)."""
        with self._lock:
            for worker in self._workers:
                if not worker.retired and worker.model is not None:
                    return worker.model
        raise RuntimeError(f"{self.name} has no live worker")

    def invoke(self, call: Callable, model):
        """Run one call on a worker (the A/B test runs it when this variant is its primary)."""
        if self.ab is not None:
            self.ab.primary.local.model = model
            return call(self.ab)
        return call(model)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop taking requests, let queued ones finish, stop the workers and close their models."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        for _ in workers:
            self.queue.put(None)  # after everything already queued
        deadline = time.monotonic() + timeout_s
        for worker in workers:
            if not worker.retired:
                worker.join(max(0.0, deadline - time.monotonic()))

    # -- internals --------------------------------------------------------------------------
    def _start(self, worker: Worker) -> None:
        with self._lock:
            self._workers.append(worker)
        worker.start()

    def _lost(self, worker: Worker) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _release(self, job: Job) -> None:
        with self._lock:
            if not job.released:
                job.released = True
                self._pending -= 1


def _close(model) -> None:
    if model is not None and hasattr(model, "close"):
        try:
            model.close()
        except Exception:
            log.exception("closing a model failed")
