"""Face detection with MediaPipe's BlazeFace models.

The models predict, for each of a fixed set of SSD anchors, one score logit and 16
numbers: box centre offset, box size and six keypoints (eyes, nose, mouth, ears), all
in input pixels relative to the anchor. Anchors follow MediaPipe's SSD anchor rules
with fixed anchor size; detections that overlap are blended by score (weighted NMS),
as MediaPipe does for faces. Decoding and NMS run natively (`edgeinf.postprocess`).
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

    def anchor_options(self):
        """The variant's anchors as `edgeinf.postprocess.AnchorOptions`."""
        from . import postprocess

        return postprocess.AnchorOptions(
            input_size=(self.input_size, self.input_size),
            strides=self.strides,
            interpolated_scale_aspect_ratio=1.0 if self.interpolated_anchor else 0.0,
        )

    def num_anchors(self) -> int:
        from . import postprocess

        return len(postprocess.ssd_anchors(self.anchor_options()))


SHORT_RANGE = BlazeFaceConfig(input_size=128, strides=(8, 16, 16, 16), interpolated_anchor=True, min_score=0.5)
FULL_RANGE = BlazeFaceConfig(input_size=192, strides=(4,), interpolated_anchor=False, min_score=0.6)
VARIANTS = {"face_detection_short_range": SHORT_RANGE, "face_detection_full_range": FULL_RANGE}


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


def _native_decoder(config: BlazeFaceConfig):
    """The C++ decoder (edgeinf.postprocess) for a variant."""
    from . import postprocess

    return postprocess.BlazeFaceDecoder(
        config.anchor_options(), score_threshold=config.min_score, iou_threshold=config.iou_threshold, weighted=True
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
        self._decoder = _native_decoder(self.config)
        self.anchors = self._decoder.anchors[:, :2]  # normalized centres (x, y), one per model output row
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
            x0, y0, x1, y1 = (float(v) for v in letterbox.to_source(box, normalized=True))
            faces.append(Face((x0, y0, x1, y1), float(score), letterbox.to_source(kps, normalized=True)))
        return faces

    def _split(self, outputs: dict[str, np.ndarray]):
        by_width = {v.shape[-1]: v for v in outputs.values()}
        if 16 not in by_width or 1 not in by_width:
            raise ValueError(
                f"BlazeFace outputs of widths 16 and 1 expected, got {[v.shape for v in outputs.values()]}"
            )
        return by_width[16], by_width[1]
