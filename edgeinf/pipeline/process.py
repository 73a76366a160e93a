"""Stages in child processes, fed through shared memory.

Each worker of a process stage owns one child process and one slot of a shared-memory
segment (``/dev/shm``): the frame is written into the slot once, the child reads it
in place, and writes the arrays it returns into the slot's output area. Only small
messages cross the pipe (shapes, sequence numbers, the upstream stages' small values):
no array is pickled.

A call that overruns its deadline kills the child; a child that crashes fails its call.
Either way the worker starts a new child before its next call. The segment is unlinked
when the pipeline closes; if the parent is killed, its children see the pipe close and
exit, and Python's resource tracker unlinks the segment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import multiprocessing
import os
import secrets
import sys
import threading
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np

from ..errors import InputError, RuntimeFailure
from ..sources import Frame
from .core import Stage, _Job, _Worker

log = logging.getLogger(__name__)

DEFAULT_FRAME_BYTES = 1920 * 1080 * 3
DEFAULT_OUTPUT_BYTES = 1 << 20
MAX_SEGMENT_BYTES = 1 << 31
_ALIGN = 64


class ProcessStage:
    """Run a stage in child processes: give this as ``fn`` to `Pipeline.add`.

    Args:
        factory: ``"module:callable"`` importable in the child; called once there with
            ``args`` to build the stage's callable (load models in it: each process
            loads its own), which is then called as ``fn(frame, *inputs)``.
        *args: picklable arguments of the factory.
        options: picklable keyword arguments of the factory.
        frame_bytes: the largest frame a slot holds (default: 1080p BGR).
        output_bytes: room for the arrays one call takes (its inputs' values) and returns.
        start_timeout_s: how long a child may take to import and build its callable.

    >>> pipe.add("landmarks", ProcessStage("edgeinf.pipeline.face:landmark_stage"),  # doctest: +SKIP
    ...          inputs=["faces"], for_each="faces", workers=2, timeout_s=0.5)
    """

    stage_class: type  # set below: the Stage that runs it

    def __init__(
        self,
        factory: str,
        *args: Any,
        options: dict | None = None,
        frame_bytes: int = DEFAULT_FRAME_BYTES,
        output_bytes: int = DEFAULT_OUTPUT_BYTES,
        start_timeout_s: float = 60.0,
    ):
        if not isinstance(factory, str) or factory.count(":") != 1:
            raise InputError(f"factory must be 'module:callable', got {factory!r}")
        for name, value in (("frame_bytes", frame_bytes), ("output_bytes", output_bytes)):
            if not isinstance(value, int) or not 0 < value <= MAX_SEGMENT_BYTES // 4:
                raise InputError(f"{name} must be an integer from 1 to {MAX_SEGMENT_BYTES // 4}, got {value!r}")
        self.factory = factory
        self.args = args
        self.options = dict(options or {})
        self.frame_bytes = _aligned(frame_bytes)
        self.output_bytes = _aligned(output_bytes)
        self.start_timeout_s = start_timeout_s

    def __call__(self, *args):
        raise RuntimeFailure("a ProcessStage runs inside a Pipeline's child processes, not when called directly")


class _ProcessStage(Stage):
    def __init__(self, name: str, fn: ProcessStage, **kwargs):
        super().__init__(name, fn, **kwargs)
        self.spec = fn
        self._all_workers: list[_ProcessWorker] = []  # every worker it made, retired ones too
        self.slot_bytes = fn.frame_bytes + fn.output_bytes
        size = self.slot_bytes * self.workers
        if size > MAX_SEGMENT_BYTES:
            raise InputError(f"stage {name!r} would need {size} bytes of shared memory, more than {MAX_SEGMENT_BYTES}")
        self.segment = shared_memory.SharedMemory(
            name=f"edgeinf-{os.getpid()}-{secrets.token_hex(4)}", create=True, size=size
        )
        self._free_slots = list(range(self.workers))
        self.restarts = 0

    def new_worker(self, pipeline) -> _Worker:
        if not self._free_slots:  # more workers than the segment was made for
            raise InputError(f"process stage {self.name!r} was built for {self.workers} workers; it cannot grow")
        return _ProcessWorker(pipeline, self, self._free_slots.pop())

    def call_on(self, worker: _Worker, job: _Job) -> Any:
        worker = _process_worker(worker)
        worker.ensure_child()
        header: list[tuple] = []  # the frame goes into the slot at the first call: none for a frame without items

        def remote(frame, *args):
            if not header:
                header.append(worker.write_frame(frame))
            return worker.remote(header[0], args)

        return self.call(job, remote)

    def wait_ready(self) -> None:
        for worker in list(self.live_workers):
            _process_worker(worker).ready.wait(self.spec.start_timeout_s)

    def abandon(self, pipeline, worker: _Worker) -> None:
        """A call hung: kill its process; the worker starts a new one for the next call."""
        _process_worker(worker).interrupt()
        self.restarts += 1

    def close(self) -> None:
        for worker in [*map(_process_worker, self.live_workers), *self._all_workers]:
            worker.stop()
        self.segment.close()
        with contextlib.suppress(FileNotFoundError):
            self.segment.unlink()


ProcessStage.stage_class = _ProcessStage


def _process_worker(worker: _Worker) -> _ProcessWorker:
    """A process stage's worker: the stage makes only these (`_ProcessStage.new_worker`)."""
    assert isinstance(worker, _ProcessWorker), f"a process stage got a {type(worker).__name__}"
    return worker


class _ProcessWorker(_Worker):
    stage: _ProcessStage

    def __init__(self, pipeline, stage: _ProcessStage, slot: int):
        super().__init__(pipeline, stage)
        self.slot = slot
        base = slot * stage.slot_bytes
        self.frame_offset, self.output_offset = base, base + stage.spec.frame_bytes
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self._process_lock = threading.Lock()
        self.ready = threading.Event()  # set after the first start of its process, whatever the outcome
        stage._all_workers.append(self)

    def _loop(self) -> None:
        while not self.retired and not self.pipeline._closed:
            # Start (or restart) the process before the next call, so that the call's deadline
            # does not include the start; one that cannot start fails the next call with the reason.
            try:
                self.ensure_child()
            except RuntimeFailure as exc:
                log.error("%s", exc)
            self.ready.set()
            job = self.stage.queue.get()
            if job is not None:  # None wakes the workers up to see which of them retired
                self.pipeline._run_task(self, job)
        self.stop()
        self.stage._free_slots.append(self.slot)

    def ensure_child(self) -> None:
        if self.process is not None and self.process.is_alive():
            return
        spec = self.stage.spec
        context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
        parent, child = context.Pipe()
        process = context.Process(
            target=_child_main,
            args=(
                child,
                spec.factory,
                spec.args,
                spec.options,
                self.stage.segment.name,
                self.frame_offset,
                spec.frame_bytes,
                self.output_offset,
                spec.output_bytes,
            ),
            name=f"edgeinf-stage:{self.stage.name}",
            daemon=True,
        )
        try:
            process.start()
        except Exception as exc:  # e.g. a script without the `if __name__ == "__main__":` guard
            parent.close()
            raise RuntimeFailure(f"stage {self.stage.name!r}: cannot start its process: {exc}") from exc
        finally:
            child.close()
        with self._process_lock:
            self.process, self.conn = process, parent
        if not parent.poll(spec.start_timeout_s):
            self.kill()
            raise RuntimeFailure(f"stage {self.stage.name!r}: its process did not start in {spec.start_timeout_s} s")
        try:
            status, detail = parent.recv()
        except (EOFError, OSError):  # the process died before its answer (a reset pipe is an OSError)
            process.join(timeout=1.0)
            status, detail = "failed", f"the process exited with code {process.exitcode}"
        if status != "ready":
            self.kill()
            raise RuntimeFailure(f"stage {self.stage.name!r}: {spec.factory} failed in its process: {detail}")

    def write_frame(self, frame: Frame) -> tuple:
        data = frame.data
        if data.nbytes > self.stage.spec.frame_bytes:
            raise InputError(
                f"a {data.shape} {data.dtype} frame ({data.nbytes} bytes) does not fit the stage's "
                f"{self.stage.spec.frame_bytes}-byte slot: raise ProcessStage(frame_bytes=...)"
            )
        slot = np.ndarray(data.shape, data.dtype, buffer=self.stage.segment.buf, offset=self.frame_offset)
        slot[...] = data  # the one copy: from the source's buffer into shared memory
        return (data.shape, data.dtype.str, frame.format, frame.seq, frame.timestamp_s)

    def remote(self, header: tuple, args: tuple) -> Any:
        conn = self.conn
        if conn is None:  # killed since ensure_child started it
            raise RuntimeFailure(f"stage {self.stage.name!r}: its process is not running")
        buf = self.stage.segment.buf
        # The exchange area carries the inputs' arrays in, then the results' arrays out.
        packed = _pack(args, buf, self.output_offset, self.stage.spec.output_bytes, "the stage's inputs")
        try:
            conn.send((header, packed))
            status, payload = conn.recv()
        except (EOFError, OSError):
            process = self.process
            if process is not None:
                process.join(1)  # reap it, for its exit code
            code = process.exitcode if process is not None else None
            self.kill()
            raise RuntimeFailure(f"stage {self.stage.name!r}: its process died (exit code {code})") from None
        if status == "error":
            raise RuntimeFailure(payload)
        return _unpack(payload, self.stage.segment.buf, self.output_offset)

    def interrupt(self) -> None:
        """SIGKILL the process (called under the pipeline's lock: no waiting here).

        The worker thread, waiting for the reply, then sees the pipe close and cleans up.
        """
        process = self.process
        if process is not None and process.is_alive():
            process.kill()

    def kill(self) -> None:
        with self._process_lock:
            process, conn = self.process, self.conn
            self.process = self.conn = None
        if process is not None and process.is_alive():
            process.kill()
            process.join(5)
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        with self._process_lock:
            process, conn = self.process, self.conn
        if process is not None and process.is_alive() and conn is not None:
            with contextlib.suppress(OSError):
                conn.send(None)
            process.join(2)
        self.kill()


# -- the child side ------------------------------------------------------------------------


def _load(factory: str):
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)


