"""The detector task metric of `edgeinf convert`: detections of the original and of the
conversion matched by IoU, on the real PP-OCR text detector and the real portrait."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from edgeinf import zoo
from edgeinf.convert import convert, detections, samples

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def score_maps():
    """The real detector's score maps on the verification crops of the real photo."""
    session = ort.InferenceSession(str(zoo.path("ppocr_det_small")), providers=["CPUExecutionProvider"])
    made = samples.make({"x": (1, 3, 320, 320)}, {"x": np.float32}, [])
    return [session.run(None, s.arrays)[0][0, 0] for s in made]


def test_the_same_map_agrees_fully(score_maps):
    agreement = detections.DetectionAgreement()
    for m in score_maps:
        found = detections.from_score_map(m)
        agreement.add(found, found)
    assert agreement.reference >= 3 and agreement.matched == agreement.reference
    assert agreement.as_dict()["recall"] == 1.0 and agreement.mean_iou == 1.0 and agreement.max_score_delta == 0.0


def test_a_lost_region_lowers_recall_and_a_new_one_precision(score_maps):
    m = max(score_maps, key=lambda m: len(detections.from_score_map(m)[0]))
    boxes, _ = detections.from_score_map(m)
    x0, y0, x1, y1 = boxes[0].astype(int)
    lost = m.copy()
    lost[y0:y1, x0:x1] = 0.0  # the conversion misses one region
    agreement = detections.DetectionAgreement()
    agreement.add(detections.from_score_map(m), detections.from_score_map(lost))
    assert agreement.matched == len(boxes) - 1 and agreement.recall < 1.0 and agreement.precision == 1.0
    extra = detections.DetectionAgreement()
    extra.add(detections.from_score_map(lost), detections.from_score_map(m))
    assert extra.recall == 1.0 and extra.precision < 1.0


def test_shifted_boxes_and_lower_scores_are_measured(score_maps):
    m = score_maps[0]
    shifted = np.roll(m, 3, axis=1) * 0.9  # boxes moved 3 pixels right, scores 10 % lower
    agreement = detections.DetectionAgreement()
    agreement.add(detections.from_score_map(m), detections.from_score_map(shifted))
    assert agreement.matched >= 1 and 0.5 <= agreement.mean_iou < 1.0
    assert agreement.max_score_delta > 0.02


def test_iou_of_boxes():
    from edgeinf.postprocess import iou_one_to_many

    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [3, 3, 3, 3]], np.float32)
    assert iou_one_to_many(boxes[0], boxes).tolist() == pytest.approx([1.0, 50 / 150, 0.0, 0.0])
    assert iou_one_to_many(boxes[3], boxes[3:]).tolist() == [0.0]  # an empty box overlaps nothing


@pytest.mark.skipif(importlib.util.find_spec("pnnx") is None, reason="pip install --no-deps pnnx")
def test_ncnn_conversion_of_the_real_detector_reports_its_detections(tmp_path):
    report = convert("ppocr_det_small", "ncnn", tmp_path, input_shapes=["1,3,320,320"])
    assert report.passed, report.failures
    (output,) = report.outputs
    found = output.detections
    assert found is not None and found.reference >= 3
    assert found.recall == 1.0 and found.precision == 1.0 and found.max_score_delta < 1e-3
    assert report.to_dict()["verification"]["outputs"][0]["detections"]["matched"] == found.matched
    assert "detections: " in report.to_text()
