"""The .tflite writer: built models run on ai_edge_litert and give the numbers numpy gives."""

from __future__ import annotations

import numpy as np
import pytest

from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import (
    OpDef,
    TensorDef,
    build_model,
    insert_custom_op,
    make_dim_dynamic,
    set_op_version,
)

litert = pytest.importorskip("ai_edge_litert.interpreter")


def _run(data: bytes, *inputs: np.ndarray) -> np.ndarray:
    it = litert.Interpreter(model_content=data)
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _assert_equal(got: np.ndarray, want: np.ndarray) -> None:
    diff = np.flatnonzero(got.ravel() != want.ravel())
    assert got.shape == want.shape, (got.shape, want.shape)
    assert diff.size == 0, (
        f"first mismatch at flat index {diff[0]}: got {got.ravel()[diff[0]]}, want {want.ravel()[diff[0]]}"
    )


def test_add_with_constant_runs(rng):
    const = rng.standard_normal((1, 3, 4), dtype=np.float32)
    data = build_model(
        [
            TensorDef("a", (1, 3, 4), "float32"),
            TensorDef("c", (1, 3, 4), np.float32, data=const),
            TensorDef("out", (1, 3, 4), "float32"),
        ],
        [OpDef("ADD", [0, 1], [2])],
        inputs=[0],
        outputs=[2],
        signature_key="serving_default",
    )
    x = rng.standard_normal((1, 3, 4), dtype=np.float32)
    _assert_equal(_run(data, x), x + const)
    m = read_tflite(data)
    assert m.signatures[0].key == "serving_default" and m.signatures[0].inputs == {"a": 0}
    assert m.buffer_data(m.main.tensors[1].buffer).tobytes() == const.tobytes()


def test_conv2d_matches_numpy(rng):
    s = schema()
    x = rng.integers(-4, 5, size=(1, 6, 5, 3)).astype(np.float32)
    w = rng.integers(-3, 4, size=(4, 3, 3, 3)).astype(np.float32)  # OHWI
    b = rng.integers(-2, 3, size=(4,)).astype(np.float32)
    opts = s.Conv2DOptionsT()
    opts.padding, opts.strideW, opts.strideH = s.Padding.VALID, 1, 2
    opts.fusedActivationFunction = s.ActivationFunctionType.RELU
    data = build_model(
        [
            TensorDef("x", x.shape, "float32"),
            TensorDef("w", w.shape, "float32", data=w),
            TensorDef("b", (4,), "float32", data=b),
            TensorDef("y", (1, 2, 3, 4), "float32"),
        ],
        [OpDef("CONV_2D", [0, 1, 2], [3], options=opts)],
        inputs=[0],
        outputs=[3],
    )
    want = np.zeros((1, 2, 3, 4), np.float32)
    for i in range(2):
        for j in range(3):
            patch = x[0, 2 * i : 2 * i + 3, j : j + 3, :]
            want[0, i, j] = np.maximum((w * patch).sum(axis=(1, 2, 3)) + b, 0)
    _assert_equal(_run(data, x), want)
    assert read_tflite(data).main.operators[0].options["stride_h"] == 2


def test_int8_add_quantized(rng):
    # int8 ADD with distinct scales: exact integer results are checked against float math within 1 LSB
    sa, za, sb, zb, so, zo = 0.05, -3, 0.1, 7, 0.12, 2
    a = rng.integers(-128, 128, size=(1, 16)).astype(np.int8)
    bq = rng.integers(-128, 128, size=(1, 16)).astype(np.int8)
    data = build_model(
        [
            TensorDef("a", (1, 16), "int8", scale=sa, zero_point=za),
            TensorDef("b", (1, 16), "int8", data=bq, scale=sb, zero_point=zb),
            TensorDef("o", (1, 16), "int8", scale=so, zero_point=zo),
        ],
        [OpDef("ADD", [0, 1], [2], version=2)],
        inputs=[0],
        outputs=[2],
    )
    got = _run(data, a).astype(np.int32)
    real = sa * (a.astype(np.float64) - za) + sb * (bq.astype(np.float64) - zb)
    want = np.clip(np.round(real / so) + zo, -128, 127)
    assert np.abs(got - want).max() <= 1, np.abs(got - want).max()
    t = read_tflite(data).main.tensors[0]
    assert t.quantization.scales == pytest.approx((sa,)) and t.quantization.zero_points == (za,)


def test_per_channel_quantization_recorded():
    w = np.zeros((3, 1, 1, 2), np.int8)
    data = build_model(
        [
            TensorDef(
                "w", (3, 1, 1, 2), "int8", data=w, scale=[0.1, 0.2, 0.3], zero_point=[0, 0, 0], quantized_dimension=0
            ),
            TensorDef("o", (3, 1, 1, 2), "int8"),
        ],
        [OpDef("RELU", [0], [1])],
        inputs=[],
        outputs=[1],
    )
    q = read_tflite(data).main.tensors[0].quantization
    assert q.per_channel and q.scales == pytest.approx((0.1, 0.2, 0.3))


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(ops=[OpDef("ADD", [0, 7], [1])]), r"op 0 \(ADD\) inputs\[1\] is tensor 7, expected 0..1 or -1"),
        (dict(ops=[OpDef("NOT_AN_OP", [0], [1])]), r"unknown builtin op 'NOT_AN_OP'"),
        (dict(outputs=[2]), r"outputs\[0\] is tensor 2, expected 0..1"),
    ],
)
def test_bad_definitions(kwargs, pattern):
    args = dict(
        tensors=[TensorDef("a", (2,), "float32"), TensorDef("b", (2,), "float32")],
        ops=[OpDef("RELU", [0], [1])],
        inputs=[0],
        outputs=[1],
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=pattern):
        build_model(**args)


def test_bad_data_size():
    with pytest.raises(ValueError, match=r"data has 3 elements, shape \(2,\) needs 2"):
        build_model([TensorDef("a", (2,), "float32", data=np.zeros(3, np.float32))], [], inputs=[], outputs=[0])


def test_model_edits(model_path):
    src = model_path("face_detection_short_range").read_bytes()
    bumped = read_tflite(set_op_version(src, "CONV_2D", 8))
    assert {(o.name, o.version) for o in bumped.opcodes if o.name == "CONV_2D"} == {("CONV_2D", 8)}
    custom = read_tflite(insert_custom_op(src, "MyOp"))
    ops = custom.main.operators
    k = next(op.index for op in ops if op.opcode.is_custom)
    assert ops[k].opcode.custom_code == "MyOp" and ops[k].inputs == custom.main.inputs
    assert ops[k + 1].opcode.name == "CONV_2D" and ops[k + 1].inputs[0] == ops[k].outputs[0]
    assert len(ops) == len(read_tflite(src).main.operators) + 1
    dynamic = read_tflite(make_dim_dynamic(src))
    assert dynamic.main.tensors[dynamic.main.inputs[0]].shape_signature == (-1, 128, 128, 3)
