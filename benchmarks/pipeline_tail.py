"""Where a 1-process face pipeline frame's time goes, for the median frame and the slowest ones.

Runs `bench_pipeline`'s video through the detector -> mesh pipeline on threads, paced and
unpaced, interleaved round by round, and splits each frame's latency (admission to answer)
into: the wait before detection, the detection call, the wait between the stages, the
mesh calls, and the hand-back after them. Each call is split further into this thread's
CPU time and the rest, off the CPU: waiting for the GIL or a lock, or for a core other
threads or processes had. Garbage collector pauses that overlap the frame are counted too. Printed: the mean over all frames and over the
slowest 2% (the frames that make the p99).

Usage: PYTHONPATH=. python benchmarks/pipeline_tail.py [--frames 480] [--rounds 3]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import queue  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import video  # noqa: E402

from edgeinf.pipeline import Pipeline  # noqa: E402
from edgeinf.pipeline.face import detection_stage, landmark_stage  # noqa: E402

COLUMNS = ("latency", "wait", "detect", "cpu", "off cpu", "between", "mesh", "cpu", "off cpu", "after")


class Timed:
    """A stage callable that books, per frame, its calls' start, end and CPU time."""

    def __init__(self, fn, calls: dict):
        self.fn, self.calls = fn, calls

    def __call__(self, frame, *args):
        start, cpu = time.monotonic(), time.thread_time()
        try:
            return self.fn(frame, *args)
        finally:
            end, spent = time.monotonic(), time.thread_time() - cpu
            first = self.calls.get(frame.seq)
            if first is None:
                self.calls[frame.seq] = [start, end, spent]
            else:  # another face of the same frame
                first[1] = end
                first[2] += spent


class GcPauses:
    """Wall-clock spans of the garbage collector's runs."""

    def __init__(self):
        self.spans: list[tuple[float, float]] = []
        self._start = 0.0
        gc.callbacks.append(self._record)

    def _record(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.monotonic()
        else:
            self.spans.append((self._start, time.monotonic()))

    def overlap(self, begin: float, end: float) -> float:
        return sum(max(0.0, min(b, end) - max(a, begin)) for a, b in self.spans)


def build(pacing: bool, detect_calls: dict, mesh_calls: dict) -> Pipeline:
    pipe = Pipeline("face_mesh", pacing=pacing)
    pipe.add("faces", Timed(detection_stage(), detect_calls))
    pipe.add("landmarks", Timed(landmark_stage(), mesh_calls), inputs=["faces"], for_each="faces")
    return pipe.start()


def run(pipe: Pipeline, frames) -> list[tuple[int, float, float]]:
    """(seq, admitted, latency) per frame; answers read as they come, as `Pipeline.run` does."""
    done: queue.SimpleQueue = queue.SimpleQueue()
    out = []
    for bgr in frames:
        pipe.submit(bgr, format="bgr").add_done_callback(done.put)
        while not done.empty():
            result = done.get().result()
            out.append((result.frame.seq, result.frame.timestamp_s, result.latency_s))
    while len(out) < len(frames):
        result = done.get().result()
        out.append((result.frame.seq, result.frame.timestamp_s, result.latency_s))
    return out


def breakdown(answers, detect_calls: dict, mesh_calls: dict, pauses: GcPauses) -> np.ndarray:
    """One row per frame with a face, in ms: the columns of `COLUMNS` and the GC pauses overlapping it."""
    rows = []
    for seq, admitted, latency in answers:
        if seq not in mesh_calls:
            continue
        d0, d1, dcpu = detect_calls[seq]
        m0, m1, mcpu = mesh_calls[seq]
        done = admitted + latency
        rows.append(
            (
                latency,
                d0 - admitted,
                d1 - d0,
                dcpu,
                d1 - d0 - dcpu,
                m0 - d1,
                m1 - m0,
                mcpu,
                m1 - m0 - mcpu,
                done - m1,
                pauses.overlap(admitted, done),
            )
        )
    return np.array(rows) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=480)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    frames = video(args.frames)
    cv2.setNumThreads(1)  # as bench_pipeline runs the pipelines
    pauses = GcPauses()
    contenders = {}
    for name, pacing in (("paced", True), ("unpaced", False)):
        detect_calls: dict = {}
        mesh_calls: dict = {}
        contenders[name] = (build(pacing, detect_calls, mesh_calls), detect_calls, mesh_calls)
    rows: dict[str, list] = {name: [] for name in contenders}
    try:
        for pipe, *_ in contenders.values():
            run(pipe, frames)  # warm-up
        for _ in range(args.rounds):
            for name, (pipe, detect_calls, mesh_calls) in contenders.items():
                detect_calls.clear()
                mesh_calls.clear()
                pauses.spans.clear()
                rows[name].append(breakdown(run(pipe, frames), detect_calls, mesh_calls, pauses))
    finally:
        for pipe, *_ in contenders.values():
            pipe.close()
    header = " ".join(f"{c:>8s}" for c in (*COLUMNS, "gc"))
    print(f"ms per frame; detect and mesh split into cpu / off cpu\n{'':24s}{header}")
    for name, parts in rows.items():
        table = np.concatenate(parts)
        slowest = table[table[:, 0] >= np.percentile(table[:, 0], 98)]
        p50, p99 = np.percentile(table[:, 0], [50, 99])
        print(f"{name} (p50 {p50:.2f}, p99 {p99:.2f}, {len(table)} frames)")
        for label, subset in (("  mean, all frames", table), ("  mean, slowest 2%", slowest)):
            print(f"{label:24s}" + " ".join(f"{v:8.2f}" for v in subset.mean(axis=0)))


if __name__ == "__main__":
    main()
