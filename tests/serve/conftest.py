from __future__ import annotations

import io

import numpy as np
import pytest

from edgeinf import zoo


@pytest.fixture(scope="session")
def photo_jpeg() -> bytes:
    """The demo's photo (a real 512x600 portrait), as the JPEG it is."""
    return zoo.path("grace_hopper").read_bytes()


@pytest.fixture(scope="session")
def photo_rgb(photo_jpeg) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(photo_jpeg)) as image:
        return np.asarray(image.convert("RGB"))


@pytest.fixture(scope="session")
def face_model():
    import edgeinf

    with edgeinf.load("face_detection_short_range", num_threads=1) as model:
        yield model


@pytest.fixture(scope="session")
def face_input(photo_rgb) -> np.ndarray:
    """The photo as the face model's input: 128x128 RGB in [-1, 1] (a plain resize; the values are real)."""
    from PIL import Image

    small = np.asarray(Image.fromarray(photo_rgb).resize((128, 128), Image.BILINEAR), dtype=np.float32)
    return np.ascontiguousarray(((small - 127.5) / 127.5)[None])
