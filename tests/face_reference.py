"""A plain numpy BlazeFace pipeline: the reference `edgeinf.face` and `edgeinf.postprocess`
are compared with (tests) and timed against (benchmarks).

Anchors follow MediaPipe's SSD anchor rules with a fixed anchor size, written out
independently of `edgeinf.postprocess.ssd_anchors`; decoding and weighted NMS are the
straightforward float versions of the native ones.
"""

from __future__ import annotations

import numpy as np

from edgeinf.face import BlazeFaceConfig
from edgeinf.postprocess import iou_one_to_many
from edgeinf.preprocess import Letterbox


def anchor_centres(config: BlazeFaceConfig) -> np.ndarray:
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


def letterbox_rgb(image: np.ndarray, size: int) -> tuple[np.ndarray, Letterbox]:
    """Fit an RGB uint8 image into size x size keeping its aspect ratio; float32 in [-1, 1].

    The plain Pillow + numpy way, the reference the native path is compared with. The
    `Letterbox` maps normalized tensor coordinates back to the image (``to_source``).
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
    return canvas / 127.5 - 1.0, Letterbox(scale, scale, pad_x, pad_y, nw, nh, 0, 0, w, h, size, size)
