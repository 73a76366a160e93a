"""Detection and classification post-processing, in the model's own number domain.

An int8 model's scores need not be dequantized to be ranked or thresholded: a
probability threshold becomes one int8 value (`quantized_threshold`), anchors below it
are skipped without any arithmetic, and only the few that pass are dequantized and
decoded. The same holds for float outputs, compared as logits. Decoding follows
MediaPipe's SSD conventions (``TensorsToDetectionsCalculator``, BlazeFace's
x, y, w, h and keypoint order); suppression is hard or weighted (MediaPipe's WEIGHTED,
which blends overlapping faces by score). The work runs in C++ (``edgeinf._C``).

>>> import numpy as np
>>> from edgeinf import postprocess
>>> postprocess.top_k(np.array([3, 9, -1, 9], np.int8), 2)[0].tolist()
[1, 3]
>>> anchors = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
>>> anchors.shape
(896, 4)
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from . import _C
from .errors import InputError
from .quant import _real

log = logging.getLogger(__name__)

__all__ = [
    "FACE_FULL_RANGE_ANCHORS",
    "FACE_SHORT_RANGE_ANCHORS",
    "AnchorOptions",
    "BlazeFaceDecoder",
    "DecodeOptions",
    "Detections",
    "decode_ssd",
    "iou_one_to_many",
    "non_max_suppression",
    "quantized_threshold",
    "ssd_anchors",
    "top_k",
]


# ---------------------------------------------------------------- anchors


@dataclass(frozen=True)
class AnchorOptions:
    """MediaPipe's ``SsdAnchorsCalculatorOptions`` (the fields BlazeFace-style models use)."""

    input_size: tuple[int, int]  # (height, width)
    strides: tuple[int, ...]
    min_scale: float = 0.1484375
    max_scale: float = 0.75
    anchor_offset: tuple[float, float] = (0.5, 0.5)  # (x, y)
    aspect_ratios: tuple[float, ...] = (1.0,)
    interpolated_scale_aspect_ratio: float = 1.0
    fixed_anchor_size: bool = True


FACE_SHORT_RANGE_ANCHORS = AnchorOptions(input_size=(128, 128), strides=(8, 16, 16, 16))
"""MediaPipe face detection, short range: 896 anchors on 16x16 and 8x8 grids."""

FACE_FULL_RANGE_ANCHORS = AnchorOptions(input_size=(192, 192), strides=(4,), interpolated_scale_aspect_ratio=0.0)
"""MediaPipe face detection, full range: 2304 anchors on a 48x48 grid."""


def _anchor_scale(options: AnchorOptions, index: int) -> float:
    n = len(options.strides)
    if n == 1:
        return (options.min_scale + options.max_scale) / 2
    return options.min_scale + (options.max_scale - options.min_scale) * index / (n - 1)


_MAX_ANCHORS = 1 << 22


def _check_anchor_options(options: AnchorOptions) -> None:
    def positive_ints(values, what):
        try:
            values = tuple(values)
        except TypeError:
            values = ()
        if not values or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 1 for v in values
        ):
            raise InputError(f"anchor options: {what} must be positive integers, got {values!r}")
        return values

    height, width = positive_ints(options.input_size, "input_size")[:2]
    strides = positive_ints(options.strides, "strides")
    per_cell = len(options.aspect_ratios) + (1 if options.interpolated_scale_aspect_ratio > 0 else 0)
    cells = sum(math.ceil(height / s) * math.ceil(width / s) for s in strides)
    if cells * max(1, per_cell) > _MAX_ANCHORS:
        raise InputError(f"anchor options: {cells * per_cell} anchors, more than the {_MAX_ANCHORS} allowed")


