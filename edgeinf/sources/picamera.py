"""The Raspberry Pi camera through picamera2: its low-resolution YUV420 stream.

The lores stream is what a detector wants: the ISP scales it for free, and YUV420 goes
straight into `edgeinf.preprocess` (as ``i420``) without a colour conversion on the CPU.
picamera2 is imported only when the source opens, so this module loads anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Source, SourceError

if TYPE_CHECKING:
    from picamera2 import Picamera2


class Picamera2Source(Source):
    """Frames of picamera2's ``lores`` stream, I420.

    Args:
        size: lores (width, height); even numbers.
        main_size: the main stream's size (kept for a photo or a recording).
        camera: the camera number.
        **kwargs: `Source` options.

    Raises:
        SourceError: picamera2 missing (not a Pi, or ``apt install python3-picamera2``
            not done) or no camera attached.
    """

    format = "i420"

    def __init__(self, size=(640, 480), *, main_size=(1280, 720), camera: int = 0, **kwargs):
        width, height = (int(v) for v in size)
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise SourceError(f"picamera2 lores size must be positive and even, got {size}")
        self.size = (width, height)
        self.main_size = tuple(int(v) for v in main_size)
        self.camera_number = camera
        self._camera: Picamera2 | None = None
        self._stride = width
        super().__init__(f"picamera2 camera {camera} lores {width}x{height}", **kwargs)

    def _open(self) -> None:
        try:
            from picamera2 import Picamera2
        except ImportError:
            raise SourceError(
                "picamera2 is not installed: on a Raspberry Pi, `sudo apt install python3-picamera2` "
                "(and create the venv with --system-site-packages)"
            ) from None
        try:
            camera = Picamera2(self.camera_number)
        except (IndexError, RuntimeError) as exc:
            raise SourceError(f"no camera {self.camera_number} found by picamera2: {exc}") from None
        try:
            config = camera.create_video_configuration(
                main={"size": self.main_size}, lores={"size": self.size, "format": "YUV420"}
            )
            camera.configure(config)
            self._stride = int(camera.stream_configuration("lores").get("stride") or self.size[0])
            camera.start()
        except Exception:
            camera.close()
            raise
        self._camera = camera

    def _grab(self) -> np.ndarray:
        # capture_array waits for the next frame: the camera sets the pace.
        assert self._camera is not None  # _open set it before the capture thread started
        array = self._camera.capture_array("lores")
        width, height = self.size
        if array.shape != (height * 3 // 2, self._stride):
            raise SourceError(
                f"picamera2 lores gave shape {array.shape}: expected ({height * 3 // 2}, {self._stride}) YUV420"
            )
        if self._stride == width:
            return array
        # Padded rows: each chroma row is stride/2 wide, so the planes cannot be a 2-D view;
        # repack once into a tight I420 frame.
        flat = array.reshape(-1)
        y = flat[: height * self._stride].reshape(height, self._stride)[:, :width]
        chroma = flat[height * self._stride :].reshape(height, self._stride // 2)[:, : width // 2]
        packed = np.empty((height * 3 // 2, width), np.uint8)
        packed[:height] = y
        packed[height:].reshape(height, width // 2)[:] = chroma
        return packed

    def _release(self) -> None:
        if self._camera is not None:
            try:
                self._camera.stop()
            finally:
                self._camera.close()
                self._camera = None
