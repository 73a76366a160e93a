"""Stage factories the process tests start in child processes (imported there by name)."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np


def frame_stats():
    """A stage returning arrays computed from the frame read in shared memory, and the child's pid."""

    def stats(frame, *inputs):
        data = frame.data
        return {"pid": os.getpid(), "seq": frame.seq, "sum": np.array([int(data.sum())]), "echo": data.copy()}

    return stats


def misbehaving():
    """Frame value 1: raise; 2: hang; 3: crash the process; else the frame's first pixel."""

    def stage(frame):
        value = int(frame.data.flat[0])
        if value == 1:
            raise ValueError("bad pixel")
        if value == 2:
            time.sleep(3600)
        if value == 3:
            os._exit(7)
        return {"pid": os.getpid(), "value": value}

    return stage


def broken_factory():
    raise RuntimeError("model file missing")


def refuse_to_pickle(array):
    raise AssertionError(f"an array of shape {array.shape} was pickled")


def no_pickled_arrays():
    """Double each record's keypoints, with pickling of arrays refused in this process."""
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(np.ndarray, refuse_to_pickle)

    def stage(frame, record):
        return dataclasses.replace(record, keypoints=record.keypoints * 2, box=tuple(frame.data[0, :4].tolist()))

    return stage


def thread_pools():
    """A stage reporting the child's OpenCV and OpenMP thread counts (OpenCV imported by the factory)."""
    import cv2

    def stage(frame):
        return {"cv2": cv2.getNumThreads(), "omp": os.environ.get("OMP_NUM_THREADS")}

    return stage


def thread_pools_imported_late():
    """`thread_pools` with OpenCV imported by the first call, not by the factory."""

    def stage(frame):
        import cv2

        return {"cv2": cv2.getNumThreads(), "seq": frame.seq}

    return stage


def pick(key):
    """A glue stage: ``fn(frame, value) -> value[key]``."""

    def stage(frame, value):
        return value[key]

    return stage


def wait_for_partner(directory):
    """Frame 2k waits (up to 30 s) until frame 2k + 1 has started: only two processes at once get past it."""
    from pathlib import Path

    folder = Path(directory)

    def stage(frame):
        (folder / f"started-{frame.seq}").touch()
        partner = folder / f"started-{frame.seq + 1}"
        deadline = time.monotonic() + 30.0
        while frame.seq % 2 == 0 and not partner.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"frame {frame.seq + 1} never started while frame {frame.seq} ran")
            time.sleep(0.01)
        return {"pid": os.getpid()}

    return stage


def builder_thread():
    """A stage returning the thread that built it and the thread that called it."""
    import threading

    built_on = threading.get_ident()

    def stage(frame):
        return {"built_on": built_on, "called_on": threading.get_ident()}

    return stage
