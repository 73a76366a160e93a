"""Image folders: every image in name order, decoded once."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .base import Source, SourceError
from .pacing import Pacer

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
MAX_IMAGE_PIXELS = 64_000_000


class ImageFolder(Source):
    """The images of a folder (or one image file) as frames, RGB.

    Args:
        path: a folder or an image file.
        fps: deliver at this rate with latest-frame semantics (a camera stand-in); None:
            every image, as fast as it is read.
        loop: start again after the last image.
        **kwargs: `Source` options.

    Raises:
        SourceError: no such path, no image in it, or an image that cannot be decoded.
    """

    format = "rgb"

    def __init__(self, path, *, fps: float | None = None, loop: bool = False, **kwargs):
        self.path = Path(path)
        self.loop = loop
        if fps is not None and not (math.isfinite(fps) and fps > 0):
            raise SourceError(f"fps must be a positive number, got {fps}")
        self._fps = fps
        self._images: list[np.ndarray] = []
        self._index = 0
        self._pacer: Pacer | None = None
        super().__init__(str(path), keep_all=fps is None, **kwargs)

    def _open(self) -> None:
        from PIL import Image, UnidentifiedImageError

        if not self.path.exists():
            raise SourceError(f"no such folder or image: {self.path}")
        if self.path.is_file():
            files = [self.path]
        else:
            files = sorted(p for p in self.path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise SourceError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {self.path}")
        for file in files:
            try:
                with Image.open(file) as image:
                    if image.width * image.height > MAX_IMAGE_PIXELS:
                        raise SourceError(
                            f"{file} has {image.width}x{image.height} pixels, more than {MAX_IMAGE_PIXELS}"
                        )
                    self._images.append(np.asarray(image.convert("RGB")))
            except (OSError, UnidentifiedImageError) as exc:
                if isinstance(exc, SourceError):
                    raise
                raise SourceError(f"cannot decode {file}: {exc}") from None
        if self._fps is not None:
            self._pacer = Pacer(self._fps, self._stop, self.clock)

    def _grab(self) -> np.ndarray | None:
        if self._pacer is not None and not self._pacer.wait():
            return None
        if self._index >= len(self._images):
            if not self.loop:
                return None
            self._index = 0
        image = self._images[self._index]
        self._index += 1
        return image
