"""``backend="auto"`` on .tflite models: the engine when it runs the whole model and the
probe measured it faster, LiteRT otherwise, the reason in details["auto"]. Measurements
are injected: no test depends on this machine's timings."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, f32, random_q
from test_engine_load import conv_relu_model

import edgeinf
from edgeinf.backends import auto


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEINF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EDGEINF_BACKENDS", raising=False)


@pytest.fixture
def int8_file(tmp_path, rng):
    data, _ = conv_relu_model(rng)
    path = tmp_path / "conv.tflite"
    path.write_bytes(data)
    return path


def measured(engine_ms, litert_ms, calls: list):
    def probe(engine, litert):
        calls.append((engine.name, litert.name))
        return [t / 1e3 for t in engine_ms], [t / 1e3 for t in litert_ms]

    return probe


@pytest.mark.parametrize(
    "engine_ms, litert_ms, choice",
    [
        ([1.0, 1.1, 0.9], [2.0, 2.1, 1.9], "edgeinf"),  # 2x faster
        ([1.0], [1.06], "edgeinf"),  # just past the margin
        ([1.0, 1.0], [1.04, 1.03], "tflite"),  # within the margin: noise, LiteRT kept
        ([3.0, 2.9, 3.1], [1.0, 1.1, 0.9], "tflite"),  # slower
    ],
)
def test_decide(engine_ms, litert_ms, choice):
    got, why = auto.decide([t / 1e3 for t in engine_ms], [t / 1e3 for t in litert_ms])
    assert got == choice
    assert f"engine {np.median(engine_ms):.3g} ms" in why and f"LiteRT {np.median(litert_ms):.3g} ms" in why


def test_decide_needs_runs():
    with pytest.raises(ValueError):
        auto.decide([], [0.001])


@pytest.mark.parametrize("engine_ms, litert_ms, backend", [([1.0] * 3, [3.0] * 3, "edgeinf"), ([3.0], [1.0], "tflite")])
def test_auto_takes_the_measured_faster_path_and_caches_it(int8_file, monkeypatch, rng, engine_ms, litert_ms, backend):
    calls = []
    monkeypatch.setattr(auto, "probe", measured(engine_ms, litert_ms, calls))
    with edgeinf.load(int8_file, num_threads=1) as model:
        assert model.backend == backend
        assert calls == [("edgeinf", "tflite")]
        why = model.details["auto"]
        assert why.startswith("the int8 engine:" if backend == "edgeinf" else "LiteRT:")
        assert "ms" in why and "cached" not in why
        x = rng.integers(-128, 128, model.inputs[0].shape, dtype=np.int8)
        # The engine equals LiteRT's reference kernels; auto's LiteRT is LiteRT with XNNPACK.
        options = {"reference": True} if backend == "edgeinf" else {}
        with edgeinf.load(int8_file, backend="tflite", num_threads=1, **options) as reference:
            for name, want in reference.run(x).items():
                assert np.array_equal(model.run(x)[name], want), name
    with edgeinf.load(int8_file, num_threads=1) as again:  # decided from the cache, no probe
        assert again.backend == backend and len(calls) == 1
        assert "cached in" in again.details["auto"]
    with edgeinf.load(int8_file, num_threads=2) as other:  # another thread count: measured anew
        assert other.backend == backend and len(calls) == 2


def test_a_model_the_engine_cannot_run_whole_stays_on_litert_unmeasured(tmp_path, monkeypatch, rng):
    calls = []
    monkeypatch.setattr(auto, "probe", measured([0.1], [100.0], calls))
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=random_q(rng))
    y = g.unary("LOG_SOFTMAX", g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2)), out_q=(16.0 / 256, 127))
    path = tmp_path / "log_softmax.tflite"
    path.write_bytes(g.build([x], [y]))
    with edgeinf.load(path, num_threads=1) as model:
        assert model.backend == "tflite" and not calls
        assert "does not run the whole model" in model.details["auto"] and "LOG_SOFTMAX" in model.details["auto"]


def test_litert_options_keep_auto_on_litert(int8_file, monkeypatch):
    calls = []
    monkeypatch.setattr(auto, "probe", measured([0.1], [100.0], calls))
    with edgeinf.load(int8_file, num_threads=1, xnnpack=False) as model:
        assert model.backend == "tflite" and not calls and "auto" not in model.details


def test_a_configured_backend_preference_is_not_second_guessed(int8_file, monkeypatch):
    calls = []
    monkeypatch.setattr(auto, "probe", measured([0.1], [100.0], calls))
    monkeypatch.setenv("EDGEINF_BACKENDS", "tflite")
    with edgeinf.load(int8_file, num_threads=1) as model:
        assert model.backend == "tflite" and not calls and "auto" not in model.details


def test_a_corrupt_cache_entry_is_measured_again(int8_file, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(auto, "probe", measured([1.0], [3.0], calls))
    edgeinf.load(int8_file, num_threads=1).close()
    (entry,) = (tmp_path / "cache" / "auto").iterdir()
    entry.write_text('{"backend": "gpu"')
    with edgeinf.load(int8_file, num_threads=1) as model:
        assert model.backend == "edgeinf" and len(calls) == 2


def test_the_real_probe_times_both_contenders(int8_file):
    """The probe itself (not its timings): each contender runs at least once, at most PROBE_RUNS."""
    from edgeinf.backends import create
    from edgeinf.backends.edgeinf import EngineBackend
    from edgeinf.formats.tflite import read_tflite

    engine = EngineBackend(read_tflite(int8_file.read_bytes()), num_threads=1)
    litert = create("tflite", int8_file, num_threads=1)
    try:
        e, t = auto.probe(engine, litert)
        assert 1 <= len(e) == len(t) <= auto.PROBE_RUNS and min(e + t) > 0
    finally:
        engine.close()
        litert.close()


def test_float_input_models_are_no_exception(tmp_path, monkeypatch, rng):
    """A float32 boundary (QUANTIZE in, DEQUANTIZE out) runs whole on the engine: auto measures it too."""
    calls = []
    monkeypatch.setattr(auto, "probe", measured([1.0], [3.0], calls))
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 3), "float32")
    q = g.unary("QUANTIZE", x, out_q=(f32(0.03), 0))
    c = g.conv(q, 4, 3, out_q=random_q(rng, 0.05, 0.2))
    y = g.unary("DEQUANTIZE", c, out_q=None, dtype="float32")
    path = tmp_path / "float_io.tflite"
    path.write_bytes(g.build([x], [y]))
    with edgeinf.load(path, num_threads=1) as model:
        assert model.backend == "edgeinf" and calls
