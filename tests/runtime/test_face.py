"""The main job: BlazeFace finds the face in the real photo, where a person sees it."""

from __future__ import annotations

import numpy as np
import pytest
from face_reference import anchor_centres, iou_one_to_many, weighted_nms

from edgeinf.face import FULL_RANGE, SHORT_RANGE, FaceDetector

PIL = pytest.importorskip("PIL.Image")

# Hand-checked on the photo (512x600): hairline under the cap to the chin, ear to ear.
FACE_BOX = np.array([170.0, 150.0, 360.0, 340.0])
EYES = np.array([[222.0, 188.0], [310.0, 188.0]])  # the subject's right eye is on the image's left


@pytest.fixture(scope="module")
def photo(model_path):
    return np.asarray(PIL.open(model_path("grace_hopper")).convert("RGB"))


def test_anchor_counts_match_the_models():
    assert SHORT_RANGE.num_anchors() == len(anchor_centres(SHORT_RANGE)) == 896
    assert FULL_RANGE.num_anchors() == len(anchor_centres(FULL_RANGE)) == 2304
    a = anchor_centres(SHORT_RANGE)
    np.testing.assert_allclose(a[0], [0.5 / 16, 0.5 / 16])  # first cell of the 16x16 grid
    np.testing.assert_allclose(a[512], [0.5 / 8, 0.5 / 8])  # first cell of the 8x8 grid


# The full-range model draws taller boxes (forehead included) and is less sure of a close-up.
@pytest.mark.parametrize(
    "variant, min_score, min_iou",
    [("face_detection_short_range", 0.9, 0.75), ("face_detection_full_range", 0.7, 0.65)],
)
def test_the_face_is_found_where_it_is(photo, variant, min_score, min_iou):
    faces = FaceDetector(variant, num_threads=1).detect(photo)
    assert len(faces) == 1, [f.box for f in faces]
    face = faces[0]
    assert face.score > min_score
    iou = iou_one_to_many(np.array(face.box), FACE_BOX[None])[0]
    assert iou > min_iou, f"box {face.box} vs hand-checked {FACE_BOX.tolist()}: IoU {iou:.2f}"
    assert np.abs(face.keypoints[:2] - EYES).max() < 15, face.keypoints[:2]


def test_no_face_in_a_flat_image():
    faces = FaceDetector(num_threads=1).detect(np.full((240, 320, 3), 127, np.uint8))
    assert faces == []


def test_weighted_nms_blends_overlaps_and_keeps_separate_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], np.float32)
    kps = np.zeros((3, 6, 2), np.float32)
    scores = np.array([0.9, 0.6, 0.7], np.float32)
    out = weighted_nms(boxes, kps, scores, 0.3)
    assert [round(s, 2) for _, _, s in out] == [0.9, 0.7]
    np.testing.assert_allclose(out[0][0], (boxes[0] * 0.9 + boxes[1] * 0.6) / 1.5, rtol=1e-6)
    np.testing.assert_allclose(out[1][0], boxes[2])


def test_detector_rejects_non_rgb_images():
    detector = FaceDetector(num_threads=1)
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        detector.detect(np.zeros((10, 10), np.uint8))
