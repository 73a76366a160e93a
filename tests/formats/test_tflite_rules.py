"""The .tflite reader refuses graphs that break data-flow rules and nodes their kernel cannot take."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_mutants import MUTANTS, mutate

import edgeinf
from edgeinf.errors import ModelFileError
from edgeinf.formats._flatbuf import load_layout
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_ops import OPERATORS
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model


@pytest.fixture(scope="module")
def face_bytes(model_path):
    return model_path("face_detection_short_range").read_bytes()


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_of_a_real_model_is_refused(face_bytes, tmp_path, name):
    data = mutate(face_bytes, name)
    pattern = MUTANTS[name][1]
    with pytest.raises(ModelFileError, match=r"^face\.tflite: subgraph 0:? .*" + pattern):
        read_tflite(data, name="face.tflite")
    path = tmp_path / "face.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=pattern):
        edgeinf.check(path)


def test_the_real_models_pass(model_path):
    for name in (
        "face_detection_short_range",
        "face_detection_full_range",
        "face_detection_full_range_sparse",
        "face_landmark",
    ):
        read_tflite(model_path(name))


def test_errors_name_the_file_the_bytes_came_from(face_bytes, tmp_path):
    data = mutate(face_bytes, "ops_out_of_order")
    with pytest.raises(ModelFileError, match=r"^face_detection\.tflite: "):
        read_tflite(data, name=tmp_path / "face_detection.tflite")
    with pytest.raises(ModelFileError, match=r"^model bytes: "):
        read_tflite(data)


def test_every_options_table_named_is_in_the_schema():
    members = set(load_layout("tflite_layout")["unions"]["BuiltinOptions"].values())
    assert {spec.options for spec in OPERATORS.values() if spec.options} <= members
    ops = set(load_layout("tflite_layout")["enums"]["BuiltinOperator"])
    assert set(OPERATORS) <= ops


def _one_op(op: OpDef, tensors: list[TensorDef], inputs, outputs) -> bytes:
    return build_model(tensors, [op], inputs=inputs, outputs=outputs)


def _split_model(num_splits: int, outputs: int, axis: int) -> bytes:
    opts = schema().SplitOptionsT()
    opts.numSplits = num_splits
    tensors = [TensorDef("axis", (), "int32", data=np.array(axis, np.int32)), TensorDef("x", (1, 4, 4, 2), "float32")]
    tensors += [TensorDef(f"y{i}", (1, 4, 4, 2 // max(outputs, 1)), "float32") for i in range(outputs)]
    outs = list(range(2, 2 + outputs))
    return _one_op(OpDef("SPLIT", [0, 1], outs, options=opts), tensors, [1], outs)


@pytest.mark.parametrize(
    "num_splits, outputs, axis, pattern",
    [
        (2, 2, 3, None),
        (0, 1, 3, r"num_splits is 0, must be >= 1"),
        (3, 2, 3, r"num_splits is 3 but the node has 2 outputs"),
        (2, 2, 4, r"the axis \(input 0\) is 4, out of range for input 1 of rank 4"),
        (2, 2, -5, r"the axis \(input 0\) is -5"),
    ],
)
def test_split_options_are_checked_against_the_node(num_splits, outputs, axis, pattern):
    data = _split_model(num_splits, outputs, axis)
    if pattern is None:
        assert read_tflite(data).main.operators[0].opcode.name == "SPLIT"
    else:
        with pytest.raises(ModelFileError, match=r"operator 0 \(SPLIT\): " + pattern):
            read_tflite(data)


def test_strided_slice_with_a_zero_stride_is_refused():
    tensors = [TensorDef("x", (1, 8), "float32")]
    for name in ("begin", "end"):
        tensors.append(TensorDef(name, (2,), "int32", data=np.array([0, 0] if name == "begin" else [1, 8], np.int32)))
    tensors.append(TensorDef("strides", (2,), "int32", data=np.array([1, 0], np.int32)))
    tensors.append(TensorDef("y", (1, 8), "float32"))
    data = _one_op(OpDef("STRIDED_SLICE", [0, 1, 2, 3], [4]), tensors, [0], [4])
    with pytest.raises(ModelFileError, match=r"the strides \(input 3\) \[1, 0\] has a zero"):
        read_tflite(data)


def test_a_cycle_is_refused():
    tensors = [TensorDef("x", (1, 4), "float32"), TensorDef("a", (1, 4), "float32"), TensorDef("b", (1, 4), "float32")]
    ops = [OpDef("ADD", [0, 2], [1]), OpDef("RELU", [1], [2])]
    with pytest.raises(
        ModelFileError, match=r"operator 0 \(ADD\) reads tensor 2 'b' before operator 1 \(RELU\) writes it"
    ):
        read_tflite(build_model(tensors, ops, inputs=[0], outputs=[2]))


def test_a_tensor_nothing_writes_is_refused():
    tensors = [
        TensorDef("x", (1, 4), "float32"),
        TensorDef("ghost", (1, 4), "float32"),
        TensorDef("y", (1, 4), "float32"),
    ]
    with pytest.raises(ModelFileError, match=r"reads tensor 1 'ghost', which is no graph input, constant or variable"):
        read_tflite(build_model(tensors, [OpDef("ADD", [0, 1], [2])], inputs=[0], outputs=[2]))


def test_absurd_activation_sizes_are_refused():
    tensors = [TensorDef("x", (1, 4), "float32"), TensorDef("huge", (100_000, 100_000, 100_000), "float32")]
    with pytest.raises(
        ModelFileError, match=r"tensor 1 'huge' FLOAT32\[100000, 100000, 100000\] needs 4000000000000000 bytes"
    ):
        read_tflite(build_model(tensors, [OpDef("RELU", [0], [1])], inputs=[0], outputs=[1]))
