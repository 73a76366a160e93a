"""Frame sources with latest-frame semantics: cameras, streams, files and folders.

Every source keeps only the newest frame: a slow consumer processes the newest frame the
device has, and the frames it never saw are counted in ``source.stats.dropped``. Frames
come in the device's own format (`Frame.format`, rows possibly padded) and go straight
into ``model.run_image(frame.data, frame.format)``.

>>> import edgeinf.sources
>>> with edgeinf.sources.open("clip.mp4", realtime=True) as source:   # doctest: +SKIP
...     frame = source.read()
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import FORMATS, Frame, LatestFrame, Source, SourceEnded, SourceError, SourceStalled, SourceStats
from .folder import ImageFolder
from .gstreamer import GStreamerSource
from .opencv import OpenCVSource
from .picamera import Picamera2Source


def open(spec, **options) -> Source:  # noqa: A001 - the natural name, as io.open
    """A source from a short description.

    Args:
        spec: ``"picamera2"``; ``"gst:<pipeline>"``; a camera index (``0``, ``"0"``) or
            ``/dev/videoN``; an ``rtsp://``/``http://`` URL; a folder or image; a video file.
        **options: the chosen source's keywords.

    Raises:
        SourceError: a spec that names nothing that exists.
    """
    if isinstance(spec, Source):
        return spec
    if isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()):
        return OpenCVSource(int(spec), **options)
    text = os.fspath(spec)
    if text == "picamera2":
        return Picamera2Source(**options)
    if text.startswith("gst:"):
        return GStreamerSource(text[4:].strip(), **options)
    if "://" in text or text.startswith("/dev/"):
        return OpenCVSource(text, **options)
    path = Path(text)
    if path.is_dir() or path.suffix.lower() in (".jpg", ".jpeg", ".png", ".bmp"):
        return ImageFolder(path, **options)
    if not path.exists():
        raise SourceError(
            f"no source {text!r}: expected a video file, an image folder, a camera index or /dev/videoN, "
            "a URL, gst:<pipeline> or picamera2"
        )
    return OpenCVSource(path, **options)


__all__ = [
    "FORMATS",
    "Frame",
    "GStreamerSource",
    "ImageFolder",
    "LatestFrame",
    "OpenCVSource",
    "Picamera2Source",
    "Source",
    "SourceEnded",
    "SourceError",
    "SourceStalled",
    "SourceStats",
    "open",
]
