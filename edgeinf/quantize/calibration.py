"""Calibration images: found on disk, decoded, and fed through the model's own preprocessing.

Each image goes through `edgeinf.preprocess` exactly as ``Model.run_image`` would feed
it (resize, letterbox, colour order, ``(x - mean) / std``), so the ranges the
quantizer measures are the ranges the model sees in use.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
MAX_IMAGES = 10_000  # a calibration set is tens to hundreds of images; more is a wrong directory
MAX_PIXELS = 64_000_000  # refuse decompression bombs before decoding


@dataclass(frozen=True)
class Sample:
    """One preprocessed input: the float tensor, and where it came from."""

    source: str
    tensor: np.ndarray


def image_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The image files named by ``paths`` (files, or directories searched one level deep), sorted.

    Raises:
        InputError: no paths, a path that does not exist, or no images found.
    """
    roots = [Path(p) for p in (paths or [])]
    if not roots:
        raise InputError("no calibration images: pass image files or a directory of images (--calib)")
    found: list[Path] = []
    for p in roots:
        if p.is_dir():
            found += sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(f"calibration path {str(p)!r} does not exist")
    if not found:
        raise InputError(
            f"no calibration images in {', '.join(map(str, paths))}: expected files ending in {', '.join(IMAGE_SUFFIXES)}"
        )
    if len(found) > MAX_IMAGES:
        raise InputError(f"{len(found)} calibration images; at most {MAX_IMAGES} are used: pass a smaller set")
    return found


def read_rgb(path: Path) -> np.ndarray:
    """An image file as an HxWx3 uint8 RGB array.

    Raises:
        InputError: the file is not an image Pillow can decode, or is too large.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            if im.width * im.height > MAX_PIXELS:
                raise InputError(f"{path}: {im.width}x{im.height} pixels, at most {MAX_PIXELS} are accepted")
            return np.asarray(im.convert("RGB"))
    except InputError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"{path}: not a decodable image ({type(exc).__name__}: {exc})") from None


def split_holdout(files: Sequence[Path], every: int = 4) -> tuple[list[Path], list[Path]]:
    """(calibration, held aside): every ``every``-th file, from the second on, is held aside.

    With a single file there is nothing to hold aside: it is used for both.
    """
    files = list(files)
    if len(files) < 2:
        return files, files
    held = [f for i, f in enumerate(files) if i % every == 1]
    return [f for f in files if f not in held], held


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, label: str, stream=None, enabled: bool | None = None):
        self.total, self.label, self.done = max(1, total), label, 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled

    def step(self, n: int = 1) -> None:
        self.done += n
        if self.enabled:
            width = 30
            filled = width * min(self.done, self.total) // self.total
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def flip(rgb: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgb[:, ::-1])


def tensors(model, frames: Iterable[tuple[str, np.ndarray, tuple | None]], options: dict) -> Iterator[Sample]:
    """Preprocess ``(source, rgb frame, roi or None)`` triples for input 0 of a loaded model."""
    from ..preprocess import Pipeline

    for source, rgb, roi in frames:
        pipe = Pipeline.for_model(model, rgb, "rgb", **options)
        out = pipe.new_output()
        pipe(rgb, out, roi)
        yield Sample(source, out)
