"""Every bad model file or input gets a specific EdgeInfError naming expected and given."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import edgeinf
from edgeinf import backends, zoo


@pytest.fixture(scope="module")
def face_bytes(model_path):
    return model_path("face_detection_short_range").read_bytes()


@pytest.fixture(scope="module")
def face_model(model_path):
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1) as model:
        yield model


def test_missing_file(tmp_path):
    with pytest.raises(edgeinf.ModelFileError, match="not found"):
        edgeinf.load(tmp_path / "nope.tflite")


def test_directory(tmp_path):
    with pytest.raises(edgeinf.ModelFileError, match="directory"):
        edgeinf.load(tmp_path)


def test_empty_file(tmp_path):
    (tmp_path / "empty.tflite").write_bytes(b"")
    with pytest.raises(edgeinf.ModelFileError, match="empty"):
        edgeinf.load(tmp_path / "empty.tflite")


def test_wrong_extension(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(edgeinf.ModelFileError, match=r"expected a \.tflite"):
        edgeinf.load(tmp_path / "notes.txt")


def test_not_a_flatbuffer(tmp_path):
    (tmp_path / "fake.tflite").write_bytes(b"\x00" * 64)
    with pytest.raises(edgeinf.ModelFileError, match="TFL3"):
        edgeinf.load(tmp_path / "fake.tflite")


@pytest.mark.parametrize("keep", [8, 100, 1000, 20000, 200000])
def test_truncated_tflite_is_rejected_before_the_runtime(tmp_path, face_bytes, keep):
    path = tmp_path / "cut.tflite"
    path.write_bytes(face_bytes[:keep])
    with pytest.raises(edgeinf.ModelFileError):
        edgeinf.load(path, check=False)


def test_corrupt_offsets_are_rejected_before_the_runtime(tmp_path, face_bytes):
    data = bytearray(face_bytes)
    data[0:4] = (len(data) + 4096).to_bytes(4, "little")  # root table offset past the end
    path = tmp_path / "bad-root.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(edgeinf.ModelFileError):
        edgeinf.load(path, check=False)


def test_param_without_its_bin(tmp_path, model_path):
    param = tmp_path / "sr.param"
    shutil.copy(model_path("realesr_animevideov3_x2"), param)
    with pytest.raises(edgeinf.ModelFileError, match=r"\.bin"):
        edgeinf.load(param)


def test_param_with_a_bin_of_the_wrong_size(tmp_path, model_path):
    src = model_path("realesr_animevideov3_x2")
    param = tmp_path / "sr.param"
    shutil.copy(src, param)
    (tmp_path / "sr.bin").write_bytes(src.with_suffix(".bin").read_bytes()[:1000])
    with pytest.raises(edgeinf.ModelFileError, match="1000"):
        edgeinf.load(param)


def test_suffix_and_content_disagree(tmp_path, model_path):
    path = tmp_path / "really-ncnn.tflite"
    shutil.copy(model_path("realesr_animevideov3_x2"), path)
    with pytest.raises(edgeinf.ModelFileError, match="ncnn"):
        edgeinf.load(path)


def test_onnx_runs_only_on_onnxruntime(model_path):
    with pytest.raises(edgeinf.ModelFileError, match=r"a onnx model cannot run on backend\(s\) \['tflite'\]"):
        edgeinf.load(model_path("ppocr_cls_mobile"), backend="tflite")


def test_unknown_backend_name(model_path):
    with pytest.raises(ValueError, match="unknown backend 'tensorrt'"):
        edgeinf.load(model_path("face_detection_short_range"), backend="tensorrt")


def test_backend_that_cannot_read_the_file(model_path):
    with pytest.raises(edgeinf.ModelFileError, match="cannot run on backend"):
        edgeinf.load(model_path("face_detection_short_range"), backend="ncnn")


def test_missing_runtime_package(model_path, monkeypatch):
    monkeypatch.setattr(backends, "installed_package", lambda name: None)
    with pytest.raises(edgeinf.BackendUnavailableError) as info:
        edgeinf.load(model_path("face_detection_short_range"))
    assert info.value.requested == ("tflite",)
    assert "pip install" in str(info.value)


def test_bad_thread_count(model_path):
    with pytest.raises(ValueError, match="num_threads"):
        edgeinf.load(model_path("face_detection_short_range"), num_threads=0)


def test_wrong_input_shape(face_model):
    with pytest.raises(edgeinf.InputError, match=r"expects shape \[1, 128, 128, 3\], got \[1, 64, 64, 3\]"):
        face_model.run(np.zeros((1, 64, 64, 3), np.float32))


def test_wrong_input_dtype(face_model):
    with pytest.raises(edgeinf.InputError, match="expects dtype float32, got uint8"):
        face_model.run(np.zeros((1, 128, 128, 3), np.uint8))


def test_wrong_input_count(face_model):
    x = np.zeros((1, 128, 128, 3), np.float32)
    with pytest.raises(edgeinf.InputError, match="takes 1 input"):
        face_model.run([x, x])


def test_wrong_input_name(face_model):
    with pytest.raises(edgeinf.InputError, match="missing \\['input'\\], unexpected \\['image'\\]"):
        face_model.run({"image": np.zeros((1, 128, 128, 3), np.float32)})


def test_not_an_array(face_model):
    with pytest.raises(edgeinf.InputError, match="numpy array, got list"):
        face_model.run([[0.0] * 3])


def test_non_contiguous_input(face_model):
    x = np.zeros((1, 128, 256, 3), np.float32)[:, :, ::2]
    with pytest.raises(edgeinf.InputError, match="C-contiguous"):
        face_model.run(x)


def test_unknown_input_buffer(face_model):
    with pytest.raises(edgeinf.InputError, match="input index 3 out of range"):
        face_model.input_buffer(3)


def test_a_corrupt_tflite_is_named_by_its_file(tmp_path):
    path = tmp_path / "cut.tflite"
    path.write_bytes(zoo.path("face_detection_short_range").read_bytes()[:5000])
    with pytest.raises(edgeinf.ModelFileError, match="cut.tflite"):
        edgeinf.load(path)
