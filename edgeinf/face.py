"""Face detection with MediaPipe's BlazeFace models: anchors, decoding and weighted NMS.

The models predict, for each of a fixed set of SSD anchors, one score logit and 16
numbers: box centre offset, box size and six keypoints (eyes, nose, mouth, ears), all
in input pixels relative to the anchor. Anchors follow MediaPipe's SSD anchor rules
with fixed anchor size; detections that overlap are blended by score (weighted NMS),
as MediaPipe does for faces.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError


@dataclass(frozen=True)
class BlazeFaceConfig:
    """How one BlazeFace variant lays out its anchors and reads its outputs."""

    input_size: int
    strides: tuple[int, ...]
    interpolated_anchor: bool  # a second anchor per layer (MediaPipe's interpolated scale)
    min_score: float
    iou_threshold: float = 0.3

    def num_anchors(self) -> int:
        return len(ssd_anchors(self))


SHORT_RANGE = BlazeFaceConfig(input_size=128, strides=(8, 16, 16, 16), interpolated_anchor=True, min_score=0.5)
FULL_RANGE = BlazeFaceConfig(input_size=192, strides=(4,), interpolated_anchor=False, min_score=0.6)
VARIANTS = {"face_detection_short_range": SHORT_RANGE, "face_detection_full_range": FULL_RANGE}


def ssd_anchors(config: BlazeFaceConfig) -> np.ndarray:
    """Anchor centres as an (N, 2) float32 array of normalized (x, y).

    Consecutive layers with the same stride share one grid; each contributes one
    anchor per cell, plus the interpolated one when configured.
    """
    centres = []
    layer = 0
    while layer < len(config.strides):
        stride = config.strides[layer]
        per_cell = 0
        while layer < len(config.strides) and config.strides[layer] == stride:
            per_cell += 2 if config.interpolated_anchor else 1
            layer += 1
        cells = -(-config.input_size // stride)  # ceil
        ys, xs = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
        grid = np.stack([(xs + 0.5) / cells, (ys + 0.5) / cells], axis=-1).reshape(-1, 1, 2)
        centres.append(np.repeat(grid, per_cell, axis=1).reshape(-1, 2))
    return np.concatenate(centres).astype(np.float32)


@dataclass(frozen=True)
class Face:
    """One detected face, in pixels of the original image.

    Attributes:
        box: (xmin, ymin, xmax, ymax).
        score: confidence in [0, 1].
        keypoints: (6, 2) array: right eye, left eye, nose tip, mouth, right ear, left ear.
    """

    box: tuple[float, float, float, float]
    score: float
    keypoints: np.ndarray


def decode(regressors: np.ndarray, logits: np.ndarray, anchors: np.ndarray, config: BlazeFaceConfig):
    """Boxes (N, 4) as normalized (xmin, ymin, xmax, ymax), keypoints (N, 6, 2) and scores (N,).

    Only anchors whose score passes ``config.min_score`` are decoded.
    """
    raw = regressors.reshape(-1, 16)
    logit = logits.reshape(-1)
    # Compare in the logit domain: sigmoid(x) > t  <=>  x > log(t / (1 - t)); no exp for rejected anchors.
    threshold = np.log(config.min_score / (1.0 - config.min_score))
    keep = np.nonzero(logit > threshold)[0]
    raw, logit, anchor = raw[keep], logit[keep], anchors[keep]
    scores = 1.0 / (1.0 + np.exp(-np.clip(logit, -100.0, 100.0)))
    scale = float(config.input_size)
    centre = raw[:, 0:2] / scale + anchor
    half = raw[:, 2:4] / scale / 2.0
    boxes = np.concatenate([centre - half, centre + half], axis=1)
    keypoints = raw[:, 4:16].reshape(-1, 6, 2) / scale + anchor[:, None, :]
    return boxes.astype(np.float32), keypoints.astype(np.float32), scores.astype(np.float32)


def iou_one_to_many(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    x0 = np.maximum(box[0], boxes[:, 0])
    y0 = np.maximum(box[1], boxes[:, 1])
    x1 = np.minimum(box[2], boxes[:, 2])
    y1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def weighted_nms(boxes, keypoints, scores, iou_threshold: float):
    """Blend each cluster of overlapping detections by score; keep the best score of each."""
    order = np.argsort(-scores, kind="stable")
    boxes, keypoints, scores = boxes[order], keypoints[order], scores[order]
    alive = np.ones(len(scores), bool)
    out = []
    for i in range(len(scores)):
        if not alive[i]:
            continue
        overlap = alive & (iou_one_to_many(boxes[i], boxes) > iou_threshold)
        overlap[i] = True
        w = scores[overlap][:, None]
        box = (boxes[overlap] * w).sum(0) / w.sum()
        kps = (keypoints[overlap] * w[:, :, None]).sum(0) / w.sum()
        out.append((box, kps, float(scores[i])))
        alive &= ~overlap
    return out


@dataclass(frozen=True)
class Letterbox:
    """How an image was fitted into the square model input: scale and padding, in input pixels."""

    scale: float
    pad_x: float
    pad_y: float
    size: int

    def to_image(self, xy_normalized: np.ndarray) -> np.ndarray:
        """Map normalized model-input coordinates (..., 2) back to original image pixels."""
        xy = xy_normalized * self.size
        return (xy - np.array([self.pad_x, self.pad_y], np.float32)) / self.scale


def letterbox_rgb(image: np.ndarray, size: int) -> tuple[np.ndarray, Letterbox]:
    """Fit an RGB uint8 image into size x size keeping its aspect ratio; float32 in [-1, 1].

    The plain Pillow + numpy way, kept as the reference the native path is compared with.
    """
    from PIL import Image

    h, w = image.shape[:2]
    scale = size / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    resized = np.asarray(Image.fromarray(image).resize((nw, nh), Image.BILINEAR), dtype=np.float32)
    pad_x, pad_y = (size - nw) // 2, (size - nh) // 2
    canvas = np.zeros((size, size, 3), np.float32)
    canvas[pad_y : pad_y + nh, pad_x : pad_x + nw] = resized
    # Padding is black, as MediaPipe pads: it becomes -1 after normalization.
    return canvas / 127.5 - 1.0, Letterbox(scale, pad_x, pad_y, size)


def _native_decoder(config: BlazeFaceConfig):
    """The C++ decoder (edgeinf.postprocess) for a variant; same anchors as `ssd_anchors`."""
    from . import postprocess

    size = config.input_size
    anchors = postprocess.AnchorOptions(
        input_size=(size, size),
        strides=config.strides,
        interpolated_scale_aspect_ratio=1.0 if config.interpolated_anchor else 0.0,
    )
    return postprocess.BlazeFaceDecoder(
        anchors, score_threshold=config.min_score, iou_threshold=config.iou_threshold, weighted=True
    )


class FaceDetector:
    """BlazeFace on any edgeinf backend.

    Args:
        model: a loaded `Model`, a path, or a manifest name (default: the short-range model).
        config: the variant's layout; inferred from the manifest name when not given.
        num_threads: runtime threads when the detector loads the model itself.

    >>> faces = FaceDetector().detect(rgb_image)     # doctest: +SKIP
    """

    def __init__(self, model=None, config: BlazeFaceConfig | None = None, num_threads: int | None = None):
        from . import zoo
        from .model import Model, load

        name = "face_detection_short_range"
        if isinstance(model, str) and model in VARIANTS:
            name, model = model, None
        if model is None:
            model = zoo.path(name)
        if not isinstance(model, Model):
            model = load(Path(model), num_threads=num_threads)
        self.model = model
        self.config = config or VARIANTS.get(Path(model.path).stem, SHORT_RANGE)
        self.anchors = ssd_anchors(self.config)
        self._decoder = _native_decoder(self.config)
        self._quantization = {}
        for spec in model.outputs:
            if spec.quantization is not None and not spec.quantization.per_channel:
                key = "box_quantization" if spec.shape[-1] == 16 else "score_quantization"
                self._quantization[key] = (spec.quantization.scale, spec.quantization.zero_point)
        size = self.config.input_size
        if tuple(model.inputs[0].shape) != (1, size, size, 3):
            raise ValueError(
                f"a BlazeFace model with a 1x{size}x{size}x3 input was expected, got {model.inputs[0].shape}"
            )

    def detect(self, frame: np.ndarray, color: str = "rgb") -> list[Face]:
        """Faces in a camera frame or photo, best first, in the frame's pixels.

        Args:
            frame: a uint8 image in format ``color`` (rgb, bgr, rgba, bgra, gray, nv12,
                nv21, i420, yuyv; see `edgeinf.preprocess`).
            color: the frame's format.
        """
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
            raise InputError(
                f"expected a uint8 image array, got {type(frame).__name__} of dtype {getattr(frame, 'dtype', None)}"
            )
        if color in ("rgb", "bgr") and (frame.ndim != 3 or frame.shape[2] != 3):
            raise InputError(f"expected an HxWx3 uint8 {color.upper()} image, got shape {frame.shape}")
        # One native pass into the input tensor: letterbox with black padding (as MediaPipe pads),
        # area resampling (a photo or frame is several times larger than 128 px: plain bilinear
        # would alias), normalization to [-1, 1] (the models carry no metadata that states it).
        options = {"letterbox": True, "mean": 127.5, "std": 127.5, "pad": 0.0, "resize": "area"}
        outputs = self.model.run_image(frame, color=color, **options)
        letterbox = outputs.letterbox  # this frame's own, even when threads share the detector
        regressors, logits = self._split(outputs)
        # Native decode + weighted NMS (edgeinf.postprocess); int8 outputs stay int8.
        quantization = {
            k: v for k, v in self._quantization.items() if (regressors if k[0] == "b" else logits).dtype == np.int8
        }
        found = self._decoder(regressors, logits, **quantization)
        faces = []
        for box, kps, score in zip(found.boxes, found.keypoints, found.scores):
            corners = letterbox.to_source(box, normalized=True)
            faces.append(
                Face(tuple(float(v) for v in corners), float(score), letterbox.to_source(kps, normalized=True))
            )
        return faces

    def _split(self, outputs: dict[str, np.ndarray]):
        by_width = {v.shape[-1]: v for v in outputs.values()}
        if 16 not in by_width or 1 not in by_width:
            raise ValueError(
                f"BlazeFace outputs of widths 16 and 1 expected, got {[v.shape for v in outputs.values()]}"
            )
        return by_width[16], by_width[1]
