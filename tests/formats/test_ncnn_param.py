"""The NCNN .param reader and .bin size check."""

from __future__ import annotations

import re
import struct
import tracemalloc
from pathlib import Path

import pytest

import edgeinf
from edgeinf.errors import ModelFileError
from edgeinf.formats.ncnn_param import parse_params, read_ncnn_param


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


def test_long_bin_is_refused_naming_both_sizes(esr):
    b = esr.with_suffix(".bin")
    b.write_bytes(b.read_bytes() + bytes(8))
    with pytest.raises(
        ModelFileError, match=r"m\.bin is 1247376 bytes but the params imply 1247368 \(8 bytes left over\)"
    ):
        read_ncnn_param(esr)


def _edit_first_conv(param, extra: str) -> None:
    lines = param.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Convolution"))
    lines[first] += " " + extra
    param.write_text("\n".join(lines) + "\n")


def test_int8_scale_flag_on_a_real_model_is_refused(esr):
    # 8=101 makes ncnn read int8 scales after Conv_0's bias, out of step with the file: the
    # weights of every later layer are misread and run() corrupts the heap.
    _edit_first_conv(esr, "8=101")
    with pytest.raises(ModelFileError) as info:
        read_ncnn_param(esr)
    message = str(info.value)
    assert re.search(r"m\.bin is 1247368 bytes but the params imply \d+ \(\d+ bytes left over\)", message), message
    assert "went astray at or before Convolution Conv_2 (line 7)" in message
    with pytest.raises(ModelFileError, match="m.bin is 1247368 bytes but the params imply"):
        edgeinf.check(esr)
    with pytest.raises(ModelFileError, match="m.bin is 1247368 bytes but the params imply"):
        edgeinf.load(esr, check=False)  # refused by the reader itself, before ncnn sees it


def test_float_where_an_integer_is_read_is_refused(esr):
    _edit_first_conv(esr, "5=1.0")
    with pytest.raises(ModelFileError, match=r"line 5: Convolution Conv_0: param 5 must be an integer, got 1\.0"):
        read_ncnn_param(esr)


def _ncnn_pair(tmp_path, name: str, param_text: str, weights: bytes | None = None) -> Path:
    """``name``.param holding ``param_text`` and, given ``weights``, ``name``.bin beside it."""
    param = tmp_path / f"{name}.param"
    param.write_text(param_text)
    if weights is not None:
        param.with_suffix(".bin").write_bytes(weights)
    return param


def test_fp16_and_int8_tags_are_sized(tmp_path):
    # one InnerProduct stored as fp16 (tag 0x01306B47, 2-byte weights padded to 4) with a bias
    fp16 = struct.pack("<I", 0x01306B47) + bytes(32) + bytes(12)  # 15 halves = 30 bytes -> 32, then 3 fp32
    param = _ncnn_pair(
        tmp_path, "fc", "7767517\n2 2\nInput in 0 1 data 0=5\nInnerProduct fc 1 1 data out 0=3 1=1 2=15\n", fp16
    )
    assert read_ncnn_param(param).expected_bin_size == len(fp16)
    int8 = struct.pack("<I", 0x000D4B38) + bytes(16) + bytes(12)
    (tmp_path / "fc.bin").write_bytes(int8)
    assert read_ncnn_param(param).expected_bin_size == len(int8)
    codebook = bytes([1, 0, 0, 0]) + bytes(1024) + bytes(16) + bytes(12)
    (tmp_path / "fc.bin").write_bytes(codebook)
    assert read_ncnn_param(param).expected_bin_size == len(codebook)


