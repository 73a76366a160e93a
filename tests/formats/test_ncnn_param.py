"""The NCNN .param reader and .bin size check."""

from __future__ import annotations

import shutil
import struct

import pytest

from edgeinf.errors import ModelFileError
from edgeinf.formats.ncnn_param import parse_params, read_ncnn_param


@pytest.fixture
def esr(model_path, tmp_path):
    """A private copy of the Real-ESRGAN .param/.bin pair (tests may damage it)."""
    src = model_path("realesr_animevideov3_x2")
    shutil.copy(src, tmp_path / "m.param")
    shutil.copy(src.with_suffix(".bin"), tmp_path / "m.bin")
    return tmp_path / "m.param"


def test_real_model_structure_agrees_with_ncnn(model_path):
    ncnn = pytest.importorskip("ncnn")
    path = model_path("realesr_animevideov3_x2")
    p = read_ncnn_param(path)
    net = ncnn.Net()
    assert net.load_param(str(path)) == 0
    assert net.load_model(str(path.with_suffix(".bin"))) == 0
    theirs = net.layers()
    assert [(layer.type, layer.name) for layer in p.layers] == [(layer.type, layer.name) for layer in theirs]
    assert list(net.input_names()) == list(p.input_shapes)
    assert list(net.output_names()) == list(p.outputs)
    assert p.layer_count == len(theirs)


def test_real_model_bin_size_is_exact(model_path):
    path = model_path("realesr_animevideov3_x2")
    p = read_ncnn_param(path)
    assert p.expected_bin_size == p.bin_size == path.with_suffix(".bin").stat().st_size
    assert p.bin_note is None
    conv = p.layers[2]
    # this model stores weights as fp16: tag 0x01306B47, 2 bytes per weight, then fp32 bias
    assert struct.unpack("<I", path.with_suffix(".bin").read_bytes()[:4])[0] == 0x01306B47
    assert p.weight_bytes_by_layer[conv.name] == 4 + 2 * conv.params[6] + 4 * conv.params[0]


def test_missing_bin(esr):
    esr.with_suffix(".bin").unlink()
    with pytest.raises(
        ModelFileError, match=r".param without its .bin: 35 layers load weights \(first: Convolution Conv_0\)"
    ):
        read_ncnn_param(esr)


def test_short_bin_names_expected_and_given(esr):
    b = esr.with_suffix(".bin")
    b.write_bytes(b.read_bytes()[:1000])
    with pytest.raises(
        ModelFileError, match=r"\.bin is 1000 bytes, the params imply at least 3460 \(layer Convolution Conv_0"
    ):
        read_ncnn_param(esr)


def test_long_bin_is_a_note(esr):
    b = esr.with_suffix(".bin")
    b.write_bytes(b.read_bytes() + bytes(8))
    assert "8 more than the 1247368 the params imply" in read_ncnn_param(esr).bin_note


def test_fp16_and_int8_tags_are_sized(tmp_path):
    # one InnerProduct stored as fp16 (tag 0x01306B47, 2-byte weights padded to 4) with a bias
    param = tmp_path / "fc.param"
    param.write_text("7767517\n2 2\nInput in 0 1 data 0=5\nInnerProduct fc 1 1 data out 0=3 1=1 2=15\n")
    fp16 = struct.pack("<I", 0x01306B47) + bytes(32) + bytes(12)  # 15 halves = 30 bytes -> 32, then 3 fp32
    (tmp_path / "fc.bin").write_bytes(fp16)
    assert read_ncnn_param(param).expected_bin_size == len(fp16)
    int8 = struct.pack("<I", 0x000D4B38) + bytes(16) + bytes(12)
    (tmp_path / "fc.bin").write_bytes(int8)
    assert read_ncnn_param(param).expected_bin_size == len(int8)
    codebook = bytes([1, 0, 0, 0]) + bytes(1024) + bytes(16) + bytes(12)
    (tmp_path / "fc.bin").write_bytes(codebook)
    assert read_ncnn_param(param).expected_bin_size == len(codebook)


def test_unknown_weighted_layer_skips_with_a_note(tmp_path):
    param = tmp_path / "g.param"
    param.write_text("7767517\n2 2\nInput in 0 1 data\nGemm g 1 1 data out 0=1.0\n")
    (tmp_path / "g.bin").write_bytes(bytes(64))
    p = read_ncnn_param(param)
    assert p.expected_bin_size is None and "Gemm g (line 4)" in p.bin_note


def test_weightless_model_needs_no_bin(tmp_path):
    param = tmp_path / "r.param"
    param.write_text("7767517\n2 2\nInput in 0 1 data 0=4 1=3 2=2\nReLU r 1 1 data out\n")
    p = read_ncnn_param(param)
    assert p.bin_path is None and p.input_shapes == {"data": (2, 3, 4)}


def test_param_encodings():
    params = parse_params(["0=1", "1=2.5", "-23303=3,1,2,3", "4=1e-3", "5=abc", '6="x"', "7=1,2", "8=-23"], "t")
    assert params == {0: 1, 1: 2.5, 3: (1, 2, 3), 4: 0.001, 5: "abc", 6: "x", 7: (1, 2), 8: -23}
    assert isinstance(params[1], float) and isinstance(params[0], int)


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("7767516\n1 1\nInput in 0 1 data\n", r"line 1: magic is '7767516', expected 7767517"),
        ("7767517\n1 x\n", r"line 2: expected '<layer_count> <blob_count>'"),
        ("7767517\n0 1\n", r"layer count 0 and blob count 1 must be positive"),
        ("7767517\n2 2\nInput in 0 1 data\n", r"declares 2 layers, the file has 1 \(truncated\?\)"),
        ("7767517\n1 1\nInput in 0 1 data\nReLU r 1 1 data out\n", r"declares 1 layers but line 4 holds layer 2"),
        (
            "7767517\n2 1\nInput in 0 1 data\nReLU r 1 1 data out\n",
            r"line 4: 2 distinct blobs so far, the header declares 1",
        ),
        ("7767517\n1 1\nInput in 0 3 data\n", r"declares 0 inputs and 3 outputs, the line has 1 names"),
        ("7767517\n1 1\nInput in 0 1 data 40=1\n", r"param id 40 out of range 0..31"),
        ("7767517\n1 1\nInput in 0 1 data -23300=3,1,2\n", r"array param 0 declares 3 elements but has 2"),
        ("7767517\n1 1\nInput in 0 1 data 0=1x\n", r"value '1x' is neither an int nor a float"),
        ("7767517\n1 1\nInput in 0 1 data 0\n", r"expected id=value, got '0'"),
    ],
)
def test_malformed_param(tmp_path, text, pattern):
    p = tmp_path / "bad.param"
    p.write_text(text)
    with pytest.raises(ModelFileError, match=pattern):
        read_ncnn_param(p)


def test_binary_and_missing(tmp_path):
    p = tmp_path / "bin.param"
    p.write_bytes(b"\x7f\x85\x76\x00" + bytes(64))
    with pytest.raises(ModelFileError, match="binary data that is neither a text .param nor a binary .param.bin"):
        read_ncnn_param(p)
    with pytest.raises(ModelFileError, match="no such file"):
        read_ncnn_param(tmp_path / "none.param")
