"""Model counters and histograms, checked against known timings and against the models' own calls."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import edgeinf
from edgeinf import metrics
from edgeinf.metrics import LATENCY_BUCKETS_S, ModelMetrics, bucket_quantile


@pytest.fixture
def face(model_path):
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1, check=False) as model:
        yield model


def test_buckets_are_ascending_ten_per_decade_from_1us_to_10s():
    b = np.asarray(LATENCY_BUCKETS_S)
    assert b[0] == 1e-6 and b[-1] == 10.0
    assert np.all(np.diff(b) > 0), f"not ascending at index {int(np.argmin(np.diff(b)))}"
    assert np.sum(b <= 1e-3 + 1e-15) - np.sum(b <= 1e-4 + 1e-18) == 10
    ratios = b[1:] / b[:-1]
    assert ratios.max() < 1.3 and ratios.min() > 1.2


def test_one_known_duration_lands_in_its_bucket_and_interpolates():
    m = ModelMetrics("synthetic.tflite", "tflite")
    for _ in range(100):
        m.observe(0.0001, 0.001, 0.0000)  # 1.1 ms: the bucket (1.0 ms, 1.25 ms]
    snap = m.snapshot()
    i = LATENCY_BUCKETS_S.index(1.25e-3)
    assert snap.buckets[i] == 100 and snap.calls == 100
    # Linear inside (1.0, 1.25] ms: rank q*100 of 100 -> 1.0 + 0.25 * q ms.
    for q in (0.5, 0.95, 0.99):
        assert snap.quantile(q) == pytest.approx(1.0e-3 + 0.25e-3 * q)
    assert snap.stage_s == pytest.approx({"preprocess": 0.01, "inference": 0.1, "postprocess": 0.0})
    assert snap.sum_s == pytest.approx(0.11)


def test_percentiles_from_buckets_track_exact_percentiles_of_a_known_sample(rng):
    # Log-uniform latencies 50 us .. 50 ms: the bucket estimate must stay within one bucket's width.
    samples = np.exp(rng.uniform(np.log(50e-6), np.log(50e-3), 5000))
    m = ModelMetrics("synthetic.tflite", "tflite")
    for t in samples:
        m.observe(0.0, float(t), 0.0)
    snap = m.snapshot()
    for q in (0.5, 0.95, 0.99):
        exact = float(np.percentile(samples, q * 100))
        assert snap.quantile(q) == pytest.approx(exact, rel=0.26), f"q={q}: {snap.quantile(q)} vs exact {exact}"
    assert snap.sum_s == pytest.approx(samples.sum())


def test_bucket_quantile_edges():
    bounds = (1.0, 2.0)
    assert math.isnan(bucket_quantile(0.5, [0, 0, 0], bounds))
    assert bucket_quantile(0.5, [0, 0, 4], bounds) == 2.0  # all in +Inf: the highest finite bound
    assert bucket_quantile(0.0, [2, 2, 0], bounds) == 0.0
    assert bucket_quantile(1.0, [2, 2, 0], bounds) == 2.0
    assert bucket_quantile(0.5, [2, 2, 0], bounds) == 1.0
    with pytest.raises(ValueError, match="quantile must be within"):
        bucket_quantile(1.5, [1, 0, 0], bounds)
    with pytest.raises(ValueError, match="expected 3 bucket counts"):
        bucket_quantile(0.5, [1, 0], bounds)


def test_run_counts_calls_and_stage_times(face, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    face.metrics.reset()
    start = time.perf_counter()
    for _ in range(20):
        face.run(x)
    wall = time.perf_counter() - start
    snap = face.metrics.snapshot()
    assert snap.calls == 20 and snap.errors == 0
    assert 0 < snap.sum_s <= wall
    # Inference dominates a real model's call; the stages partition the call.
    assert snap.stage_s["inference"] > 0.8 * snap.sum_s
    assert snap.stage_s["preprocess"] > 0 and snap.stage_s["postprocess"] > 0
    assert snap.p50_s <= snap.p95_s <= snap.p99_s


def test_the_inline_input_check_refuses_what_validation_refuses(face, rng):
    # run() checks one array inline (shape, dtype, C strides); anything else takes the explaining path.
    assert face._fast_input == ((1, 128, 128, 3), np.dtype(np.float32), (196608, 1536, 12, 4))
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    assert x.strides == face._fast_input[2]
    with pytest.raises(edgeinf.InputError, match="C-contiguous"):
        face.run(np.asfortranarray(x))
    with pytest.raises(edgeinf.InputError, match="C-contiguous"):
        face.run(np.ascontiguousarray(x[:, :, :, ::-1].copy())[:, :, :, ::-1])
    with pytest.raises(edgeinf.InputError, match="expects dtype float32, got float64"):
        face.run(x.astype(np.float64))
    with pytest.raises(edgeinf.InputError, match="expects shape"):
        face.run(x[:, :64])
    sliced = np.zeros((2, 128, 128, 3), np.float32)[:1]  # C-contiguous, C strides: the inline path
    np.testing.assert_array_equal(face.run(sliced)["regressors"], face.run(np.zeros_like(x))["regressors"])


def test_errors_are_counted_and_do_not_count_as_calls(face):
    face.metrics.reset()
    with pytest.raises(edgeinf.InputError):
        face.run(np.zeros((1, 64, 64, 3), np.float32))
    with pytest.raises(edgeinf.InputError):
        face.run([np.zeros((1, 128, 128, 3), np.float32)] * 2)
    snap = face.metrics.snapshot()
    assert (snap.calls, snap.errors) == (0, 2)


def test_invoke_counts_a_call_with_no_preprocessing(face, rng):
    face.metrics.reset()
    buf = face.input_buffer()
    buf[...] = rng.uniform(-1, 1, buf.shape)
    del buf
    face.invoke()
    snap = face.metrics.snapshot()
    assert snap.calls == 1
    assert snap.stage_s["preprocess"] == 0.0 and snap.stage_s["inference"] > 0


def test_run_image_books_the_conversion_as_preprocessing(face, monkeypatch):
    # The native conversion, slowed by a known 20 ms.
    from edgeinf.preprocess import Pipeline

    convert = Pipeline.__call__

    def slow_convert(pipe, frame, out, roi=None):
        time.sleep(0.02)
        return convert(pipe, frame, out, roi)

    def failing_convert(pipe, frame, out, roi=None):
        raise edgeinf.InputError("expected an HxWx3 frame")

    monkeypatch.setattr(Pipeline, "__call__", slow_convert)
    face.metrics.reset()
    face.run_image(np.zeros((4, 4, 3), np.uint8), mean=127.5, std=127.5)
    snap = face.metrics.snapshot()
    assert snap.calls == 1 and snap.errors == 0
    assert snap.stage_s["preprocess"] >= 0.02
    assert snap.sum_s >= 0.02 + snap.stage_s["inference"] - 1e-9
    monkeypatch.setattr(Pipeline, "__call__", failing_convert)
    with pytest.raises(edgeinf.InputError):
        face.run_image(np.zeros((4, 4, 3), np.uint8), mean=127.5, std=127.5)
    assert face.metrics.snapshot().errors == 1
    face.invoke()  # a plain invoke afterwards books no stale preprocessing
    assert face.metrics.snapshot().stage_s["preprocess"] == pytest.approx(snap.stage_s["preprocess"])


def test_a_failed_run_image_counts_one_error_and_leaves_no_start_time_behind(face):
    face.metrics.reset()
    face.run_image(np.zeros((4, 4, 3), np.uint8), mean=127.5, std=127.5)
    snap = face.metrics.snapshot()
    with pytest.raises(edgeinf.InputError):
        face.run_image(np.zeros((4, 4, 3), np.float32), mean=127.5, std=127.5)  # not a uint8 frame
    with pytest.raises(edgeinf.InputError):
        face.run_image(np.zeros((4, 4, 3), np.uint8), mean=127.5, std=127.5, input=1)  # the model has one input
    assert face.metrics.snapshot().errors == 2
    time.sleep(0.05)  # a stale start time would add at least this much to the next call's preprocessing
    face.run(np.zeros((1, 128, 128, 3), np.float32))
    after = face.metrics.snapshot()
    assert after.calls == 2 and after.stage_s["preprocess"] - snap.stage_s["preprocess"] < 0.05


def test_shared_model_from_threads_loses_no_count(face, rng):
    import threading

    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    face.metrics.reset()

    def work():
        for _ in range(15):
            face.run(x)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert face.metrics.snapshot().calls == 60


def test_registry_holds_live_models_only(model_path):
    path = model_path("face_detection_short_range")
    model = edgeinf.load(path, num_threads=1, check=False)
    instance = model.metrics.instance
    assert instance in [m.instance for m in metrics.live()]
    model.close()
    del model
    import gc

    gc.collect()
    assert instance not in [m.instance for m in metrics.live()]
