"""The prediction against the runtime at load, and the int8 slow-down warning.

A small int8 graph, conv -> PRELU -> conv, is the case throughout: LiteRT 2.3.0's XNNPACK
takes int8 convolutions but not int8 PRELU, so it makes two delegate kernels around a
CPU node.
"""

from __future__ import annotations

import copy
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import edgeinf
from edgeinf.compat import tables, tflite_check
from edgeinf.compat.delegation import compare, delegate_partitions
from edgeinf.compat.features import node_features
from edgeinf.formats.tflite import read_tflite

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from engine_models import Graph  # noqa: E402

pytest.importorskip("ai_edge_litert.interpreter")


def conv_prelu_conv(slope_shape=(1, 1, 8)) -> bytes:
    rng = np.random.default_rng(3)
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 4), q=(0.05, 0))
    a = g.conv(x, 8, 3, out_q=(0.1, -3))
    alpha = g.tensor(slope_shape, q=(0.004, 0), data=rng.integers(1, 100, slope_shape, dtype=np.int8))
    b = g.tensor((1, 8, 8, 8), q=(0.1, -3))
    g.op("PRELU", [a, alpha], [b])
    y = g.conv(b, 8, 3, out_q=(0.2, 0))
    return g.build([x], [y])


@pytest.fixture
def int8_prelu_model(tmp_path) -> Path:
    path = tmp_path / "conv_prelu_conv_int8.tflite"
    path.write_bytes(conv_prelu_conv())
    return path


@pytest.fixture
def stale_table(monkeypatch):
    """An XNNPACK table that wrongly says XNNPACK takes int8 PRELU (what the checker
    believed before int8 PRELU was probed)."""
    real = tables.xnnpack

    def stale(target):
        table = copy.deepcopy(real(target))
        for record in table["ops"]["PRELU"]:
            if record["features"].get("dtype") == "INT8":
                record["delegated"] = True
        return table

    tflite_check._delegate_decision.cache_clear()
    monkeypatch.setattr(tables, "xnnpack", stale)
    yield
    tflite_check._delegate_decision.cache_clear()


def test_check_predicts_int8_prelu_on_the_cpu_between_two_partitions(int8_prelu_model):
    verdict = edgeinf.check(int8_prelu_model, backend="tflite").backends["tflite"]
    assert verdict.partitions == ((0,), (2,))
    assert verdict.transitions == 2


def test_load_logs_and_corrects_a_wrong_prediction(int8_prelu_model, stale_table, caplog):
    with caplog.at_level(logging.WARNING, logger="edgeinf.compat.delegation"):
        model = edgeinf.load(int8_prelu_model, backend="tflite", num_threads=1)
    with model:
        assert model.details["predicted_delegate_nodes"] == [[0, 1, 2]]  # the stale table's claim
        assert model.details["delegate_nodes"] == [[0], [2]]  # what LiteRT did
        assert model.details["cpu_nodes"] == [1]
        (record,) = caplog.records
        message = record.getMessage()
        assert "predicted 1 XNNPACK partition(s), the runtime made 2" in message
        assert "left on the CPU against the prediction: 1 PRELU" in message
        verdict = model.report.backends["tflite"]
        assert verdict.partitions == ((0,), (2,))
        assert verdict.transitions == 2
        assert verdict.verdict == "PARTIAL"
        assert verdict.counts["cpu"] == 1 and verdict.counts["delegated"] == 2
        prelu = model.report.nodes[1].status["tflite"]
        assert prelu.status == "cpu" and prelu.source.startswith("runtime:ai_edge_litert")


def test_no_xnnpack_means_nothing_to_compare(int8_prelu_model, stale_table, caplog):
    with (
        caplog.at_level(logging.WARNING, logger="edgeinf.compat.delegation"),
        edgeinf.load(int8_prelu_model, backend="tflite", num_threads=1, xnnpack=False) as model,
    ):
        assert "delegate_nodes" not in model.details
    assert not caplog.records


def test_check_warns_that_the_int8_model_is_slower_and_names_prelu(int8_prelu_model):
    report = edgeinf.check(int8_prelu_model, backend="tflite")
    (advice,) = report.backends["tflite"].advice
    assert "slower than its float original" in advice
    assert "1 node(s) (PRELU x1) stay on the CPU between 2 XNNPACK partitions" in advice
    assert "keep PRELU in float" in advice
    assert f"warning: {advice}" in report.to_text()
    assert report.to_dict()["backends"]["tflite"]["advice"] == [advice]


def test_float_models_get_no_int8_warning(model_path):
    report = edgeinf.check(model_path("face_landmark"), backend="tflite")
    assert report.backends["tflite"].advice == ()


@pytest.mark.parametrize(
    "slope_shape, form", [((1, 1, 8), "channel"), ((8,), "channel"), ((1,), "scalar"), ((1, 8, 8, 8), "full")]
)
def test_prelu_slope_features(slope_shape, form):
    model = read_tflite(conv_prelu_conv(slope_shape))
    features = node_features(model, model.main, model.main.operators[1])
    assert features["slope"] == form
    assert features["weights"] == "INT8"
    assert features["dtype"] == "INT8"


def test_a_type_no_probe_had_is_unknown_not_extrapolated():
    target = tables.resolve("tflite", "ai-edge-litert==2.3.0")
    xtable = tables.xnnpack(target)
    assert not any(r["features"].get("dtype") == "INT4" for r in xtable["ops"]["ADD"])
    status = tflite_check.xnnpack_status(xtable, target, "ADD", {"dtype": "INT4", "static": "RR", "rank": 4})
    assert status.status == "unknown"
    assert "dtype='INT4'" in status.reason


def test_partitions_are_recovered_from_the_op_list():
    ops = [
        {"index": 0, "op_name": "CONV_2D", "inputs": [0, 1, 2], "outputs": [3]},
        {"index": 1, "op_name": "PRELU", "inputs": [3, 4], "outputs": [5]},
        {"index": 2, "op_name": "CONV_2D", "inputs": [5, 6, 7], "outputs": [8]},
        {"index": 3, "op_name": "DELEGATE", "inputs": [0, 1, 2], "outputs": [3]},
        {"index": 4, "op_name": "DELEGATE", "inputs": [5, 6, 7], "outputs": [8]},
    ]
    assert delegate_partitions(ops) == ([[0], [2]], [1])
    assert compare([[0], [2]], [[2], [0]]) is None
    diff = compare([[0, 1, 2]], [[0], [2]])
    assert diff.predicted_not_taken == (1,) and diff.taken_not_predicted == ()
