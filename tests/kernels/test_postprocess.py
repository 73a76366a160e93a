"""Post-processing kernels: top-k, quantized-domain thresholds, SSD/BlazeFace decoding and
hard / weighted NMS, against straightforward numpy implementations, on the real face
model (MediaPipe short range on a real photo) and on synthetic outputs."""

from __future__ import annotations

import math

import face_reference
import numpy as np
import pytest

from edgeinf import face, postprocess
from edgeinf.errors import InputError


def _numpy_top_k(x, k):
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
    return order, np.take_along_axis(x, order, axis=-1)


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
@pytest.mark.parametrize("n", [1, 5, 16, 1000])
def test_top_k_matches_numpy_with_ties(dtype, n):
    rng = np.random.default_rng(n)
    if dtype == np.int8:
        x = rng.integers(-128, 128, (3, n), dtype=np.int8)
        x[:, ::4] = 127  # many ties at the maximum
    else:
        x = rng.integers(-5, 5, (3, n)).astype(np.float32)  # ties everywhere
    for k in sorted({1, min(3, n), n}):
        idx, val = postprocess.top_k(x, k)
        want_idx, want_val = _numpy_top_k(x, k)
        np.testing.assert_array_equal(idx, want_idx, err_msg=f"indices n={n} k={k}")
        np.testing.assert_array_equal(val, want_val, err_msg=f"values n={n} k={k}")


@pytest.mark.parametrize(("threshold", "scale", "zp"), [(0.5, 0.1, 3), (0.9, 0.05, -128), (0.01, 1.0, 127),
                                                         (0.999, 0.01, 0), (0.0, 0.2, 5), (1.0, 0.2, 5)])  # fmt: skip
def test_quantized_threshold_decides_like_the_float_score(threshold, scale, zp):
    q = np.arange(-128, 128)
    qt = postprocess.quantized_threshold(threshold, scale, zp)
    score = 1.0 / (1.0 + np.exp(-np.float32(scale) * (q - zp).astype(np.float32).astype(np.float64)))
    np.testing.assert_array_equal(q >= qt, score >= threshold)


def test_anchors_match_mediapipe_layouts():
    short = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
    full = postprocess.ssd_anchors(postprocess.FACE_FULL_RANGE_ANCHORS)
    assert short.shape == (896, 4) and full.shape == (2304, 4)
    # 512 anchors (2 per cell) on the 16x16 grid of stride 8, then 6 per cell on 8x8
    np.testing.assert_allclose(short[:2, :2], [[0.5 / 16, 0.5 / 16]] * 2)
    np.testing.assert_allclose(short[512:518, :2], [[0.5 / 8, 0.5 / 8]] * 6)
    np.testing.assert_allclose(short[-1, :2], [7.5 / 8, 7.5 / 8])
    assert np.all(short[:, 2:] == 1.0)  # fixed anchor size
    np.testing.assert_array_equal(short[:, :2], face_reference.anchor_centres(face.SHORT_RANGE))
    np.testing.assert_array_equal(full[:, :2], face_reference.anchor_centres(face.FULL_RANGE))


@pytest.fixture(scope="module")
def face_outputs(model_path):
    """Raw outputs of the real short-range face model on the real photo."""
    pytest.importorskip("PIL")
    from PIL import Image

    from edgeinf.model import load

    image = np.asarray(Image.open(model_path("grace_hopper")).convert("RGB"))
    tensor, _ = face_reference.letterbox_rgb(image, 128)
    with load(model_path("face_detection_short_range")) as model:
        outputs = model.run(tensor[np.newaxis].astype(np.float32))
    by_width = {v.shape[-1]: v for v in outputs.values()}
    return by_width[16], by_width[1]


def _numpy_pipeline(regressors, logits):
    """The straightforward float numpy implementation (tests/face_reference.py)."""
    anchors = face_reference.anchor_centres(face.SHORT_RANGE)
    boxes, keypoints, scores = face_reference.decode(regressors, logits, anchors, face.SHORT_RANGE)
    return face_reference.weighted_nms(boxes, keypoints, scores, face.SHORT_RANGE.iou_threshold)


