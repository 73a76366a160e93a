"""Inputs to compare a model and its conversion on: crops of real photos, where the input is an image.

An image input (4-D with 1 or 3 channels, NCHW or NHWC) gets crops of the photos given,
else of the Grace Hopper portrait from the model manifest, resized to the input's size:
float inputs scaled to [-1, 1], 8-bit inputs as raw pixels. Any other input gets seeded
random values (said in the sample's description): a real photo cannot fill it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

SEED = 20261202
# Crops as fractions of the photo (left, top, right, bottom): the whole, the middle, and two corners.
CROPS = ((0.0, 0.0, 1.0, 1.0), (0.2, 0.1, 0.8, 0.7), (0.0, 0.0, 0.6, 0.6), (0.4, 0.4, 1.0, 1.0))


@dataclass(frozen=True)
class Sample:
    """One set of inputs, by input name, and where they came from."""

    arrays: dict[str, np.ndarray]
    description: str


def _image_layout(shape: tuple[int, ...]) -> str | None:
    if len(shape) != 4:
        return None
    if shape[1] in (1, 3):
        return "NCHW"
    if shape[3] in (1, 3):
        return "NHWC"
    return None


def _photos(images: list[Path]) -> list:
    from PIL import Image

    if not images:
        from .. import zoo

        images = [zoo.path("grace_hopper")]
    loaded = []
    for path in images:
        try:
            with Image.open(path) as image:
                loaded.append((path.name, image.convert("RGB")))
        except (OSError, Image.DecompressionBombError) as exc:
            raise InputError(f"cannot read the image {path}: {exc}") from None
    return loaded


def _crop(photo, box, height: int, width: int, channels: int) -> np.ndarray:
    from PIL import Image

    w, h = photo.size
    left, top, right, bottom = box
    region = photo.crop((int(left * w), int(top * h), max(int(right * w), 1), max(int(bottom * h), 1)))
    region = region.resize((width, height), Image.Resampling.BILINEAR)
    if channels == 1:
        region = region.convert("L")
    pixels = np.asarray(region, dtype=np.uint8)
    return pixels.reshape(height, width, channels)


def make(input_shapes: dict[str, tuple[int, ...]], dtypes: dict[str, np.dtype], images: list[Path], count: int = 4):
    """``count`` samples for the inputs (name -> fixed shape and dtype)."""
    rng = np.random.default_rng(SEED)
    photos = _photos(images) if any(_image_layout(s) for s in input_shapes.values()) else []
    samples = []
    for k in range(count):
        arrays, sources = {}, []
        for name, shape in input_shapes.items():
            dtype = np.dtype(dtypes[name])
            layout = _image_layout(shape)
            if layout is None or dtype.kind not in "fiu":
                arrays[name] = _random(rng, shape, dtype)
                sources.append(f"{name}: seeded random {dtype.name}")
                continue
            n, c, h, w = shape if layout == "NCHW" else (shape[0], shape[3], shape[1], shape[2])
            batch = []
            for b in range(n):
                label, photo = photos[(k + b) % len(photos)]
                box = CROPS[(k + b) % len(CROPS)]
                batch.append(_crop(photo, box, h, w, c))
                sources.append(f"{name}[{b}]: {label} crop {box}")
            pixels = np.stack(batch)  # NHWC uint8
            if layout == "NCHW":
                pixels = pixels.transpose(0, 3, 1, 2)
            if dtype.kind == "f":
                arrays[name] = np.ascontiguousarray(pixels.astype(dtype) / 127.5 - 1)
            else:
                arrays[name] = np.ascontiguousarray(pixels.astype(dtype))
        samples.append(Sample(arrays, "; ".join(sources)))
    return samples


def _random(rng, shape, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)
