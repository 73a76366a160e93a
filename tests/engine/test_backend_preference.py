"""``EDGEINF_BACKENDS``: the order ``load(backend="auto")`` tries backends in."""

from __future__ import annotations

import pytest
from engine_models import Graph, f32

import edgeinf
from edgeinf import backends
from edgeinf.errors import InputError


@pytest.fixture
def conv_file(tmp_path, rng):
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 3), q=(f32(0.02), -3))
    y = g.conv(x, 4, 3, out_q=(f32(0.05), 7))
    path = tmp_path / "conv.tflite"
    path.write_bytes(g.build([x], [y]))
    return path


def test_auto_keeps_litert_by_default_when_the_probe_finds_it_faster(conv_file, monkeypatch, tmp_path):
    import edgeinf.backends.auto

    monkeypatch.delenv("EDGEINF_BACKENDS", raising=False)
    monkeypatch.setenv("EDGEINF_CACHE", str(tmp_path))
    # the probe's (engine, LiteRT) seconds per run: LiteRT three times faster
    monkeypatch.setattr(edgeinf.backends.auto, "probe", lambda engine, litert: ([3e-3], [1e-3]))
    with edgeinf.load(conv_file, num_threads=1) as model:
        assert model.backend == "tflite"


def test_named_backends_come_first(conv_file, monkeypatch):
    monkeypatch.setenv("EDGEINF_BACKENDS", " edgeinf , tflite")
    assert backends.automatic() == ("edgeinf", "tflite", "ncnn", "onnxruntime")
    with edgeinf.load(conv_file, num_threads=1) as model:
        assert model.backend == "edgeinf"
        assert "fallback" not in model.details


def test_the_default_order_follows_the_named_backends(monkeypatch):
    monkeypatch.setenv("EDGEINF_BACKENDS", "ncnn")
    assert backends.automatic() == ("ncnn", "tflite", "onnxruntime")  # a .tflite file still loads on LiteRT


def test_an_explicit_backend_ignores_the_setting(conv_file, monkeypatch):
    monkeypatch.setenv("EDGEINF_BACKENDS", "edgeinf")
    with edgeinf.load(conv_file, backend="tflite", num_threads=1) as model:
        assert model.backend == "tflite"


def test_an_unknown_name_is_refused(conv_file, monkeypatch):
    monkeypatch.setenv("EDGEINF_BACKENDS", "tflite,tensorrt")
    with pytest.raises(InputError, match=r"EDGEINF_BACKENDS='tflite,tensorrt' names unknown backend 'tensorrt'"):
        edgeinf.load(conv_file, num_threads=1)
