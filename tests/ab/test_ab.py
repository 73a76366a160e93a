"""ABTest: the caller gets the primary's output; drift figures equal the ones computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from face_reference import iou_one_to_many
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

import edgeinf
from edgeinf import metrics
from edgeinf.ab import ABTest, box_iou, compare_boxes, compare_tensors
from edgeinf.errors import RuntimeFailure
from edgeinf.face import FaceDetector
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

IN_SCALE, OUT_SCALE = 1 / 64, 1 / 32


@pytest.fixture(scope="module")
def face_path(model_path):
    return model_path("face_detection_short_range")


@pytest.fixture(scope="module")
def xnnpack(face_path):
    with edgeinf.load(face_path, num_threads=1, check=False) as model:
        yield model


@pytest.fixture(scope="module")
def builtin(face_path):
    with edgeinf.load(face_path, num_threads=1, check=False, xnnpack=False) as model:
        yield model


@pytest.fixture(scope="module")
def add_models(tmp_path_factory):
    """A float ADD and its int8 twin (same constant, quantized): a float model and its int8 variant."""
    folder = tmp_path_factory.mktemp("ab")
    bias = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    float_model = build_model(
        [
            TensorDef("x", (1, 16), "float32"),
            TensorDef("b", (1, 16), "float32", data=bias),
            TensorDef("y", (1, 16), "float32"),
        ],
        [OpDef("ADD", [0, 1], [2])],
        inputs=[0],
        outputs=[2],
    )
    int8_model = build_model(
        [
            TensorDef("x", (1, 16), "int8", scale=IN_SCALE, zero_point=0),
            TensorDef(
                "b", (1, 16), "int8", data=np.round(bias / IN_SCALE).astype(np.int8), scale=IN_SCALE, zero_point=0
            ),
            TensorDef("y", (1, 16), "int8", scale=OUT_SCALE, zero_point=0),
        ],
        [OpDef("ADD", [0, 1], [2])],
        inputs=[0],
        outputs=[2],
    )
    (folder / "add_f32.tflite").write_bytes(float_model)
    (folder / "add_int8.tflite").write_bytes(int8_model)
    f = edgeinf.load(folder / "add_f32.tflite", num_threads=1, check=False)
    q = edgeinf.load(folder / "add_int8.tflite", num_threads=1, check=False)
    yield f, q
    f.close()
    q.close()


def inputs(rng, n, shape=(1, 128, 128, 3)):
    return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(n)]


def test_xnnpack_against_builtin_kernels_drift_equals_computed(xnnpack, builtin, rng):
    xs = inputs(rng, 8)
    ab = ABTest(xnnpack, builtin, fraction=0.5, name="xnnpack-vs-builtin")
    outs = [ab.run(x) for x in xs]
    # The caller sees exactly the primary's outputs.
    for x, out in zip(xs, outs):
        expected = xnnpack.run(x)
        for name in expected:
            np.testing.assert_array_equal(out[name], expected[name], err_msg=name)
    # fraction 0.5, spread evenly: the 2nd, 4th, 6th and 8th calls were compared.
    compared = xs[1::2]
    errors, agree = [], []
    for x in compared:
        p, c = xnnpack.run(x), builtin.run(x)
        errors.append(max(float(np.max(np.abs(p[k].astype(np.float64) - c[k]))) for k in p))
        agree.append(np.mean([np.argmax(p[k]) == np.argmax(c[k]) for k in p]))
    report = ab.report()
    assert (report.calls, report.compared, report.candidate_errors) == (8, 4, 0)
    drift = report.drift["max_abs_error"]
    assert drift.count == 4
    assert drift.max == pytest.approx(max(errors), rel=1e-12)
    assert drift.mean == pytest.approx(np.mean(errors), rel=1e-12)
    assert drift.min == pytest.approx(min(errors), rel=1e-12)
    assert report.drift["top1_agreement"].mean == pytest.approx(np.mean(agree))
    assert 0 < drift.max < 1e-2, "two float paths of one model differ by rounding only"
    assert report.primary_latency.runs == 8 and report.candidate_latency.runs == 4
    assert report.latency_ratio > 0


def test_int8_candidate_gets_quantized_input_and_is_compared_dequantized(add_models, rng):
    f, q = add_models
    xs = inputs(rng, 5, (1, 16))
    ab = ABTest(f, q, fraction=1.0)
    for x in xs:
        out = ab.run(x)
        np.testing.assert_array_equal(out["y"], f.run(x)["y"])
    errors = []
    for x in xs:
        xq = np.clip(np.round(x / IN_SCALE), -128, 127).astype(np.int8)
        yq = q.run(xq)["y"]
        errors.append(float(np.max(np.abs(f.run(x)["y"].astype(np.float64) - yq.astype(np.float64) * OUT_SCALE))))
    drift = ab.report().drift["max_abs_error"]
    assert drift.max == pytest.approx(max(errors), rel=1e-6)
    assert drift.mean == pytest.approx(np.mean(errors), rel=1e-6)
    # Quantization error bound: half a step of each input plus half an output step.
    assert drift.max <= IN_SCALE + OUT_SCALE / 2 + 1e-6


def test_face_detectors_short_against_full_range_box_iou(model_path, face_path):
    rgb = np.asarray(Image.open(model_path("grace_hopper")).convert("RGB"))
    short = FaceDetector(edgeinf.load(face_path, num_threads=1, check=False))
    full = FaceDetector(edgeinf.load(model_path("face_detection_full_range"), num_threads=1, check=False))
    ab = ABTest(short, full, fraction=1.0, name="short-vs-full")
    faces = ab.detect(rgb)
    expected_short, expected_full = short.detect(rgb), full.detect(rgb)
    assert [f.box for f in faces] == [f.box for f in expected_short]
    assert len(expected_short) == 1 and len(expected_full) == 1  # one face in the portrait
    iou = float(iou_one_to_many(np.array(expected_short[0].box), np.array([expected_full[0].box]))[0])
    report = ab.report()
    assert report.drift["box_iou"].last == pytest.approx(iou, rel=1e-6)
    assert report.drift["matched"].last == (1.0 if iou >= 0.5 else 0.0)
    assert report.drift["count_delta"].last == 0.0
    assert report.drift["score_abs_error_max"].last == pytest.approx(
        abs(expected_short[0].score - expected_full[0].score)
    )
    short.model.close()
    full.model.close()


def test_candidate_errors_never_reach_the_caller(xnnpack, rng):
    class Broken:
        def run(self, x, **kwargs):
            raise RuntimeFailure("candidate runtime crashed")

    ab = ABTest(xnnpack, Broken(), fraction=1.0)
    x = inputs(rng, 1)[0]
    out = ab.run(x)
    np.testing.assert_array_equal(out["regressors"], xnnpack.run(x)["regressors"])
    report = ab.report()
    assert report.candidate_errors == 1 and report.compared == 0
    assert "candidate runtime crashed" in report.last_error


def test_fraction_spreads_calls_evenly_and_is_validated():
    seen = []
    ab = ABTest(lambda x: x, lambda x: seen.append(x) or x, fraction=0.25, comparer=lambda p, c: {"same": p == c})
    for i in range(12):
        assert ab(i) == i
    assert seen == [3, 7, 11]
    assert ab.report().drift["same"].mean == 1.0
    never = ABTest(lambda x: x, lambda x: pytest.fail("candidate ran"), fraction=0.0)
    for i in range(5):
        never(i)
    assert never.report().compared == 0
    for bad in (-0.1, 1.5, "half", math.nan):
        with pytest.raises(ValueError, match="fraction must be a number within"):
            ABTest(lambda x: x, lambda x: x, fraction=bad)


def test_background_mode_scores_off_the_callers_thread(xnnpack, builtin, rng):
    xs = inputs(rng, 3)
    with ABTest(xnnpack, builtin, fraction=1.0, background=True) as ab:
        for x in xs:
            ab.run(x)
            ab.wait()
        report = ab.report()
    assert report.calls == 3 and report.compared + report.skipped == 3 and report.compared >= 1
    assert report.drift["max_abs_error"].max < 1e-2


def test_comparers_on_hand_made_cases():
    assert box_iou((0, 0, 2, 2), (1, 1, 3, 3)) == pytest.approx(1 / 7)
    d = compare_boxes([(0, 0, 2, 2, 0.9), (10, 10, 12, 12, 0.8)], [(1, 1, 3, 3, 0.7)])
    assert d["box_iou"] == pytest.approx((1 / 7 + 0) / 2)
    assert d["matched"] == 0.0 and d["count_delta"] == -1.0
    assert d["score_abs_error_max"] == pytest.approx(0.2)
    assert compare_boxes([], [])["box_iou"] == 1.0
    t = compare_tensors({"a": np.array([[0.0, 1.0, 0.5]])}, {"a": np.array([[0.0, 0.25, 0.75]])})
    assert t["max_abs_error"] == pytest.approx(0.75) and t["top1_agreement"] == 0.0
    with pytest.raises(ValueError, match="primary shape"):
        compare_tensors({"a": np.zeros(3)}, {"a": np.zeros(4)})


def test_ab_figures_in_prometheus_output(add_models, rng):
    f, q = add_models
    ab = ABTest(f, q, fraction=1.0, name='int8 "v2"')
    ab.run(inputs(rng, 1, (1, 16))[0])
    families = {fam.name: fam for fam in text_string_to_metric_families(metrics.render())}
    mine = [s for s in families["edgeinf_ab_drift"].samples if s.labels["ab"] == 'int8 "v2"']
    by_key = {(s.labels["figure"], s.labels["stat"]): s.value for s in mine}
    assert by_key[("max_abs_error", "max")] == pytest.approx(ab.report().drift["max_abs_error"].max)
    calls = [s.value for s in families["edgeinf_ab_calls"].samples if s.labels["ab"] == 'int8 "v2"']
    assert calls == [1.0]