def _attach(name: str) -> shared_memory.SharedMemory:
    """Attach without registering with the resource tracker: the parent owns the segment."""
    from multiprocessing import resource_tracker

    register = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None
    try:
        return shared_memory.SharedMemory(name=name)
    finally:
        resource_tracker.register = register


def _child_main(
    conn, factory, args, options, segment_name, frame_offset, frame_bytes, output_offset, output_bytes
) -> None:
    try:
        segment = _attach(segment_name)
    except OSError as exc:  # the pipeline closed meanwhile
        conn.send(("failed", f"shared memory {segment_name}: {exc}"))
        return
    buf = segment.buf
    try:
        try:
            pools_set = _one_thread_pools()
            fn = _load(factory)(*args, **options)
            pools_set = _one_thread_pools()  # again: the factory may have imported OpenCV
        except BaseException as exc:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
            return
        conn.send(("ready", None))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if message is None:
                return
            (shape, dtype, format, seq, timestamp_s), call_args = message
            frame = Frame(np.ndarray(shape, np.dtype(dtype), buffer=buf, offset=frame_offset), format, seq, timestamp_s)
            try:
                call_args = _unpack(call_args, buf, output_offset)  # copied out: the area now takes the results
                value = fn(frame, *call_args)
                if not pools_set:  # OpenCV imported on the first call
                    pools_set = _one_thread_pools()
                reply = ("ok", _pack(value, buf, output_offset, output_bytes, "the stage's results"))
            except Exception as exc:
                reply = ("error", f"{type(exc).__name__}: {exc}")
            del frame
            conn.send(reply)
    finally:
        del buf
        with contextlib.suppress(BufferError):  # a stage that kept a view of its frame
            segment.close()


THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _one_thread_pools() -> bool:
    """Libraries' own thread pools to one thread in a stage's process.

    A stage process is one worker among the pipeline's threads and processes, which
    share the cores: a pool per process (OpenCV's takes every core) would oversubscribe
    them. Runtimes' threads are the factory's choice (``num_threads``); variables the
    app set stay. Returns whether OpenCV was there to set.
    """
    for variable in THREAD_POOL_VARIABLES:
        os.environ.setdefault(variable, "1")
    cv2 = sys.modules.get("cv2")
    if cv2 is None or not hasattr(cv2, "setNumThreads"):
        return False
    cv2.setNumThreads(1)
    return True


class _Shared:
    """An array in the output area, as it crosses the pipe: where it is, not what it holds."""

    __slots__ = ("offset", "shape", "dtype")

    def __init__(self, offset: int, shape: tuple, dtype: str):
        self.offset, self.shape, self.dtype = offset, shape, dtype


class _Record:
    """A dataclass instance as it crosses the pipe: its class and its fields (arrays as `_Shared`)."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: dict):
        self.cls, self.fields = cls, fields


def _pack(value: Any, buf, base: int, size: int, what: str) -> Any:
    """``value`` with every array moved into ``buf[base : base + size]``: what is left to pickle is small."""
    used = [0]

    def walk(v):
        if isinstance(v, np.ndarray):
            start = _aligned(used[0])
            if start + v.nbytes > size:
                raise InputError(f"{what} take more than the stage's {size}-byte exchange area: raise output_bytes")
            np.ndarray(v.shape, v.dtype, buffer=buf, offset=base + start)[...] = v
            used[0] = start + v.nbytes
            return _Shared(start, v.shape, v.dtype.str)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if type(v) in (list, tuple):
            return type(v)(walk(x) for x in v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return _Record(type(v), {f.name: walk(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init})
        return v

    return walk(value)


def _unpack(value: Any, buf, base: int) -> Any:
    """The inverse of `_pack`; arrays are copied out, as the area is reused by the next call."""
    if isinstance(value, _Shared):
        return np.ndarray(value.shape, np.dtype(value.dtype), buffer=buf, offset=base + value.offset).copy()
    if isinstance(value, dict):
        return {k: _unpack(x, buf, base) for k, x in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_unpack(x, buf, base) for x in value)
    if isinstance(value, _Record):
        return value.cls(**{k: _unpack(x, buf, base) for k, x in value.fields.items()})
    return value


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
