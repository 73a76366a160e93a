"""Files, V4L2/USB cameras and RTSP streams through OpenCV's VideoCapture."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .base import Source, SourceError
from .pacing import Pacer

if TYPE_CHECKING:
    import cv2

MAX_DIMENSION = 16384
"""Larger frames are refused: a corrupt header must not size a huge allocation per frame."""


def _cv2():
    try:
        import cv2
    except ImportError:
        raise SourceError("video files, cameras and streams need OpenCV: pip install opencv-python-headless") from None
    return cv2


class OpenCVSource(Source):
    """Frames from ``cv2.VideoCapture``: BGR, at the device's pace.

    Args:
        target: a file path, a camera index or device path (``/dev/video0``), or a URL
            (``rtsp://...``).
        realtime: files only: deliver at the file's frame rate (or ``fps``) with
            latest-frame semantics, as a camera would; else every frame, as fast as it
            is read.
        fps: the pace of a realtime file (default: the rate stored in the file).
        loop: files only: start again at the end.
        size: cameras: ask for this (width, height).
        **kwargs: `Source` options (``stall_timeout_s``, ``clock``).

    Raises:
        SourceError: OpenCV missing, a file or device that does not exist or cannot be
            opened (named in the message).
    """

    format = "bgr"

    def __init__(
        self,
        target,
        *,
        realtime: bool = False,
        fps: float | None = None,
        loop: bool = False,
        size: tuple[int, int] | None = None,
        **kwargs,
    ):
        self.target = target
        self.is_file = (
            isinstance(target, (str, os.PathLike)) and "://" not in str(target) and not str(target).startswith("/dev/")
        )
        self.realtime = realtime or not self.is_file
        self.loop = loop and self.is_file
        self.size = size
        self._fps = fps
        self._capture_device: cv2.VideoCapture | None = None
        self._pacer: Pacer | None = None
        if fps is not None and not (math.isfinite(fps) and fps > 0):
            raise SourceError(f"fps must be a positive number, got {fps}")
        super().__init__(str(target), keep_all=not self.realtime, **kwargs)

    def _open(self) -> None:
        cv2 = _cv2()
        target = self.target
        if self.is_file:
            path = Path(target)
            if not path.is_file():
                raise SourceError(f"video file not found: {path}")
            capture = cv2.VideoCapture(str(path))
        elif isinstance(target, int) or str(target).startswith("/dev/"):
            if isinstance(target, str) and not os.path.exists(target):
                raise SourceError(f"no camera at {target} (is it plugged in? `ls /dev/video*` lists cameras)")
            capture = cv2.VideoCapture(target, cv2.CAP_V4L2)
            if self.size is not None:
                capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.size[0])
                capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.size[1])
        else:
            capture = cv2.VideoCapture(str(target))
        if not capture.isOpened():
            capture.release()
            kind = "video file" if self.is_file else "camera" if isinstance(target, int) else "stream"
            raise SourceError(f"OpenCV could not open the {kind} {target!s} (unsupported format or unreachable)")
        self._capture_device = capture
        if self.realtime and self.is_file:
            fps = self._fps or capture.get(cv2.CAP_PROP_FPS)
            if not (fps and math.isfinite(fps) and fps > 0):
                capture.release()
                raise SourceError(f"{target} states no frame rate: pass fps= to play it in real time")
            self._pacer = Pacer(fps, self._stop, self.clock)

    @property
    def fps(self) -> float | None:
        """The pace of a realtime file, else None."""
        return 1.0 / self._pacer.period_s if self._pacer else None

    def _grab(self) -> np.ndarray | None:
        capture = self._capture_device
        assert capture is not None  # _open set it before the capture thread started
        if self._pacer is not None and not self._pacer.wait():
            return None
        ok, image = capture.read()
        if not ok and self.loop:
            capture.set(_cv2().CAP_PROP_POS_FRAMES, 0)
            ok, image = capture.read()
        if not ok:
            return None
        if image.ndim != 3 or image.shape[2] != 3 or max(image.shape[:2]) > MAX_DIMENSION:
            raise SourceError(f"{self.name} delivered a frame of shape {image.shape}: expected H x W x 3 BGR")
        return image

    def _release(self) -> None:
        if self._capture_device is not None:
            self._capture_device.release()
