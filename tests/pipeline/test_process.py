"""Process stages: frames through shared memory, faults contained, segments removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from edgeinf.errors import InputError
from edgeinf.pipeline import CircuitBreaker, Pipeline, ProcessStage
from edgeinf.sources import Frame

WAIT_S = 60
SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs /dev/shm")


def segments() -> set[str]:
    """This process's segments (named after the pid that made them): other test processes
    may be making and removing their own at the same time."""
    return {p.name for p in SHM.glob(f"edgeinf-{os.getpid()}-*")}


def test_frames_and_arrays_cross_through_shared_memory(rng):
    before = segments()
    pipe = Pipeline("shm", timeout_s=WAIT_S)
    pipe.add("stats", ProcessStage("stage_helpers:frame_stats", frame_bytes=64 * 48 * 3, output_bytes=1 << 16))
    created = segments() - before
    assert len(created) == 1
    images = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(3)]
    strided = np.zeros((48, 80, 3), np.uint8)[:, :64]  # padded rows, as a camera buffer has
    strided[...] = images[0]
    results = [pipe.process(Frame(image, "bgr", seq, 0.0)) for seq, image in enumerate([*images, strided])]
    for result, image in zip(results, [*images, images[0]]):
        value = result["stats"]
        assert value["pid"] != os.getpid()
        assert value["sum"][0] == int(image.sum()) and np.array_equal(value["echo"], image)
    with pytest.raises(InputError, match="does not fit"):
        pipe.stages["stats"].live_workers[0].write_frame(Frame(np.zeros((100, 100, 3), np.uint8), "bgr", 9, 0.0))
    pipe.close()
    assert not created & segments(), "the shared-memory segment outlived the pipeline"


def test_frames_in_flight_spread_over_a_stage_s_processes(tmp_path):
    # Whole frames per process: with one frame in flight per worker, two frames run at once
    # (frame 2k waits in its process until frame 2k + 1 has started in the other one).
    pipe = Pipeline("spread", timeout_s=WAIT_S, max_in_flight=2)
    pipe.add("pair", ProcessStage("stage_helpers:wait_for_partner", str(tmp_path), frame_bytes=64), workers=2)
    try:
        pipe.start()
        children = {w.process.pid for w in pipe.stages["pair"].live_workers}
        futures = [pipe.submit(Frame(np.zeros((8, 8), np.uint8), "gray", seq, 0.0)) for seq in range(4)]
        results = [f.result(WAIT_S) for f in futures]
    finally:
        pipe.close()
    assert all(r.ok for r in results), [r.stages for r in results]
    assert {r["pair"]["pid"] for r in results} == children and len(children) == 2


def test_a_stage_that_raises_hangs_or_crashes_is_contained_and_restarted():
    pipe = Pipeline("faults", timeout_s=WAIT_S)
    pipe.add("stage", ProcessStage("stage_helpers:misbehaving"), timeout_s=2.0, breaker=CircuitBreaker(failures=10))
    try:

        def run(value):
            return pipe.process(Frame(np.full((4, 4), value, np.uint8), "gray", value, 0.0)).stages["stage"]

        healthy = run(0)
        assert healthy.ok
        first_pid = healthy.value["pid"]
        raised = run(1)
        assert raised.status == "error" and "bad pixel" in raised.error
        assert run(5).value["pid"] == first_pid  # an exception does not cost the process
        hung = run(2)
        assert hung.status == "timeout"
        after_hang = run(6)
        assert after_hang.ok and after_hang.value["pid"] != first_pid  # killed and restarted
        crashed = run(3)
        assert crashed.status == "error" and "died (exit code 7)" in crashed.error
        after_crash = run(8)
        assert after_crash.ok and after_crash.value["value"] == 8
        assert pipe.stages["stage"].restarts == 1
    finally:
        pipe.close()


def test_a_stage_process_runs_opencv_and_openmp_pools_on_one_thread(monkeypatch):
    # Each stage process is one worker on cores its siblings share: a pool per process
    # (OpenCV's takes every core) would oversubscribe them.
    pytest.importorskip("cv2")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pipe = Pipeline("pools", timeout_s=WAIT_S)
    pipe.add("pools", ProcessStage("stage_helpers:thread_pools"))
    try:
        value = pipe.process(Frame(np.zeros((2, 2), np.uint8), "gray", 0, 0.0))["pools"]
    finally:
        pipe.close()
    assert value == {"cv2": 1, "omp": "1"}


def test_opencv_imported_by_a_stage_call_gets_one_thread_from_the_next_call():
    pytest.importorskip("cv2")
    pipe = Pipeline("late_pools", timeout_s=WAIT_S)
    pipe.add("pools", ProcessStage("stage_helpers:thread_pools_imported_late"))
    try:
        values = [pipe.process(Frame(np.zeros((2, 2), np.uint8), "gray", seq, 0.0))["pools"] for seq in range(2)]
    finally:
        pipe.close()
    assert values[1] == {"cv2": 1, "seq": 1}


def test_a_factory_that_fails_in_the_child_opens_the_stage_with_the_reason():
    pipe = Pipeline("broken", timeout_s=WAIT_S)
    pipe.add("stage", ProcessStage("stage_helpers:broken_factory"), breaker=CircuitBreaker(failures=1, reset_s=3600))
    try:
        result = pipe.process(Frame(np.zeros((2, 2), np.uint8), "gray", 0, 0.0))
        assert result.stages["stage"].status == "error"
        assert "RuntimeError: model file missing" in result.stages["stage"].error
        second = pipe.process(Frame(np.zeros((2, 2), np.uint8), "gray", 1, 0.0))
        assert second.stages["stage"].status == "open"
        assert pipe.stages["stage"].breaker.state == "open"
    finally:
        pipe.close()


_KILLED_PARENT = """
import sys
sys.path.insert(0, {helpers!r})
import numpy as np
from edgeinf.pipeline import Pipeline, ProcessStage
from edgeinf.sources import Frame

