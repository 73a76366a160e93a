"""One Model shared by 8 threads: every call returns exactly its own input's single-threaded result.

Each thread feeds its own crop of the real photo (shifted, of its own size) through
`run_image`, `run` on the converted tensor, and `input_buffer` + `invoke` inside
`exclusive()`, in a loop bounded by a call count. Any output that differs from the
single-threaded one for that input, or any error, fails the test.
"""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest

import edgeinf
from edgeinf import preprocess

THREADS = 8
ROUNDS = 6  # per thread, each round three calls: run_image, run, input_buffer + invoke


@pytest.fixture(scope="module")
def photo(model_path):
    return cv2.imread(str(model_path("grace_hopper")))


def thread_frames(photo: np.ndarray) -> list[np.ndarray]:
    """A different real frame per thread: the photo shifted and cropped, each of its own size."""
    frames = []
    for t in range(THREADS):
        y, x = 9 * t, 13 * t
        frames.append(np.ascontiguousarray(photo[y : y + 360 + 11 * t, x : x + 300 + 7 * t]))
    return frames


def soak(model, frames, options_of, tensors):
    """Run every thread's calls concurrently; return a list of what went wrong."""
    want = []
    began = time.monotonic()
    for t, frame in enumerate(frames):  # single-threaded references, one model call at a time
        image = model.run_image(frame, color="bgr", **options_of(t))
        tensor = model.run(tensors[t])
        want.append((image, tensor))
    # A hang is judged against this machine's own speed (an emulated Pi under load runs
    # the 144 calls in minutes): the workers make ROUNDS * 3 / 2 times the reference
    # calls, and get ten times that long, never under two minutes.
    reference_seconds = time.monotonic() - began
    patience = max(120.0, 10 * reference_seconds * ROUNDS * 3 / 2)
    problems: list[str] = []
    start = threading.Barrier(THREADS)

    def compare(t: int, what: str, got: dict, expected: dict) -> None:
        for name, value in expected.items():
            if got[name].shape != value.shape or not np.array_equal(got[name], value):
                problems.append(f"thread {t}, {what}: output {name!r} differs from the single-threaded result")

    def worker(t: int) -> None:
        try:
            start.wait()
            for _ in range(ROUNDS):
                got = model.run_image(frames[t], color="bgr", **options_of(t))
                compare(t, "run_image", got, want[t][0])
                compare(t, "run", model.run(tensors[t]), want[t][1])
                with model.exclusive():
                    if model.inputs[0].shape != tensors[t].shape:  # a dynamic input: this thread's size
                        model.resize_input(0, tensors[t].shape)
                    buffer = model.input_buffer(0)
                    buffer[...] = tensors[t]
                    del buffer
                    got = model.invoke()
                compare(t, "input_buffer + invoke", got, want[t][1])
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none may pass silently
            problems.append(f"thread {t}: {type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(THREADS)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + patience
    for w in workers:
        w.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(w.is_alive() for w in workers), f"a worker hung: not done after {patience:.0f} s"
    return problems


def converted(model, frame, options) -> np.ndarray:
    pipe = preprocess.Pipeline.for_input(model.inputs[0], color="bgr", **options)
    tensor = pipe.new_output()
    pipe(frame, tensor)
    return tensor


def test_tflite_model_shared_by_threads(model_path, photo):
    pytest.importorskip("ai_edge_litert")
    frames = thread_frames(photo)
    options = dict(mean=127.5, std=127.5, letterbox=True)
    with edgeinf.load(model_path("face_detection_short_range"), backend="tflite", num_threads=1) as model:
        # The run() input of each thread is another frame's conversion, so no two threads agree.
        tensors = [converted(model, frames[(t + 3) % THREADS], options) for t in range(THREADS)]
        problems = soak(model, frames, lambda t: options, tensors)
    assert not problems, f"{len(problems)} bad calls, first: {problems[:3]}"


@pytest.mark.slow  # a super-resolution network 144 times over: minutes under qemu
def test_ncnn_model_shared_by_threads(model_path, photo):
    pytest.importorskip("ncnn")
    frames = thread_frames(photo)

    def options_of(t: int) -> dict:  # each thread its own input size: the model resizes per call
        return dict(std=255.0, size=(12 + 2 * t, 8 + t))

    with edgeinf.load(model_path("realesr_animevideov3_x2"), backend="ncnn", num_threads=1, fp16=False) as model:
        tensors = []
        for t in range(THREADS):
            spec = model.inputs[0]
            other = (t + 3) % THREADS
            pipe = preprocess.Pipeline.for_input(spec, color="bgr", **options_of(other))
            tensor = pipe.new_output()
            pipe(frames[other], tensor)
            tensors.append(tensor)
        problems = soak(model, frames, options_of, tensors)
    assert not problems, f"{len(problems)} bad calls, first: {problems[:3]}"


def test_a_fill_overwritten_by_another_thread_is_refused(model_path, rng):
    # Without exclusive(): thread A takes the buffer, thread B runs, A's invoke must not run on B's input.
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1) as model:
        buffer = model.input_buffer(0)
        buffer[...] = rng.uniform(-1, 1, buffer.shape)
        del buffer
        other = threading.Thread(target=model.run, args=(np.zeros((1, 128, 128, 3), np.float32),))
        other.start()
        other.join()
        with pytest.raises(edgeinf.RuntimeFailure, match="exclusive"):
            model.invoke()
        model.invoke()  # the refusal ends that fill: a plain invoke runs on what the buffer holds


def test_each_call_gets_its_own_letterbox(model_path, photo):
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1) as model:
        wide = np.ascontiguousarray(photo[:200])
        tall = np.ascontiguousarray(photo[:, :200])
        a = model.run_image(wide, color="bgr", mean=127.5, std=127.5, letterbox=True)
        b = model.run_image(tall, color="bgr", mean=127.5, std=127.5, letterbox=True)
    assert (a.letterbox.roi_w, a.letterbox.roi_h) == (512, 200)
    assert (b.letterbox.roi_w, b.letterbox.roi_h) == (200, 600)
