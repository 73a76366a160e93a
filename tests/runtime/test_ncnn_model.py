"""Model on NCNN gives exactly what ncnn.Net driven by hand gives."""

from __future__ import annotations

import numpy as np
import pytest

import edgeinf

ncnn = pytest.importorskip("ncnn")


@pytest.fixture(scope="module")
def sr_path(model_path):
    return model_path("realesr_animevideov3_x2")


def by_hand(path, chw, fp16):
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = 1
    for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
        setattr(net.opt, flag, fp16)
    assert net.load_param(str(path)) == 0
    assert net.load_model(str(path.with_suffix(".bin"))) == 0
    ex = net.create_extractor()
    mat = ncnn.Mat(chw)
    ex.input("data", mat)
    code, out = ex.extract("output")
    assert code == 0
    return np.array(out)


def test_specs_come_from_the_param_file(sr_path):
    with edgeinf.load(sr_path, num_threads=1) as model:
        assert model.backend == "ncnn" and model.runtime.startswith("ncnn ")
        assert [s.name for s in model.inputs] == ["data"]
        assert [s.name for s in model.outputs] == ["output"]
        assert model.inputs[0].layout == edgeinf.Layout.NCHW
        # The Input layer declares no size; its first convolution's weights imply 3 channels.
        assert model.inputs[0].shape == (1, 3, -1, -1)
        assert model.delegate is None  # Vulkan is off by default


@pytest.mark.parametrize("fp16", [False, True])
def test_run_equals_ncnn_by_hand(sr_path, rng, fp16):
    chw = rng.random((3, 24, 20), dtype=np.float32)
    with edgeinf.load(sr_path, num_threads=1, fp16=fp16) as model:
        assert model.details["fp16"] is fp16
        ours = model.run(chw[np.newaxis].copy())["output"]
        also = model.run(chw)["output"]  # a CHW image without the batch axis is accepted too
    theirs = by_hand(sr_path, chw, fp16)
    assert ours.shape == (1, 3, 48, 40)  # 2x super-resolution
    np.testing.assert_array_equal(ours[0], theirs)
    np.testing.assert_array_equal(also, ours)


def test_super_resolution_output_resembles_an_upscaled_input(sr_path, rng):
    # A smooth image upscaled 2x by the network stays close to the same image upscaled by repetition.
    y, x = np.mgrid[0:32, 0:32].astype(np.float32)
    chw = np.stack([(x + y) / 62.0, x / 31.0, y / 31.0]).astype(np.float32)
    with edgeinf.load(sr_path, num_threads=1, fp16=False) as model:
        out = model.run(chw)["output"][0]
    naive = chw.repeat(2, axis=1).repeat(2, axis=2)
    inner = (slice(None), slice(4, -4), slice(4, -4))
    assert np.abs(out[inner] - naive[inner]).mean() < 0.05


def test_input_buffer_after_resize(sr_path, rng):
    chw = rng.random((1, 3, 16, 16), dtype=np.float32)
    with edgeinf.load(sr_path, num_threads=1, fp16=False) as model:
        with pytest.raises(edgeinf.RuntimeFailure, match="resize_input"):
            model.input_buffer(0)
        model.resize_input(0, (1, 3, 16, 16))
        buffer = model.input_buffer(0)
        buffer[...] = chw
        np.testing.assert_array_equal(model.invoke()["output"], model.run(chw)["output"])


def test_an_in_place_first_layer_leaves_the_callers_array_alone(tmp_path, rng):
    # ReLU works in place in ncnn: fed the caller's memory directly, it would overwrite it.
    param = tmp_path / "relu.param"
    param.write_text("7767517\n2 2\nInput input 0 1 data 0=5 1=4 2=2\nReLU relu 1 1 data out\n")
    (tmp_path / "relu.bin").write_bytes(b"")
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    before = x.copy()
    with edgeinf.load(param, num_threads=1, fp16=False) as model:  # fp32: exact on ARMv8.2 too
        assert model.inputs[0].shape == (1, 2, 4, 5)
        out = model.run(x)["out"]
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(out, np.maximum(before, 0))


def test_load_reads_the_param_file_once(sr_path, monkeypatch):
    from edgeinf.compat import check as compat_check
    from edgeinf.formats import ncnn_param

    calls = []
    real = ncnn_param.read_ncnn_param
    monkeypatch.setattr(ncnn_param, "read_ncnn_param", lambda *a, **k: calls.append(a) or real(*a, **k))
    with edgeinf.load(sr_path, num_threads=1) as model:
        assert model.report.runnable("ncnn")
    assert len(calls) == 1
    assert model.report.to_json() == compat_check(sr_path, backend="ncnn").to_json()