# Each layer line with the .bin bytes its load_model reads (ncnn src/layer/*.cpp), fp32 weights:
# a 4-byte zero tag before each type-0 array, raw fp32 for type-1 arrays.
_SIZED_LAYERS = [
    # weights 72, bias 4, int8: weight scales per output + input scale
    ("Convolution c 1 1 data out 0=4 1=3 5=1 6=72 8=1", 4 + 4 * 72 + 4 * 4 + 4 * 4 + 4),
    # 8=101 adds an output scale
    ("Convolution c 1 1 data out 0=4 1=3 5=1 6=72 8=101", 4 + 4 * 72 + 4 * 4 + 4 * 4 + 4 + 4),
    # depthwise 8=1: one weight scale per group (7=2); 8=2: one shared weight scale
    ("ConvolutionDepthWise c 1 1 data out 0=2 1=3 5=1 6=18 7=2 8=1", 4 + 4 * 18 + 4 * 2 + 4 * 2 + 4),
    ("ConvolutionDepthWise c 1 1 data out 0=2 1=3 5=1 6=18 7=2 8=2", 4 + 4 * 18 + 4 * 2 + 4 + 4),
    ("ConvolutionDepthWise c 1 1 data out 0=2 1=3 5=1 6=18 7=2 8=3", 4 + 4 * 18 + 4 * 2),  # 3: no scales
    ("Deconvolution c 1 1 data out 0=4 1=3 5=1 6=72 8=1", 4 + 4 * 72 + 4 * 4),  # no int8 term
    ("Convolution c 1 1 data out 0=4 1=3 5=1 6=72 19=1", 0),  # dynamic weights: a second input
    ("InnerProduct f 1 1 data out 0=3 1=1 2=6 8=1", 4 + 4 * 6 + 4 * 3 + 4 * 3 + 4),
    ("BatchNorm b 1 1 data out 0=2", 4 * 4 * 2),
    ("GroupNorm g 1 1 data out 0=1 1=2", 2 * 4 * 2),
    ("GroupNorm g 1 1 data out 0=1 1=2 3=0", 0),
    ("PReLU p 1 1 data out 0=2", 4 * 2),
    ("Scale s 1 1 data out 0=2 1=1", 2 * 4 * 2),
    # LSTM 0=num_output 1=weight size 3=hidden: xc, bias, hc, then hr as num_output != hidden
    ("LSTM l 1 1 data out 0=4 1=32 3=2", (4 + 4 * 32) + (4 + 4 * 2 * 4) + (4 + 4 * 4 * 8) + (4 + 4 * 2 * 4)),
    ("GRU l 1 1 data out 0=4 1=24 2=2", (4 + 4 * 24) + (4 + 4 * 4 * 4 * 2) + (4 + 4 * 4 * 12 * 2)),
    ("RNN l 1 1 data out 0=4 1=8 8=1", (4 + 4 * 8) + (4 + 4 * 4) + (4 + 4 * 16) + 2 * 4 * 4),
    # Gemm: constant A (K x M), B (N x K), C broadcast 3 (N x M)
    ("Gemm g 1 1 data out 4=1 5=1 6=1 7=2 8=3 9=4 10=3", (4 + 4 * 8) + (4 + 4 * 12) + (4 + 4 * 6)),
    # MultiHeadAttention: q, k, v (embed x dim + bias), out (qdim x embed + bias)
    ("MultiHeadAttention a 1 1 data out 0=4 1=2 2=16", 4 * ((4 + 4 * 16) + 4 * 4)),
    ("MemoryData m 0 1 out 0=3 1=2 2=2", 4 * 12),  # load type 1 (raw) by default
    ("Embed e 1 1 data out 0=4 1=10 2=1 3=40 18=1", (4 + 4 * 40) + 4 * 4 + 4),
    ("Requantize r 1 1 data out 0=2 1=1 2=2", 4 * 2 + 4 + 4 * 2),
]


