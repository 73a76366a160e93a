"""The .tflite reader: agreement with the generated schema module, verification, fuzzing."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeinf.errors import ModelFileError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import pack

TFLITE_MODELS = [
    "face_detection_short_range",
    "face_detection_full_range",
    "face_detection_full_range_sparse",
    "face_landmark",
]


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.title() for p in rest)


def _oracle(data: bytes):
    """The same file read with the generated schema module's Object API."""
    return schema().ModelT.InitFromPackedBuf(bytearray(data), 0)


@pytest.mark.parametrize("name", TFLITE_MODELS)
def test_reader_agrees_with_generated_schema_module(model_path, name):
    data = model_path(name).read_bytes()
    m = read_tflite(data)
    ref = _oracle(data)
    assert len(m.opcodes) == len(ref.operatorCodes)
    for ours, theirs in zip(m.opcodes, ref.operatorCodes):
        assert ours.code == max(theirs.builtinCode, theirs.deprecatedBuiltinCode), ours
        assert ours.version == theirs.version, ours
    assert len(m.subgraphs) == len(ref.subgraphs)
    for sg, rsg in zip(m.subgraphs, ref.subgraphs):
        assert sg.inputs == tuple(rsg.inputs) and sg.outputs == tuple(rsg.outputs)
        assert len(sg.tensors) == len(rsg.tensors)
        for t, rt in zip(sg.tensors, rsg.tensors):
            assert t.name == rt.name.decode(), t.index
            assert t.shape == tuple(rt.shape if rt.shape is not None else ()), t.name
            assert t.buffer == rt.buffer, t.name
            assert (t.sparsity is None) == (rt.sparsity is None), t.name
            ref_scales = (
                () if rt.quantization is None or rt.quantization.scale is None else tuple(rt.quantization.scale)
            )
            assert (t.quantization.scales if t.quantization else ()) == pytest.approx(ref_scales), t.name
            data_len = 0 if ref.buffers[rt.buffer].data is None else len(ref.buffers[rt.buffer].data)
            assert t.data_size == data_len, t.name
        assert len(sg.operators) == len(rsg.operators)
        for op, rop in zip(sg.operators, rsg.operators):
            assert op.opcode.index == rop.opcodeIndex and op.inputs == tuple(rop.inputs), op.index
            assert op.outputs == tuple(rop.outputs), op.index
            if rop.builtinOptions is not None:
                for key, value in op.options.items():
                    theirs = getattr(rop.builtinOptions, _camel(key))
                    assert value == pytest.approx(theirs if not isinstance(theirs, list) else tuple(theirs)), (
                        op.index,
                        key,
                    )