def test_face_model_float_outputs_give_the_numpy_detections(face_outputs):
    regressors, logits = face_outputs
    got = postprocess.BlazeFaceDecoder()(regressors, logits)
    want = _numpy_pipeline(regressors, logits)
    assert len(got) == len(want) == 1  # the one face of the photo
    for i, (box, kps, score) in enumerate(want):
        np.testing.assert_allclose(got.boxes[i], box, atol=1e-6)
        np.testing.assert_allclose(got.keypoints[i], kps, atol=1e-6)
        assert got.scores[i] == pytest.approx(score, abs=1e-6)
    assert 0.9 < got.scores[0] <= 1.0
    x0, y0, x1, y1 = got.boxes[0]
    assert 0.2 < x0 < x1 < 0.8 and 0.1 < y0 < y1 < 0.7  # a face-sized box inside the image


def _quantize(x, scale, zp):
    return np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)


def test_face_model_int8_outputs_match_float_within_quantization_tolerance(face_outputs):
    regressors, logits = face_outputs
    # What an int8 model would emit: symmetric regressors, asymmetric logits.
    box_scale = float(np.float32(np.abs(regressors).max() / 127))
    lo, hi = float(logits.min()), float(logits.max())
    score_scale = float(np.float32((hi - lo) / 255))
    score_zp = int(np.clip(round(-128 - lo / score_scale), -128, 127))
    qr, ql = _quantize(regressors, box_scale, 0), _quantize(logits, score_scale, score_zp)
    got = postprocess.BlazeFaceDecoder()(
        qr, ql, box_quantization=(box_scale, 0), score_quantization=(score_scale, score_zp)
    )
    want = _numpy_pipeline(regressors, logits)
    assert len(got) == len(want) == 1
    # Documented tolerance (docs/int8.md): a coordinate moves by at most 3/4 of one
    # regressor step (centre + half size) in input pixels, i.e. 0.75 * box_scale / 128.
    box_tol = 0.75 * box_scale / 128 + 1e-6
    for i, (box, kps, score) in enumerate(want):
        np.testing.assert_allclose(got.boxes[i], box, atol=box_tol)
        np.testing.assert_allclose(got.keypoints[i], kps, atol=box_scale / 2 / 128 + 1e-6)
        # a logit moves by half a step; the sigmoid's slope is at most 1/4
        assert abs(got.scores[i] - score) <= score_scale / 8 + 1e-6
    # The same int8 outputs dequantized and decoded in float give the same result exactly.
    deq = postprocess.BlazeFaceDecoder()(
        (box_scale * qr.astype(np.float32)).astype(np.float32),
        (score_scale * (ql.astype(np.float32) - score_zp)).astype(np.float32),
    )
    np.testing.assert_allclose(got.boxes, deq.boxes, atol=1e-6)
    np.testing.assert_allclose(got.scores, deq.scores, atol=1e-6)


def _synthetic(rng, n_faces=6):
    """Raw outputs with clusters of overlapping detections around a few centres."""
    anchors = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
    reg = rng.normal(0, 2, (1, 896, 16)).astype(np.float32)
    logits = rng.normal(-6, 1, (1, 896, 1)).astype(np.float32)
    for c in rng.choice(896, n_faces, replace=False):
        near = np.nonzero(np.abs(anchors[:, :2] - anchors[c, :2]).max(1) < 0.08)[0]
        logits[0, near, 0] = rng.normal(2, 1.5, near.size)
        target = anchors[c, :2] * 128
        reg[0, near, 0:2] = target - anchors[near, :2] * 128 + rng.normal(0, 1.5, (near.size, 2))
        reg[0, near, 2:4] = rng.uniform(20, 30)
    return reg, logits