if __name__ == "__main__":
    pipe = Pipeline("killed")
    pipe.add("stats", ProcessStage("stage_helpers:frame_stats", frame_bytes=4096))
    pipe.process(Frame(np.zeros((8, 8), np.uint8), "gray", 0, 0.0))
    print(pipe.stages["stats"].segment.name, flush=True)
    sys.stdin.read()
"""


def test_segments_are_removed_after_the_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(_KILLED_PARENT.format(helpers=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        name = proc.stdout.readline().decode().strip()
        assert name.startswith("edgeinf-"), proc.stderr.read().decode()[-2000:]
        assert (SHM / name).exists()
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT_S)
        # The child sees its pipe close and exits; the resource tracker then unlinks the segment.
        deadline = time.monotonic() + WAIT_S
        while (SHM / name).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not (SHM / name).exists(), f"/dev/shm/{name} leaked after the parent was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()


def test_arrays_in_inputs_and_results_are_not_pickled(monkeypatch):
    from multiprocessing.reduction import ForkingPickler

    from stage_helpers import refuse_to_pickle

    from edgeinf.face import Face

    faces = [Face((0.0, 0.0, 1.0, 1.0), 0.9, np.arange(12, dtype=np.float32).reshape(6, 2) + i) for i in range(2)]
    pipe = Pipeline("no_pickle", timeout_s=WAIT_S)
    pipe.add("faces", lambda frame: faces)
    pipe.add("doubled", ProcessStage("stage_helpers:no_pickled_arrays"), inputs=["faces"], for_each="faces")
    try:
        pipe.start()
        monkeypatch.setitem(ForkingPickler._extra_reducers, np.ndarray, refuse_to_pickle)
        result = pipe.process(Frame(np.arange(16, dtype=np.uint8).reshape(4, 4), "gray", 0, 0.0))
    finally:
        pipe.close()
    doubled = result["doubled"]
    assert [type(d) for d in doubled] == [Face, Face]
    for face, out in zip(faces, doubled):
        np.testing.assert_array_equal(out.keypoints, face.keypoints * 2)
        assert out.box == (0, 1, 2, 3) and out.score == face.score
