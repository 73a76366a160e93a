"""The process's thread pool: every task once, bounded threads, errors carried to the caller,
and the image pipeline's `threads` running on it (no thread created per call)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from preprocess_helpers import first_mismatch, make_frame, pipeline

from edgeinf import _C, InputError
from edgeinf.isa import supported_isas, use_isa


@pytest.mark.parametrize("count, max_threads", [(1, 4), (7, 1), (1000, 2), (1000, 64), (3, 300)])
def test_every_task_runs_once_on_at_most_max_threads(count, max_threads):
    runs, used = _C._parallel_for_probe(count, max_threads)
    assert runs == [1] * count
    assert 1 <= used <= min(max_threads, _C.pool_threads(), count)


def test_a_task_error_reaches_the_caller_and_the_pool_survives():
    with pytest.raises(InputError, match="task 5 failed"):
        _C._parallel_for_probe(64, 8, fail_at=5)
    runs, _ = _C._parallel_for_probe(64, 8)
    assert runs == [1] * 64


def test_callers_on_several_threads_share_the_pool():
    results = []

    def call():
        results.append(_C._parallel_for_probe(500, 8)[0])

    workers = [threading.Thread(target=call) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert results == [[1] * 500] * 8


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("color, resize", [("bgr", "bilinear"), ("nv12", "area"), ("gray", "nearest")])
def test_threaded_pipeline_equals_one_thread(rng, isa, color, resize):
    frame = make_frame(rng, color, 96, 80)
    outputs = {}
    with use_isa(isa):
        for threads in (1, 3, 256):
            pipe = pipeline(40, 72, 3, "int8", "NHWC", color=color, resize=resize, threads=threads)
            outputs[threads] = pipe.new_output()
            pipe(frame, outputs[threads])
    assert first_mismatch(outputs[3], outputs[1]) == ""
    assert first_mismatch(outputs[256], outputs[1]) == ""


def test_threads_beyond_the_bound_are_an_input_error():
    with pytest.raises(InputError, match=r"threads must be from 1 to 256, got 257"):
        pipeline(8, 8, threads=257)  # the pipeline refuses at construction
    pipe = pipeline(8, 8, threads=256)
    pipe.threads = 257  # and the native plan refuses what the Python side would have
    with pytest.raises(InputError, match=r"threads must be in \[1, 256\], got 257"):
        pipe(np.zeros((16, 16, 3), np.uint8), pipe.new_output())


@pytest.mark.skipif(sys.platform != "linux", reason="address-space limit through /proc and RLIMIT_AS")
@pytest.mark.skipif("LD_PRELOAD" in os.environ, reason="the sanitizer runtime reserves terabytes of address space")
def test_pipeline_runs_when_the_system_refuses_threads():
    """Under an address-space limit that leaves room for no more than a few thread stacks, a
    200-thread pipeline still converts its frame (a thread per call used to abort the process)."""
    code = textwrap.dedent(
        """
        import resource, re
        import numpy as np
        from edgeinf.preprocess import Pipeline
        from edgeinf.types import Layout

        def pipe(threads):
            return Pipeline(size=(32, 400), channels=3, layout=Layout.NHWC, dtype=np.float32, threads=threads)

        frame = np.arange(300 * 200 * 3, dtype=np.uint32).astype(np.uint8).reshape(300, 200, 3)
        want = np.zeros((1, 400, 32, 3), np.float32)
        pipe(1)(frame, want)
        got = np.zeros_like(want)
        many = pipe(200)
        vm = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
        many(frame, got)
        assert np.array_equal(got, want)
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