def _numpy_hard_nms(boxes, scores, iou_threshold):
    order = np.argsort(-scores, kind="stable")
    keep, alive = [], np.ones(len(scores), bool)
    for i in order:
        if not alive[i]:
            continue
        keep.append(i)
        alive &= ~(face_reference.iou_one_to_many(boxes[i], boxes) > iou_threshold)
        alive[i] = False
    return keep


@pytest.mark.parametrize("seed", range(6))
def test_synthetic_clusters_hard_and_weighted_nms_match_numpy(seed):
    rng = np.random.default_rng(seed)
    reg, logits = _synthetic(rng)
    anchors = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
    dec = postprocess.decode_ssd(reg, logits, anchors)
    boxes, kps, scores = face_reference.decode(reg, logits, anchors[:, :2], face.SHORT_RANGE)
    assert len(dec) == len(scores) > 10
    np.testing.assert_allclose(dec.boxes, boxes, atol=1e-6)
    np.testing.assert_allclose(dec.scores, scores, atol=1e-6)
    hard = postprocess.non_max_suppression(dec, 0.3)
    keep = _numpy_hard_nms(boxes, scores, 0.3)
    np.testing.assert_array_equal(hard.anchors, dec.anchors[keep])
    weighted = postprocess.non_max_suppression(dec, 0.3, weighted=True)
    want = face_reference.weighted_nms(boxes, kps, scores, 0.3)
    assert len(weighted) == len(want)
    for i, (box, kp, score) in enumerate(want):
        np.testing.assert_allclose(weighted.boxes[i], box, atol=1e-5)
        np.testing.assert_allclose(weighted.keypoints[i], kp, atol=1e-5)
        assert weighted.scores[i] == pytest.approx(score, abs=1e-6)
    fused = postprocess.BlazeFaceDecoder(max_detections=2)(reg, logits)
    assert len(fused) == min(2, len(want))


def test_postprocess_rejects_bad_input():
    anchors = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
    reg, logit = np.zeros((1, 896, 16), np.float32), np.zeros((1, 896, 1), np.float32)
    with pytest.raises(ValueError, match=r"expected 896 x 16 values .* got shape \(1, 895, 16\)"):
        postprocess.decode_ssd(reg[:, :895], logit, anchors)
    with pytest.raises(ValueError, match=r"expected 896 values .* got shape \(1, 10, 1\)"):
        postprocess.decode_ssd(reg, logit[:, :10], anchors)
    with pytest.raises(InputError, match="expected dtype float32 .pass its quantization., got int8"):
        postprocess.decode_ssd(reg.astype(np.int8), logit, anchors)
    with pytest.raises(InputError, match="scale must be positive"):
        postprocess.decode_ssd(reg.astype(np.int8), logit, anchors, box_quantization=(0.0, 0))
    with pytest.raises(InputError, match=r"zero point must be in \[-128, 127\], got 300"):
        postprocess.decode_ssd(reg, logit.astype(np.int8), anchors, score_quantization=(0.1, 300))
    with pytest.raises(InputError, match=r"score threshold must be in \[0, 1\]"):
        postprocess.decode_ssd(reg, logit, anchors, score_threshold=1.5)
    with pytest.raises(InputError, match=r"anchors: expected float32 \[N, 4\]"):
        postprocess.decode_ssd(reg, logit, anchors[:, :2])
    with pytest.raises(InputError, match=r"k must be an integer in \[1, 3\], got 4"):
        postprocess.top_k(np.zeros(3, np.int8), 4)
    with pytest.raises(InputError, match="expected dtype int8 or float32, got int16"):
        postprocess.top_k(np.zeros(3, np.int16), 1)
    det = postprocess.decode_ssd(reg, np.full_like(logit, 5.0), anchors)
    with pytest.raises(InputError, match=r"iou_threshold must be in \[0, 1\]"):
        postprocess.non_max_suppression(det, 2.0)
    assert math.isinf(postprocess._raw_threshold(1.0, True))