def ssd_anchors(options: AnchorOptions) -> np.ndarray:
    """SSD anchors as MediaPipe's SsdAnchorsCalculator builds them.

    Consecutive layers of equal stride share one grid; each adds one anchor per aspect
    ratio per cell, plus an interpolated-scale anchor when that ratio is positive.

    Returns:
        float32 ``[N, 4]`` of ``(x_center, y_center, width, height)``, normalized.

    Raises:
        InputError: for sizes or strides that are not positive integers, or too many anchors.
    """
    _check_anchor_options(options)
    anchors = []
    layer = 0
    n = len(options.strides)
    while layer < n:
        heights, widths = [], []
        last = layer
        while last < n and options.strides[last] == options.strides[layer]:
            scale = _anchor_scale(options, last)
            ratios = list(options.aspect_ratios)
            scales = [scale] * len(ratios)
            if options.interpolated_scale_aspect_ratio > 0:
                following = 1.0 if last == n - 1 else _anchor_scale(options, last + 1)
                scales.append(math.sqrt(scale * following))
                ratios.append(options.interpolated_scale_aspect_ratio)
            for s, r in zip(scales, ratios):
                heights.append(s / math.sqrt(r))
                widths.append(s * math.sqrt(r))
            last += 1
        stride = options.strides[layer]
        rows = math.ceil(options.input_size[0] / stride)
        cols = math.ceil(options.input_size[1] / stride)
        for y in range(rows):
            for x in range(cols):
                xc = (x + options.anchor_offset[0]) / cols
                yc = (y + options.anchor_offset[1]) / rows
                for w, h in zip(widths, heights):
                    anchors.append((xc, yc, 1.0, 1.0) if options.fixed_anchor_size else (xc, yc, w, h))
        layer = last
    return np.asarray(anchors, np.float32)


# ---------------------------------------------------------------- ranking and thresholds


