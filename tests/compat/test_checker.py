"""The checker's parts: targets, report API and views, partitioning, memory, MACs, rules."""

from __future__ import annotations

import json

import numpy as np
import pytest

import edgeinf
from edgeinf.compat import tables
from edgeinf.compat.features import node_features, static_tensors
from edgeinf.compat.graph import activation_memory, macs, partition
from edgeinf.errors import UnsupportedOperatorError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model, insert_custom_op


@pytest.mark.parametrize(
    "spec, want",
    [
        ("tflite-runtime==2.14", ("tflite_runtime", "2.14.0")),
        ("tflite_runtime 2.14.0", ("tflite_runtime", "2.14.0")),
        ("ai-edge-litert", ("ai_edge_litert", "2.3.0")),
        ("LiteRT 2.3", ("ai_edge_litert", "2.3.0")),
    ],
)
def test_target_names(spec, want):
    t = tables.resolve("tflite", spec)
    assert (t.package, t.version) == want


@pytest.mark.parametrize(
    "backend, spec, pattern",
    [
        ("tflite", "tensorflow 2.15", "unknown runtime 'tensorflow'"),
        ("tflite", "tflite-runtime==2.9", "no table for tflite_runtime 2.9; tables exist for: 2.14.0"),
        ("ncnn", "tflite-runtime", "is a TFLite runtime, not ncnn"),
        ("tensorrt", None, "unknown backend 'tensorrt'"),
        ("onnxruntime", "ncnn", "is not ONNX Runtime"),
        ("ncnn", "onnxruntime", "is ONNX Runtime, not a ncnn runtime"),
    ],
)
def test_target_errors(backend, spec, pattern):
    with pytest.raises(ValueError, match=pattern):
        tables.resolve(backend, spec)


def test_default_target_is_the_installed_runtime():
    installed = tables.installed_version("ai_edge_litert")
    if installed is None:
        pytest.skip("ai-edge-litert is not installed")
    t = tables.resolve("tflite")
    assert t.package == "ai_edge_litert"
    if installed in tables.versions("tflite", "ai_edge_litert"):
        assert t.version == installed and t.note is None
    else:  # e.g. another build on a board: the nearest table, and the report says so
        assert f"ai_edge_litert {installed} is installed but edgeinf has no table for it" in t.note


def test_report_api_and_views(model_path):
    report = edgeinf.check(model_path("face_detection_short_range"))
    assert report.verdict("tflite") == "YES" and report.runnable("tflite") is True
    with pytest.raises(KeyError, match=r"no backend 'ncnn'; it checked \['tflite'\]"):
        report.verdict("ncnn")
    doc = json.loads(report.to_json())
    assert doc["model"]["nodes"] == 164 == len(doc["nodes"])
    assert sum(op["count"] for op in doc["ops"]) == 164
    assert doc["backends"]["tflite"]["partitions"] == [list(range(164))]
    assert doc["backends"]["tflite"]["counts"] == {"delegated": 164, "cpu": 0, "unsupported": 0, "unknown": 0}
    text = report.to_text()
    assert "tflite   YES      on ai_edge_litert 2.3.0" in text and "findings:" not in text


def test_weights_activation_and_macs_of_a_real_model(model_path):
    path = model_path("face_detection_short_range")
    m = read_tflite(path)
    report = edgeinf.check(path)
    assert report.weight_bytes == sum(m.buffer_sizes)
    first_conv = next(op for op in m.main.operators if op.opcode.name == "CONV_2D")
    out = m.main.tensors[first_conv.outputs[0]]
    w = m.main.tensors[first_conv.inputs[1]].shape
    assert report.macs > out.num_elements * w[1] * w[2] * w[3]  # the sum covers this conv and the rest
    assert report.activation_peak_bytes < report.activation_bytes


def _conv_model(stride=1):
    s = schema()
    opts = s.Conv2DOptionsT()
    opts.padding, opts.strideW, opts.strideH = s.Padding.VALID, stride, stride
    w = np.zeros((5, 3, 3, 2), np.float32)
    out = (8 - 3) // stride + 1
    return build_model(
        [
            TensorDef("x", (1, 8, 8, 2), "float32"),
            TensorDef("w", w.shape, "float32", data=w),
            TensorDef("b", (5,), "float32", data=np.zeros(5, np.float32)),
            TensorDef("y", (1, out, out, 5), "float32"),
            TensorDef("z", (1, out, out, 5), "float32"),
        ],
        [OpDef("CONV_2D", [0, 1, 2], [3], options=opts), OpDef("RELU", [3], [4])],
        [0],
        [4],
    )


def test_macs_and_memory_by_hand():
    m = read_tflite(_conv_model())
    assert macs(m.main) == (6 * 6 * 5) * (3 * 3 * 2)
    total, peak = activation_memory(m.main)
    x, y, z = 8 * 8 * 2 * 4, 6 * 6 * 5 * 4, 6 * 6 * 5 * 4
    assert total == x + y + z
    assert peak == max(x + y, y + z)


def test_partition_follows_tflite_greedy_rule():
    # 0:A(d) -> 1:B(cpu) ; 2:C(d) reads only the input; 3:D(d) reads 1.
    # TFLite's greedy partitioner puts 0 and 2 together first, then B, then D: 3 subsets, not 4.
    inputs = [[0], [1], [0], [2]]
    outputs = [[1], [2], [3], [4]]
    subsets = partition(inputs, outputs, [True, False, True, True])
    assert subsets == [(True, [0, 2]), (False, [1]), (True, [3])]


