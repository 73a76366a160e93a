"""Real video for the tests: a pan and zoom over the manifest's real photo, written with OpenCV."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgeinf import zoo


def photo_rgb() -> np.ndarray:
    from PIL import Image

    with Image.open(zoo.path("grace_hopper")) as image:
        return np.asarray(image.convert("RGB"))


def pan_zoom_frames(count: int, size=(160, 120)) -> list[np.ndarray]:
    """``count`` BGR frames: a window that zooms in on the face while it pans, resized to ``size``."""
    import cv2

    bgr = cv2.cvtColor(photo_rgb(), cv2.COLOR_RGB2BGR)
    height, width = bgr.shape[:2]
    frames = []
    for i in range(count):
        t = i / max(1, count - 1)
        crop_w = int(width * (1.0 - 0.3 * t))
        crop_h = int(crop_w * size[1] / size[0])
        crop_h = min(crop_h, height)
        x = int((width - crop_w) * (0.5 + 0.2 * np.sin(2 * np.pi * t)))
        y = int((height - crop_h) * 0.3)
        frames.append(cv2.resize(bgr[y : y + crop_h, x : x + crop_w], size, interpolation=cv2.INTER_AREA))
    return frames


def write_clip(path: Path, count: int = 24, size=(160, 120), fps: float = 25.0) -> Path:
    """An MJPEG .avi of `pan_zoom_frames` (OpenCV's FFmpeg writer; no system packages needed)."""
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, size)
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write MJPEG video to {path}")
    for frame in pan_zoom_frames(count, size):
        writer.write(frame)
    writer.release()
    return path