def iou_one_to_many(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Intersection over union of one box with each of ``boxes``, all as (x0, y0, x1, y1)."""
    x0 = np.maximum(box[0], boxes[:, 0])
    y0 = np.maximum(box[1], boxes[:, 1])
    x1 = np.minimum(box[2], boxes[:, 2])
    y1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest values along the last axis, largest first, ties by lower index.

    int8 logits are ranked as they are (a counting sort, no dequantization); float32 too.

    Returns:
        ``(indices int64, values)``, each of shape ``x.shape[:-1] + (k,)``.
    """
    x = np.asarray(x)
    if x.dtype not in (np.int8, np.float32):
        raise InputError(f"x: expected dtype int8 or float32, got {x.dtype}")
    if x.ndim < 1:
        raise InputError("x: expected at least one dimension")
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= x.shape[-1]:
        raise InputError(f"k must be an integer in [1, {x.shape[-1]}], got {k!r}")
    return _C.top_k(np.ascontiguousarray(x), int(k))


def _check_quantization(q, what: str) -> tuple[float, int]:
    try:
        scale, zero_point = q
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected (scale, zero_point), got {q!r}") from None
    scale = float(np.float32(_real(scale, f"{what} scale")))
    if not (math.isfinite(scale) and scale > 0):
        raise InputError(f"{what}: scale must be positive and finite, got {q[0]!r}")
    if isinstance(zero_point, (bool, np.bool_)) or not isinstance(zero_point, (int, np.integer)):
        raise InputError(f"{what}: zero point must be an integer, got {zero_point!r}")
    if not -128 <= int(zero_point) <= 127:
        raise InputError(f"{what}: zero point must be in [-128, 127], got {zero_point}")
    return scale, int(zero_point)


def _check_probability(threshold: float, sigmoid: bool) -> float:
    threshold = _real(threshold, "score threshold")
    if not math.isfinite(threshold) or (sigmoid and not 0.0 <= threshold <= 1.0):
        raise InputError(f"score threshold must be {'in [0, 1]' if sigmoid else 'finite'}, got {threshold!r}")
    return threshold


def quantized_threshold(threshold: float, scale: float, zero_point: int, *, sigmoid: bool = True) -> int:
    """The smallest int8 value whose score reaches ``threshold``; 128 when none does.

    The score of ``q`` is ``sigmoid(scale * (q - zero_point))`` (or the dequantized value
    itself with ``sigmoid=False``), evaluated for all 256 values once, so the int8
    comparison ``q >= quantized_threshold(...)`` decides exactly as the float one.

    >>> quantized_threshold(0.5, 0.1, 3)
    3
    """
    scale, zero_point = _check_quantization((scale, zero_point), "scores")
    threshold = _check_probability(threshold, sigmoid)
    q = np.arange(-128, 128)
    values = np.float32(scale) * (q - zero_point).astype(np.float32)
    if sigmoid:
        values = 1.0 / (1.0 + np.exp(-np.clip(values.astype(np.float64), -100, 100)))
    passing = np.nonzero(values >= threshold)[0]
    return int(q[passing[0]]) if passing.size else 128


def _raw_threshold(threshold: float, sigmoid: bool) -> float:
    if not sigmoid:
        return threshold
    if threshold <= 0.0:
        return -math.inf
    if threshold >= 1.0:
        return math.inf
    return math.log(threshold / (1.0 - threshold))


# ---------------------------------------------------------------- detections


@dataclass(frozen=True)
class Detections:
    """Decoded detections, normalized to the model input.

    Attributes:
        boxes: float32 ``[M, 4]`` as ``(xmin, ymin, xmax, ymax)``.
        keypoints: float32 ``[M, K, 2]`` as ``(x, y)``.
        scores: float32 ``[M]``, probabilities when the scores were logits.
        anchors: int64 ``[M]``, the anchor each detection came from (its top anchor after NMS).
    """

    boxes: np.ndarray
    keypoints: np.ndarray
    scores: np.ndarray
    anchors: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def _from(cls, d: dict) -> Detections:
        return cls(d["boxes"], d["keypoints"], d["scores"], d["anchors"])

    @classmethod
    def _of(cls, arrays: tuple) -> Detections:
        # The per-frame path: filling __dict__ at once costs a third of the frozen
        # dataclass's four guarded setattr calls, and the fields are the same.
        d = object.__new__(cls)
        d.__dict__.update(zip(_DETECTION_FIELDS, arrays))
        return d


_DETECTION_FIELDS = ("boxes", "keypoints", "scores", "anchors")


@dataclass(frozen=True)
class DecodeOptions:
    """MediaPipe's TensorsToDetectionsCalculator options for SSD-style box regressors."""

    num_coords: int = 16
    num_keypoints: int = 6
    x_scale: float = 128.0
    y_scale: float = 128.0
    w_scale: float = 128.0
    h_scale: float = 128.0
    score_clip: float = 100.0
    sigmoid: bool = True


FACE_SHORT_RANGE_DECODE = DecodeOptions()
FACE_FULL_RANGE_DECODE = DecodeOptions(x_scale=192.0, y_scale=192.0, w_scale=192.0, h_scale=192.0)

_NMS = {None: 0, "hard": 1, "weighted": 2}
_NO_LIMIT = 2**63 - 1
_MAX_COORDS = 1 << 16


def _check_decode_options(o: DecodeOptions) -> None:
    for name in ("num_coords", "num_keypoints"):
        v = getattr(o, name)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v <= _MAX_COORDS:
            raise InputError(f"decode options: {name} must be an integer in [0, {_MAX_COORDS}], got {v!r}")
    if o.num_coords < 4 + 2 * o.num_keypoints:
        raise InputError(f"decode options: num_coords {o.num_coords} cannot hold a box and {o.num_keypoints} keypoints")
    for name in ("x_scale", "y_scale", "w_scale", "h_scale", "score_clip"):
        v = _real(getattr(o, name), f"decode options: {name}")
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"decode options: {name} must be positive and finite, got {v!r}")


