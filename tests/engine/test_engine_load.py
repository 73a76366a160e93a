"""``edgeinf.load(..., backend="edgeinf")``: the Model API on the engine, the fallback to
LiteRT, and hostile quantization parameters refused by the plan (never a crash)."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, engine, f32, first_mismatch, random_q, reference_outputs

import edgeinf
from edgeinf.errors import ModelFileError, RuntimeFailure, UnsupportedOperatorError
from edgeinf.formats.tflite_writer import TensorDef


def conv_relu_model(rng) -> tuple[bytes, Graph]:
    g = Graph(rng)
    x = g.tensor((1, 12, 12, 3), q=(f32(0.02), -3))
    a = g.conv(x, 8, 3, stride=2, out_q=(f32(0.05), -10), activation="relu6")
    y = g.conv(a, 4, 1, out_q=(f32(0.1), 5))
    return g.build([x], [y]), g


@pytest.fixture
def model_file(tmp_path, rng):
    data, _ = conv_relu_model(rng)
    path = tmp_path / "conv.tflite"
    path.write_bytes(data)
    return path, data


def test_load_runs_on_the_engine(model_file, rng):
    path, data = model_file
    with edgeinf.load(path, backend="edgeinf", num_threads=1) as model:
        assert model.backend == "edgeinf"
        assert model.runtime == f"edgeinf {edgeinf.__version__}"
        details = model.details
        assert "fallback" not in details
        assert details["isa"] in edgeinf.kernels.supported_isas()
        assert details["plan"]["ops"] == {"CONV_2D": 2}
        x = rng.integers(-128, 128, (1, 12, 12, 3), dtype=np.int8)
        got = model.run(x)
        (want,) = reference_outputs(data, [x])
        assert not first_mismatch(next(iter(got.values())), want)
        assert model.inputs[0].quantization.scale == f32(0.02)


def test_input_buffer_is_the_arena_and_outputs_are_owned(model_file, rng):
    path, data = model_file
    with edgeinf.load(path, backend="edgeinf", num_threads=1) as model:
        x = rng.integers(-128, 128, (1, 12, 12, 3), dtype=np.int8)
        with model.exclusive():
            model.input_buffer()[...] = x
            first = next(iter(model.invoke().values()))
        assert np.shares_memory(model.input_buffer(), model.input_buffer())  # the same arena view each time
        (want,) = reference_outputs(data, [x])
        assert not first_mismatch(first, want)
        model.run(np.zeros_like(x))
        assert not first_mismatch(first, want)  # a later run does not overwrite what was returned


def test_run_validates_inputs_as_on_litert(model_file):
    path, _ = model_file
    with edgeinf.load(path, backend="edgeinf", num_threads=1) as model:
        with pytest.raises(edgeinf.InputError):
            model.run(np.zeros((1, 12, 12, 3), np.float32))
        with pytest.raises(edgeinf.InputError):
            model.run(np.zeros((1, 12, 12, 4), np.int8))


def test_resize_is_refused(model_file):
    path, _ = model_file
    with edgeinf.load(path, backend="edgeinf", num_threads=1) as model, pytest.raises(RuntimeFailure):
        model._backend.resize_input(0, (2, 12, 12, 3))


def test_an_unsupported_op_runs_on_litert_the_rest_on_the_engine(tmp_path, rng):
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2))
    y = g.unary("LOG_SOFTMAX", a, out_q=(16.0 / 256, 127))
    data = g.build([x], [y])
    path = tmp_path / "log_softmax.tflite"
    path.write_bytes(data)
    with pytest.raises(UnsupportedOperatorError, match="LOG_SOFTMAX"):
        engine(data)
    with edgeinf.load(path, backend="edgeinf", num_threads=1, reference=True) as model:
        assert model.backend == "edgeinf"
        assert "LOG_SOFTMAX" in model.details["fallback_nodes"][1]
        assert [s["runtime"] for s in model.details["segments"]] == ["edgeinf", "tflite"]
        x_in = rng.integers(-128, 128, (1, 6, 6, 4), dtype=np.int8)
        (want,) = reference_outputs(data, [x_in])
        assert not first_mismatch(next(iter(model.run(x_in).values())), want)


def test_a_model_with_no_native_part_worth_a_segment_falls_back_whole(tmp_path, rng):
    """LOG_SOFTMAX then a RESHAPE the engine could run: a segment of data movement alone
    is not worth leaving LiteRT, so LiteRT runs the whole model, with the reasons."""
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=random_q(rng))
    a = g.unary("LOG_SOFTMAX", x, out_q=(16.0 / 256, 127))
    y = g.reshape(a, (1, 144))
    path = tmp_path / "log_softmax_reshape.tflite"
    path.write_bytes(g.build([x], [y]))
    with edgeinf.load(path, backend="edgeinf", num_threads=1) as model:
        assert model.backend == "tflite"
        assert "LOG_SOFTMAX" in model.details["fallback"]
        assert "worth a segment" in model.details["not_split"]


def test_int16_activations_fall_back(rng):
    g = Graph(rng)
    x = g.tensor((1, 4, 4, 2), "int16", q=(f32(0.001), 0))
    y = g.unary("RELU", x, out_q=(f32(0.001), 0), dtype="int16")
    with pytest.raises(UnsupportedOperatorError, match="INT16"):
        engine(g.build([x], [y]))


@pytest.mark.parametrize(
    "tensor, field, value, message",
    [
        (1, "zero_point", [3] + [0] * 7, "filter zero points must be 0"),
        (1, "quantized_dimension", 3, "must run along axis 0"),
        (0, "zero_point", 200, "outside INT8's range"),
        (0, "scale", 0.0, "positive and finite"),
        (0, "scale", float("nan"), "positive and finite"),
        (3, "scale", -0.5, "positive and finite"),
        (1, "scale", [0.01] * 3, "scales"),
        (0, "quantized_dimension", 4, "quantized_dimension 4 is outside"),  # one scale: LiteRT refuses it too
    ],
)
def test_hostile_quantization_is_a_model_file_error(rng, tensor, field, value, message):
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 8), q=(f32(0.02), 0))  # 8 in, 8 out: a wrong channel axis still fits the shape
    g.conv(x, 8, 3, out_q=(f32(0.05), 0))
    td: TensorDef = g.tensors[tensor]
    if field == "scale" and isinstance(value, list):
        td.zero_point = [0] * len(value)
    setattr(td, field, value)
    try:
        data = g.build([x], [len(g.tensors) - 1])
    except ValueError:
        pytest.skip("the writer refuses this edit")
    with pytest.raises(ModelFileError, match=message):
        engine(data)


def test_bias_of_the_wrong_size_is_a_model_file_error(rng):
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=(f32(0.02), 0))
    y = g.conv(x, 8, 3, out_q=(f32(0.05), 0))
    bias = g.tensors[2]
    bias.shape, bias.data = (9,), np.zeros(9, np.int32)
    bias.scale, bias.zero_point = bias.scale + [bias.scale[0]], [0] * 9
    with pytest.raises(ModelFileError, match="expected 8 bias values"):
        engine(g.build([x], [y]))


def test_bias_scale_not_input_times_filter_is_a_model_file_error(rng):
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=(f32(0.02), 0))
    y = g.conv(x, 8, 3, out_q=(f32(0.05), 0), per_channel=False)
    g.tensors[2].scale = [1.0]
    with pytest.raises(ModelFileError, match="bias scale"):
        engine(g.build([x], [y]))


def test_hostile_model_through_load_raises_not_falls_back(tmp_path, rng):
    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=(f32(0.02), 0))
    y = g.conv(x, 8, 3, out_q=(f32(0.05), 0))
    g.tensors[1].zero_point = [5] * 8
    path = tmp_path / "bad.tflite"
    path.write_bytes(g.build([x], [y]))
    with pytest.raises(ModelFileError, match="filter zero points"):
        edgeinf.load(path, backend="edgeinf", num_threads=1, check=False)


def test_node_support_names_each_node_that_is_not_native(rng):
    from edgeinf.engine import node_support
    from edgeinf.formats.tflite import read_tflite

    g = Graph(rng)
    x = g.tensor((1, 6, 6, 4), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2))
    b = g.unary("LOG_SOFTMAX", a, out_q=(16.0 / 256, 127))
    c = g.conv(b, 4, 1, out_q=random_q(rng, 0.05, 0.2))
    filt = g.tensors[c - 2]  # the second conv's filter: a zero point TFLite refuses
    filt.zero_point = [1] * len(filt.scale)
    support = node_support(read_tflite(g.build([x], [c])))
    assert [(n.op, n.native) for n in support] == [("CONV_2D", True), ("LOG_SOFTMAX", False), ("CONV_2D", False)]
    assert "LOG_SOFTMAX" in support[1].reason
    assert "filter zero points must be 0" in support[2].reason


def test_node_support_of_a_float_model(model_path):
    from edgeinf.engine import node_support
    from edgeinf.formats.tflite import read_tflite

    support = node_support(read_tflite(model_path("face_detection_short_range")))
    assert support and not any(n.native for n in support if n.op in ("DEQUANTIZE", "CONV_2D"))