def test_reader_agrees_with_the_runtime(model_path):
    interp_mod = pytest.importorskip("ai_edge_litert.interpreter")
    path = model_path("face_detection_full_range_sparse")
    m = read_tflite(path)
    it = interp_mod.Interpreter(
        model_path=str(path), experimental_op_resolver_type=interp_mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    ops = it._get_ops_details()
    assert [o["op_name"] for o in ops] == [op.opcode.name for op in m.main.operators]
    by_index = {d["index"]: d for d in it.get_tensor_details()}
    for t in m.main.tensors:
        if t.index in by_index:
            assert tuple(by_index[t.index]["shape"]) == t.shape, t.name
    assert m.min_runtime_version == "2.2.0"
    assert sum(t.sparsity is not None for t in m.main.tensors) == sum(o["op_name"] == "DENSIFY" for o in ops)


def test_tensor_data_matches_oracle(model_path):
    data = model_path("face_landmark").read_bytes()
    m = read_tflite(data)
    ref = _oracle(data)
    t = next(t for t in m.main.tensors if t.is_constant and t.dtype == "FLOAT32" and t.num_elements > 100)
    expected = np.asarray(ref.buffers[t.buffer].data, dtype=np.uint8).view(np.float32).reshape(t.shape)
    np.testing.assert_array_equal(m.tensor_data(0, t.index), expected)


# ---- corrupt files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def face_bytes(model_path):
    return model_path("face_detection_short_range").read_bytes()


def _edited(face_bytes, edit):
    model = _oracle(face_bytes)
    edit(model)
    return pack(model)


@pytest.mark.parametrize(
    "data, pattern",
    [
        (b"", r"0 bytes is too short"),
        (b"\x10\x00\x00\x00TFL2" + bytes(100), r"bytes 4..8 are b'TFL2', expected b'TFL3'"),
        (b"\xff\xff\xff\x7fTFL3" + bytes(8), r"outside the file's 16 bytes"),
    ],
)
def test_header_errors(data, pattern):
    with pytest.raises(ModelFileError, match=pattern):
        read_tflite(data)


def test_truncated_file_names_the_byte(face_bytes):
    with pytest.raises(ModelFileError, match=r"file ends at byte 100000|outside the file's 100000 bytes"):
        read_tflite(face_bytes[:100000])


def _set_input(model, value):
    model.subgraphs[0].operators[2].inputs[0] = value


@pytest.mark.parametrize(
    "edit, pattern",
    [
        (lambda m: _set_input(m, 9999), r"operator 2 \(CONV_2D\) inputs\[0\]: tensor index 9999 out of range 0..249"),
        (lambda m: setattr(m.subgraphs[0].tensors[5], "buffer", 5000), r"tensor 5 .*buffer index 5000 out of range"),
        (lambda m: setattr(m.subgraphs[0].operators[0], "opcodeIndex", 40), r"opcode index 40 out of range 0..8"),
        (lambda m: setattr(m.subgraphs[0], "outputs", [175, 300]), r"outputs\[1\]: tensor index 300 out of range"),
        (lambda m: setattr(m, "version", 2), r"schema version is 2, expected 3"),
        (lambda m: setattr(m, "subgraphs", []), r"has no subgraphs"),
        (
            lambda m: setattr(m.subgraphs[0].tensors[1], "shape", np.array([24, 5, 5, 4], np.int32)),
            r"needs 4800 bytes of data, its buffer 1 has 3600",
        ),
    ],
)
def test_index_and_size_errors(face_bytes, edit, pattern):
    with pytest.raises(ModelFileError, match=pattern):
        read_tflite(_edited(face_bytes, edit))


def test_quantization_errors(face_bytes):
    s = schema()

    def per_channel_mismatch(m):
        q = s.QuantizationParametersT()
        q.scale, q.zeroPoint, q.quantizedDimension = [0.1, 0.2], [0, 0], 0
        m.subgraphs[0].tensors[0].quantization = q  # shape [1,128,128,3]: dim 0 is 1, not 2

    with pytest.raises(ModelFileError, match=r"2 per-channel scales but dimension 0 of shape \[1, 128, 128, 3\] is 1"):
        read_tflite(_edited(face_bytes, per_channel_mismatch))

    def count_mismatch(m):
        q = s.QuantizationParametersT()
        q.scale, q.zeroPoint = [0.1], [0, 1]
        m.subgraphs[0].tensors[0].quantization = q

    with pytest.raises(ModelFileError, match=r"1 scales but 2 zero points"):
        read_tflite(_edited(face_bytes, count_mismatch))


def test_external_buffer_outside_file(face_bytes):
    s = schema()

    def external(m):
        b = s.BufferT()
        b.offset, b.size = 10_000_000, 64
        m.buffers.append(b)  # the face model has 88 buffers: this is buffer 88

    model = _oracle(face_bytes)
    external(model)
    builder_bytes = _pack_raw(model)
    with pytest.raises(ModelFileError, match=r"buffer 88 claims bytes 10000000..10000064 outside the file"):
        read_tflite(builder_bytes)


def _pack_raw(model) -> bytes:
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_vtable_corruption_is_named(face_bytes):
    data = bytearray(face_bytes)
    root = struct.unpack_from("<I", data, 0)[0]
    struct.pack_into("<i", data, root, -(10**9))  # the root table's vtable far past the end
    with pytest.raises(ModelFileError, match=r"Model \(vtable\): points to byte \d+, outside the file"):
        read_tflite(bytes(data))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ModelFileError, match="no such file"):
        read_tflite(tmp_path / "nope.tflite")
    with pytest.raises(ModelFileError, match="is a directory"):
        read_tflite(tmp_path)


# ---- fuzzing: any byte string gives a model or a ModelFileError ---------------------------------


def _read_or_error(data: bytes) -> None:
    try:
        m = read_tflite(data)
    except ModelFileError as exc:
        assert re.search(r"\S", str(exc))
        return
    # whatever was accepted is internally consistent
    for sg in m.subgraphs:
        n = len(sg.tensors)
        for op in sg.operators:
            assert all(-1 <= i < n for i in op.inputs + op.outputs)
        assert all(0 <= t.buffer < len(m.buffer_sizes) for t in sg.tensors)


_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@_FUZZ
@given(st.binary(max_size=4096))
def test_fuzz_random_bytes(data):
    _read_or_error(data)


@pytest.mark.slow
@_FUZZ
@given(st.binary(min_size=8, max_size=2048))
def test_fuzz_random_bytes_with_identifier(data):
    _read_or_error(data[:4] + b"TFL3" + data[8:])


@pytest.mark.slow
@_FUZZ
@given(cut=st.integers(min_value=0, max_value=229031))
def test_fuzz_truncations(face_bytes, cut):
    _read_or_error(face_bytes[:cut])


@pytest.mark.slow
@_FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 229031), st.integers(0, 7)), min_size=1, max_size=8))
def test_fuzz_bit_flips(face_bytes, flips):
    _read_or_error(_xored(face_bytes, [(pos, 1 << bit) for pos, bit in flips]))


def _xored(data: bytes, masks) -> bytes:
    """``data`` with each (position, mask) XORed in."""
    edited = bytearray(data)
    for pos, mask in masks:
        edited[pos] ^= mask
    return bytes(edited)


@pytest.mark.slow
@_FUZZ
@given(masks=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 255)), min_size=1, max_size=4))
def test_fuzz_header_region_bytes(face_bytes, masks):
    # the first 20 kB hold the tables and vtables (weights come later): edits there hit structure;
    # a byte XORed with any of 0..255 takes any value
    _read_or_error(_xored(face_bytes, masks))