def _decode(raw_boxes, raw_scores, anchors, options, score_threshold, box_quantization, score_quantization, nms,
            iou_threshold, max_detections):  # fmt: skip
    _check_decode_options(options)
    anchors = np.asarray(anchors)
    if anchors.dtype != np.float32 or anchors.ndim != 2 or anchors.shape[1] != 4:
        raise InputError(f"anchors: expected float32 [N, 4], got {anchors.dtype} {anchors.shape}")
    raw_boxes, raw_scores = np.asarray(raw_boxes), np.asarray(raw_scores)
    for name, arr, quant in (("boxes", raw_boxes, box_quantization), ("scores", raw_scores, score_quantization)):
        want = np.int8 if quant is not None else np.float32
        if arr.dtype != want:
            hint = " (pass its quantization)" if arr.dtype == np.int8 else ""
            raise InputError(f"{name}: expected dtype {np.dtype(want).name}{hint}, got {arr.dtype}")
    threshold = _check_probability(score_threshold, options.sigmoid)
    bs, bz = _check_quantization(box_quantization, "boxes") if box_quantization is not None else (1.0, 0)
    if score_quantization is not None:
        ss, sz = _check_quantization(score_quantization, "scores")
        q_threshold = quantized_threshold(threshold, ss, sz, sigmoid=options.sigmoid)
    else:
        ss, sz, q_threshold = 1.0, 0, 128
    raw_threshold = np.float32(_raw_threshold(threshold, options.sigmoid))
    if max_detections is not None and (not isinstance(max_detections, (int, np.integer)) or max_detections < 1):
        raise InputError(f"max_detections must be a positive integer or None, got {max_detections!r}")
    decoder = _C.DetectionDecoder(
        np.ascontiguousarray(anchors), options.num_coords, options.num_keypoints, options.x_scale, options.y_scale,
        options.w_scale, options.h_scale, options.score_clip, options.sigmoid, float(raw_threshold), q_threshold,
        bs, bz, ss, sz, float(iou_threshold), _NMS[nms], _NO_LIMIT if max_detections is None else int(max_detections),
    )  # fmt: skip
    return Detections._of(decoder(np.ascontiguousarray(raw_boxes), np.ascontiguousarray(raw_scores)))


def decode_ssd(
    raw_boxes: np.ndarray,
    raw_scores: np.ndarray,
    anchors: np.ndarray,
    options: DecodeOptions = FACE_SHORT_RANGE_DECODE,
    *,
    score_threshold: float = 0.5,
    box_quantization: tuple[float, int] | None = None,
    score_quantization: tuple[float, int] | None = None,
) -> Detections:
    """Decode the anchors whose score reaches ``score_threshold`` (no suppression).

    Args:
        raw_boxes: ``[..., N, num_coords]`` regressors, float32, or int8 with ``box_quantization``.
        raw_scores: ``[..., N]`` (or ``[..., N, 1]``) logits, float32, or int8 with ``score_quantization``.
        anchors: ``ssd_anchors(...)``.
        options: coordinate layout and scales.
        score_threshold: probability (a raw value when ``options.sigmoid`` is False).
        box_quantization, score_quantization: ``(scale, zero_point)`` of int8 outputs.

    Returns:
        `Detections` in anchor order.
    """
    return _decode(raw_boxes, raw_scores, anchors, options, score_threshold, box_quantization, score_quantization,
                   None, 0.0, None)  # fmt: skip


def non_max_suppression(
    detections: Detections, iou_threshold: float = 0.3, *, weighted: bool = False, max_detections: int | None = None
) -> Detections:
    """Greedy NMS by score (ties by lower index).

    Hard: keep the best detection of each group whose IoU with it exceeds
    ``iou_threshold``. Weighted: replace its box and keypoints with the score-weighted
    mean of the group (itself included) and keep its score, as MediaPipe does for faces.
    """
    if not 0.0 <= _real(iou_threshold, "iou_threshold") <= 1.0:
        raise InputError(f"iou_threshold must be in [0, 1], got {iou_threshold!r}")
    if max_detections is not None and (not isinstance(max_detections, (int, np.integer)) or max_detections < 1):
        raise InputError(f"max_detections must be a positive integer or None, got {max_detections!r}")
    scores_shape, anchors_shape = np.shape(detections.scores), np.shape(detections.anchors)
    if len(scores_shape) != 1 or anchors_shape != scores_shape:
        raise InputError(
            f"detections: expected scores and anchors of shape (M,), got {scores_shape} and {anchors_shape}"
        )
    d = _C.non_max_suppression(
        np.ascontiguousarray(detections.boxes, np.float32), np.ascontiguousarray(detections.keypoints, np.float32),
        np.ascontiguousarray(detections.scores, np.float32), float(iou_threshold), bool(weighted),
        _NO_LIMIT if max_detections is None else int(max_detections),
    )  # fmt: skip
    # NMS numbers its input; map back to the anchors the detections came from.
    d["anchors"] = np.asarray(detections.anchors)[d["anchors"]] if len(detections) else d["anchors"]
    return Detections._from(d)


