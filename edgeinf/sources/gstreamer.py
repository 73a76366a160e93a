"""Any GStreamer pipeline (V4L2, RTSP, files, test sources) through an appsink.

The appsink keeps one buffer and drops older ones (``drop=true max-buffers=1``), so a
slow reader never sees a queue of stale frames. Uses PyGObject (``python3-gi`` and
``gir1.2-gst-plugins-base-1.0`` on Debian), imported when the source opens.
"""

from __future__ import annotations

import numpy as np

from .base import Source, SourceError

_CAPS_FORMAT = {"bgr": "BGR", "rgb": "RGB", "gray": "GRAY8", "nv12": "NV12", "i420": "I420", "yuyv": "YUY2"}
_SINK = "edgeinf_sink"


class GStreamerSource(Source):
    """Frames from the end of a GStreamer pipeline description.

    Args:
        description: a ``gst-launch-1.0`` style pipeline producing raw video, without
            the sink, e.g. ``"v4l2src device=/dev/video0"`` or
            ``"rtspsrc location=rtsp://cam/stream ! decodebin"``.
        format: the frame format the sink asks for (one of bgr, rgb, gray, nv12, i420, yuyv).
        **kwargs: `Source` options.
    """

    def __init__(self, description: str, *, format: str = "bgr", **kwargs):
        if format not in _CAPS_FORMAT:
            raise SourceError(f"GStreamer frames can be {sorted(_CAPS_FORMAT)}, got {format!r}")
        self.format = format
        self.description = description
        self._pipeline = None
        self._sink = None
        super().__init__(f"gstreamer: {description}", **kwargs)

    def _open(self) -> None:
        try:
            import gi

            gi.require_version("Gst", "1.0")
            from gi.repository import Gst
        except (ImportError, ValueError):
            raise SourceError(
                "GStreamer sources need PyGObject and GStreamer: apt install python3-gi gir1.2-gstreamer-1.0 "
                "gstreamer1.0-plugins-base gstreamer1.0-plugins-good"
            ) from None
        Gst.init(None)
        caps = f"video/x-raw,format={_CAPS_FORMAT[self.format]}"
        text = f"{self.description} ! videoconvert ! {caps} ! appsink name={_SINK} drop=true max-buffers=1 sync=false"
        try:
            pipeline = Gst.parse_launch(text)
        except Exception as exc:  # GLib.Error: an unknown element or bad syntax
            raise SourceError(f"GStreamer cannot build {text!r}: {exc}") from None
        self._Gst = Gst
        self._sink = pipeline.get_by_name(_SINK)
        if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            pipeline.set_state(Gst.State.NULL)
            raise SourceError(f"GStreamer could not start {self.description!r} (missing device or plugin?)")
        self._pipeline = pipeline

    def _grab(self) -> np.ndarray | None:
        Gst = self._Gst
        while not self._stop.is_set():
            sample = self._sink.emit("try-pull-sample", 100 * Gst.MSECOND)
            if sample is None:
                if self._sink.get_property("eos"):
                    return None
                self._check_bus()
                continue
            structure = sample.get_caps().get_structure(0)
            width, height = structure.get_value("width"), structure.get_value("height")
            buffer = sample.get_buffer()
            ok, info = buffer.map(Gst.MapFlags.READ)
            if not ok:
                raise SourceError(f"{self.name}: could not map a buffer")
            try:
                # One copy out of the GStreamer buffer, which is recycled once unmapped.
                data = np.frombuffer(info.data, np.uint8).copy()
            finally:
                buffer.unmap(info)
            return _shape(data, self.format, width, height)
        return None

    def _check_bus(self) -> None:
        message = self._pipeline.get_bus().pop_filtered(self._Gst.MessageType.ERROR)
        if message is not None:
            error, debug = message.parse_error()
            raise SourceError(f"{self.name}: {error.message} ({debug})")

    def _release(self) -> None:
        if self._pipeline is not None:
            self._pipeline.set_state(self._Gst.State.NULL)
            self._pipeline = None


def _shape(data: np.ndarray, format: str, width: int, height: int) -> np.ndarray:
    """A frame array from a tightly packed buffer (GStreamer pads rows to 4 bytes: strided views)."""
    if format in ("nv12", "i420"):
        if data.size < width * height * 3 // 2:
            raise SourceError(
                f"a {width}x{height} {format} buffer needs {width * height * 3 // 2} bytes, got {data.size}"
            )
        return data[: width * height * 3 // 2].reshape(height * 3 // 2, width)
    channels = {"bgr": 3, "rgb": 3, "gray": 1, "yuyv": 2}[format]
    stride = data.size // height
    if stride < width * channels:
        raise SourceError(f"a {width}x{height} {format} buffer of {data.size} bytes is too small")
    rows = data[: stride * height].reshape(height, stride)[:, : width * channels]
    return rows.reshape(height, width, channels) if channels > 1 else rows