@pytest.mark.parametrize("line, size", _SIZED_LAYERS, ids=[line.split()[0] for line, _ in _SIZED_LAYERS])
def test_weight_sizes_are_exact_per_layer_type(tmp_path, line, size):
    feeds = int(line.split()[2])
    head = "7767517\n2 2\nInput in 0 1 data 0=4 1=4 2=2\n" if feeds else "7767517\n1 1\n"
    param = _ncnn_pair(tmp_path, "one", head + line + "\n")
    if size:
        (tmp_path / "one.bin").write_bytes(bytes(size))
        assert read_ncnn_param(param).expected_bin_size == size
        for wrong in (size - 4, size + 4):
            (tmp_path / "one.bin").write_bytes(bytes(wrong))
            with pytest.raises(ModelFileError, match=f"one.bin is {wrong} bytes"):
                read_ncnn_param(param)
    else:
        assert read_ncnn_param(param).bin_path is None


def test_block_quantized_gemm_is_refused_not_skipped(tmp_path):
    gemm = "Gemm g 1 1 data out 3=1 5=1 8=4 9=64 18=400"
    param = _ncnn_pair(tmp_path, "g", f"7767517\n2 2\nInput in 0 1 data\n{gemm}\n", bytes(4096))
    with pytest.raises(ModelFileError, match=r"Gemm g holds block-quantized weights \(18=400\).*cannot be verified"):
        read_ncnn_param(param)


def test_weightless_model_needs_no_bin(tmp_path):
    p = read_ncnn_param(_ncnn_pair(tmp_path, "r", "7767517\n2 2\nInput in 0 1 data 0=4 1=3 2=2\nReLU r 1 1 data out\n"))
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
        ("7767517\n1 1\nInput in 0 1 data 0=1_0\n", r"value '1_0' is neither an int nor a float"),
        ("7767517\n1 1\nInput in 0 1 data 0=1.5e\n", r"value '1.5e' is neither an int nor a float"),
        ("7767517\n1 1\nInput in 0 1 data 0=4294967296\n", r"value 4294967296 is outside ncnn's int32 range"),
        ("7767517\n1 1\nInput in 0 1 data 0=abc\n", r"Input in: param 0 must be an integer, got 'abc'"),
        ("7767517\n1 1\nInput in 0 1 data 0=-3\n", r"Input in has shape \[0, 0, -3\]"),
        ("7767517\n1 1\nInput in 0 1 data 0=100000 1=100000 2=3\n", r"Input in has shape \[3, 100000, 100000\]"),
    ],
)
def test_malformed_param(tmp_path, text, pattern):
    with pytest.raises(ModelFileError, match=pattern):
        read_ncnn_param(_ncnn_pair(tmp_path, "bad", text))


def test_binary_and_missing(tmp_path):
    p = tmp_path / "bin.param"
    p.write_bytes(b"\x7f\x85\x76\x00" + bytes(64))
    with pytest.raises(ModelFileError, match="binary data that is neither a text .param nor a binary .param.bin"):
        read_ncnn_param(p)
    with pytest.raises(ModelFileError, match="no such file"):
        read_ncnn_param(tmp_path / "none.param")


@pytest.mark.parametrize(
    "line, pattern",
    [
        # a string where a size is read: once multiplied out as a string, 3 GB of memory
        ("MemoryData md 0 1 w 0=abc 1=1000000000 2=1000", r"MemoryData md: param 0 must be an integer, got 'abc'"),
        ("MemoryData md 0 1 w 0=1000 1=1000000000 2=1000", r"implies 1000000000000000 weights in one array"),
        ("MemoryData md 0 1 w 0=-2 1=3", r"loads an array of shape \[-2, 3\]"),
        ("LSTM l 0 1 w 0=0 1=8", r"LSTM l: num_output is 0, expected a positive size"),
    ],
)
def test_absurd_sizes_are_refused_before_any_allocation(tmp_path, line, pattern):
    param = _ncnn_pair(tmp_path, "md", f"7767517\n1 1\n{line}\n", bytes(64))
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=pattern):
            edgeinf.check(param)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, f"checking a {param.stat().st_size}-byte .param took {peak} bytes"