class BlazeFaceDecoder:
    """Decode + weighted NMS of a BlazeFace model's two outputs in one native call.

    Args:
        anchor_options: `FACE_SHORT_RANGE_ANCHORS` (default) or `FACE_FULL_RANGE_ANCHORS`.
        options: decoding layout; the input size is the coordinate scale by default.
        score_threshold: minimum face probability (MediaPipe: 0.5 short range, 0.6 full range).
        iou_threshold: suppression overlap (MediaPipe: 0.3).
        weighted: weighted (MediaPipe) or hard NMS.

    >>> decoder = BlazeFaceDecoder()
    >>> len(decoder(np.zeros((1, 896, 16), np.float32), np.full((1, 896, 1), -5.0, np.float32)))
    0
    """

    def __init__(
        self,
        anchor_options: AnchorOptions = FACE_SHORT_RANGE_ANCHORS,
        options: DecodeOptions | None = None,
        score_threshold: float = 0.5,
        iou_threshold: float = 0.3,
        weighted: bool = True,
        max_detections: int | None = None,
    ):
        self.anchors = ssd_anchors(anchor_options)
        size = float(anchor_options.input_size[1])
        self.options = options or DecodeOptions(x_scale=size, y_scale=size, w_scale=size, h_scale=size)
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold
        self.nms = "weighted" if weighted else "hard"
        self.max_detections = max_detections
        self._prepared: dict = {}  # validated native arguments per output quantization

    def __call__(
        self,
        regressors: np.ndarray,
        logits: np.ndarray,
        *,
        box_quantization: tuple[float, int] | None = None,
        score_quantization: tuple[float, int] | None = None,
    ) -> Detections:
        """Faces of one image: regressors ``[1, N, 16]``, logits ``[1, N, 1]`` (float32 or int8)."""
        # dtype numbers hash faster than dtype objects; this lookup is most of the
        # Python-side time of a frame.
        if type(regressors) is not np.ndarray or type(logits) is not np.ndarray:
            regressors, logits = np.asarray(regressors), np.asarray(logits)
        key = (box_quantization, score_quantization, regressors.dtype.num, logits.dtype.num)
        args = self._prepared.get(key)
        if args is None:  # validate once per kind of output; later calls go straight to C++
            _decode(regressors, logits, self.anchors, self.options, self.score_threshold, box_quantization,
                    score_quantization, None, 0.0, 1)  # fmt: skip
            o = self.options
            bs, bz = _check_quantization(box_quantization, "boxes") if box_quantization is not None else (1.0, 0)
            ss, sz = _check_quantization(score_quantization, "scores") if score_quantization is not None else (1.0, 0)
            qt = quantized_threshold(self.score_threshold, ss, sz, sigmoid=o.sigmoid) if score_quantization else 128
            raw = float(np.float32(_raw_threshold(self.score_threshold, o.sigmoid)))
            args = (o.num_coords, o.num_keypoints, o.x_scale, o.y_scale, o.w_scale, o.h_scale, o.score_clip,
                    o.sigmoid, raw, qt, bs, bz, ss, sz, float(self.iou_threshold), _NMS[self.nms],
                    _NO_LIMIT if self.max_detections is None else int(self.max_detections))  # fmt: skip
            args = _C.DetectionDecoder(self.anchors, *args)
            self._prepared[key] = args
        return Detections._of(args(np.ascontiguousarray(regressors), np.ascontiguousarray(logits)))