def test_quasi_static_weights_count_as_constant(model_path):
    m = read_tflite(model_path("face_detection_short_range"))
    sg = m.main
    static = static_tensors(sg)
    conv = next(op for op in sg.operators if op.opcode.name == "CONV_2D")
    assert not sg.tensors[conv.inputs[1]].is_constant  # fp16 weights reach the conv through DEQUANTIZE
    assert node_features(m, sg, conv, static)["static"] == "RCC"


def test_kernel_failure_from_probes_is_a_finding(tmp_path):
    # NEG on int8 is rejected at invoke by tflite-runtime 2.14 ("Neg only currently supports
    # int64, int32, and float32"); LiteRT 2.3 runs it
    tensors = [TensorDef(n, (1, 2, 2, 8), "int8", scale=0.1, zero_point=0) for n in ("x", "y")]
    path = tmp_path / "neg.tflite"
    path.write_bytes(build_model(tensors, [OpDef("NEG", [0], [1])], [0], [1]))
    report = edgeinf.check(path, target="tflite-runtime==2.14.0")
    assert report.verdict("tflite") == "NO"
    assert "fails at invoke" in report.problems("tflite")[0][1].reason
    assert edgeinf.check(path, target="ai-edge-litert==2.3.0").runnable("tflite")


def test_a_convolution_without_bias_is_refused_by_the_reader(tmp_path):
    # CONV_2D without a bias fails to prepare in both runtimes (conv.cc: TF_LITE_ENSURE(has_bias))
    s = schema()
    opts = s.Conv2DOptionsT()
    opts.padding, opts.strideW, opts.strideH = s.Padding.SAME, 1, 1
    data = build_model(
        [
            TensorDef("x", (1, 8, 8, 4), "float32"),
            TensorDef("w", (6, 3, 3, 4), "float32", data=np.zeros((6, 3, 3, 4), np.float32)),
            TensorDef("y", (1, 8, 8, 6), "float32"),
        ],
        [OpDef("CONV_2D", [0, 1], [2], options=opts)],
        [0],
        [2],
    )
    path = tmp_path / "nobias.tflite"
    path.write_bytes(data)
    with pytest.raises(edgeinf.ModelFileError, match=r"nobias\.tflite: subgraph 0 operator 0 \(CONV_2D\): 2 inputs"):
        edgeinf.check(path)


def test_xnnpack_attribute_rule_softmax_beta(tmp_path):
    s = schema()
    for beta, want in ((1.0, "delegated"), (0.0, "cpu")):
        opts = s.SoftmaxOptionsT()
        opts.beta = beta
        path = tmp_path / f"softmax_{beta}.tflite"
        path.write_bytes(
            build_model(
                [TensorDef("x", (1, 10), "float32"), TensorDef("y", (1, 10), "float32")],
                [OpDef("SOFTMAX", [0], [1], options=opts)],
                [0],
                [1],
            )
        )
        report = edgeinf.check(path)
        st = report.nodes[0].status["tflite"]
        assert st.status == want, st
        assert report.verdict("tflite") == ("YES" if want == "delegated" else "PARTIAL")
    assert "beta" in st.reason and "beta = 1.0" in st.suggestion


def test_int8_ops_stay_on_cpu_in_the_older_runtime(tmp_path):
    data = build_model(
        [
            TensorDef("a", (1, 16), "int8", scale=0.1, zero_point=0),
            TensorDef("b", (1, 16), "int8", scale=0.1, zero_point=0),
            TensorDef("o", (1, 16), "int8", scale=0.2, zero_point=0),
        ],
        [OpDef("ADD", [0, 1], [2])],
        [0, 1],
        [2],
    )
    path = tmp_path / "qadd.tflite"
    path.write_bytes(data)
    new, old = edgeinf.check(path, target="ai-edge-litert"), edgeinf.check(path, target="tflite-runtime==2.14")
    assert new.nodes[0].status["tflite"].status == "delegated"
    assert old.nodes[0].status["tflite"].status == "cpu" and "dtype='INT8'" in old.nodes[0].status["tflite"].reason


def test_ncnn_vulkan_fallback_rules(tmp_path):
    param = tmp_path / "dyn.param"
    # a Convolution with dynamic_weight=1 (19=1) loads no weights and leaves Vulkan (convolution_vulkan.cpp)
    param.write_text(
        "7767517\n3 3\nInput in 0 1 data\nInput w 0 1 weight\nConvolution c 2 1 data weight out 0=4 1=3 6=108 19=1\n"
    )
    report = edgeinf.check(param)
    assert report.verdict("ncnn") == "YES"
    conv = report.nodes[2]
    assert conv.status["ncnn-vulkan"].status == "cpu" and "dynamic_weight" in conv.status["ncnn-vulkan"].reason
    assert report.verdict("ncnn-vulkan") == "PARTIAL"


def test_onnx_custom_domain_blocks_both_paths(tmp_path):
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("MyOp", ["a"], ["y"], domain="my.domain")]
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", 1, [1, 3, 8, 8])], [h.make_tensor_value_info("y", 1, [1, 3, 8, 8])]
    )
    path = tmp_path / "custom.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("my.domain", 1)]), str(path))
    report = edgeinf.check(path)
    assert report.verdict("ncnn") == "NO" and report.verdict("tflite") == "NO"
    assert report.custom_ops == ("onnx:my.domain:MyOp",)
    assert report.nodes[0].status["ncnn"].status == "cpu"


def test_load_refuses_what_cannot_run(model_path, tmp_path):
    pytest.importorskip("ai_edge_litert")
    path = tmp_path / "custom.tflite"
    path.write_bytes(insert_custom_op(model_path("face_detection_short_range").read_bytes(), "MyFancyOp"))
    with pytest.raises(UnsupportedOperatorError) as err:
        edgeinf.load(path, backend="tflite")
    assert err.value.report.verdict("tflite") == "NO"
    assert "custom op MyFancyOp is not registered" in str(err.value)
