"""The detector task metric of a conversion: do both models find the same things?

A converted detector can stay within a small absolute error and still lose or add a
detection where a score sits at the threshold. This compares the detections themselves:
each box of the original is matched to the converted model's unmatched box of highest
IoU (at least `MATCH_IOU`), and the report gives the share of boxes matched both ways,
the mean IoU of the matches and the largest score difference between matched boxes.

Detections come from a score map: an output ``[batch, 1, H, W]`` of the input image's
height and width, as segmentation-style detectors give (PP-OCR's DB text detector):
connected regions above `THRESHOLD`, each a box scored by its mean probability.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..postprocess import iou_one_to_many

THRESHOLD = 0.3
"""A pixel of the score map belongs to a detection above this probability (PP-OCR's DB default)."""
MIN_AREA = 3
"""Regions smaller than this many pixels are noise, not detections."""
MATCH_IOU = 0.5


def is_score_map(shape: tuple[int, ...], image_sizes: list[tuple[int, int]]) -> bool:
    """Whether an output of this shape is a detector's score map for one of the image inputs."""
    return len(shape) == 4 and shape[1] == 1 and (shape[2], shape[3]) in image_sizes


def from_score_map(score_map: np.ndarray, threshold: float = THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ``[N, 4]`` (x0, y0, x1, y1, pixels) and scores ``[N]`` of a ``[H, W]`` probability map.

    Raises:
        ImportError: OpenCV is not installed (it finds the connected regions).
    """
    import cv2

    probability = np.asarray(score_map, np.float32)
    mask = (probability > threshold).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
    boxes, scores = [], []
    for label in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[label])
        if area < MIN_AREA:
            continue
        boxes.append((x, y, x + w, y + h))
        scores.append(float(probability[labels == label].mean()))
    return np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(scores, np.float32)


@dataclass
class DetectionAgreement:
    """The detections of the original and of the converted model, matched over every sample.

    Attributes:
        reference: detections the original made.
        converted: detections the converted model made.
        matched: pairs with IoU of at least `MATCH_IOU`.
        mean_iou: mean IoU of the matched pairs (1.0: the same boxes).
        max_score_delta: the largest score difference of a matched pair.
    """

    reference: int = 0
    converted: int = 0
    matched: int = 0
    mean_iou: float = 1.0
    max_score_delta: float = 0.0
    _iou_sum: float = field(default=0.0, repr=False)

    @property
    def recall(self) -> float:
        """Share of the original's detections the converted model also makes."""
        return self.matched / self.reference if self.reference else 1.0

    @property
    def precision(self) -> float:
        """Share of the converted model's detections the original also makes."""
        return self.matched / self.converted if self.converted else 1.0

    def add(self, reference: tuple[np.ndarray, np.ndarray], converted: tuple[np.ndarray, np.ndarray]) -> None:
        """Match one sample's detections: (boxes, scores) of each model."""
        ref_boxes, ref_scores = reference
        got_boxes, got_scores = converted
        self.reference += len(ref_boxes)
        self.converted += len(got_boxes)
        free = np.ones(len(got_boxes), bool)
        for i in np.argsort(-ref_scores, kind="stable"):  # the surest detections pick first
            if not free.any():
                break
            overlap = np.where(free, iou_one_to_many(ref_boxes[i], got_boxes), -1.0)
            j = int(overlap.argmax())
            if overlap[j] < MATCH_IOU:
                continue
            free[j] = False
            self.matched += 1
            self._iou_sum += float(overlap[j])
            self.max_score_delta = max(self.max_score_delta, abs(float(ref_scores[i] - got_scores[j])))
        self.mean_iou = self._iou_sum / self.matched if self.matched else (1.0 if not self.reference else 0.0)

    def as_dict(self) -> dict:
        return {
            "reference": self.reference,
            "converted": self.converted,
            "matched": self.matched,
            "recall": self.recall,
            "precision": self.precision,
            "mean_iou": self.mean_iou,
            "max_score_delta": self.max_score_delta,
        }
