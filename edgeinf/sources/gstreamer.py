"""Any GStreamer pipeline (V4L2, RTSP, files, test sources) through an appsink.

The appsink keeps one buffer and drops older ones (``drop=true max-buffers=1``), so a
slow reader never sees a queue of stale frames. Uses PyGObject (``python3-gi``,
``gir1.2-gstreamer-1.0`` and ``gir1.2-gst-plugins-base-1.0`` on Debian), imported when the
source opens. Buffers are read through their video layout (GstVideo's strides and plane
offsets): GStreamer pads rows to 4 bytes, so a 90-pixel-wide I420 frame has 92-byte luma
rows and 48-byte chroma rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Source, SourceError

if TYPE_CHECKING:
    from gi.repository import Gst

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
        self._pipeline: Gst.Pipeline | None = None
        self._sink: Gst.Element | None = None
        super().__init__(f"gstreamer: {description}", **kwargs)

    def _open(self) -> None:
        try:
            import gi

            gi.require_version("Gst", "1.0")
            gi.require_version("GstVideo", "1.0")
            from gi.repository import Gst, GstVideo
        except (ImportError, ValueError):
            raise SourceError(
                "GStreamer sources need PyGObject and GStreamer: apt install python3-gi gir1.2-gstreamer-1.0 "
                "gir1.2-gst-plugins-base-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good "
                "(a venv: tools/install_gstreamer.sh links or builds PyGObject into it)"
            ) from None
        self._GstVideo = GstVideo
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
            message = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
            pipeline.set_state(Gst.State.NULL)
            why = f"{message.parse_error()[0].message}" if message is not None else "missing device or plugin?"
            raise SourceError(f"GStreamer could not start {self.description!r}: {why}")
        self._pipeline = pipeline

    def _grab(self) -> np.ndarray | None:
        Gst, sink = self._Gst, self._sink
        assert sink is not None  # _open set it before the capture thread started
        while not self._stop.is_set():
            sample = sink.emit("try-pull-sample", 100 * Gst.MSECOND)
            if sample is None:
                if sink.get_property("eos"):
                    return None
                self._check_bus()
                continue
            layout = self._GstVideo.VideoInfo.new_from_caps(sample.get_caps())
            if layout is None:
                raise SourceError(f"{self.name}: the sink's caps are not raw video: {sample.get_caps().to_string()}")
            buffer = sample.get_buffer()
            ok, info = buffer.map(Gst.MapFlags.READ)
            if not ok:
                raise SourceError(f"{self.name}: could not map a buffer")
            try:
                # One copy out of the GStreamer buffer, which is recycled once unmapped.
                data = np.frombuffer(info.data, np.uint8).copy()
            finally:
                buffer.unmap(info)
            planes = [(int(layout.offset[i]), int(layout.stride[i])) for i in range(layout.finfo.n_planes)]
            return _frame(data, self.format, int(layout.width), int(layout.height), planes)
        return None

    def _check_bus(self) -> None:
        assert self._pipeline is not None  # _open set it before the capture thread started
        message = self._pipeline.get_bus().pop_filtered(self._Gst.MessageType.ERROR)
        if message is not None:
            error, debug = message.parse_error()
            raise SourceError(f"{self.name}: {error.message} ({debug})")

    def _release(self) -> None:
        if self._pipeline is not None:
            self._pipeline.set_state(self._Gst.State.NULL)
            self._pipeline = None


def _frame(data: np.ndarray, format: str, width: int, height: int, planes: list[tuple[int, int]]) -> np.ndarray:
    """A frame array from a buffer whose planes start at ``offset`` with rows ``stride`` bytes apart.

    Packed formats keep their padded rows (a strided view); YUV 4:2:0 planes are packed
    into the (H * 3 / 2, W) layout unless they already are.
    """
    if format in ("nv12", "i420"):
        if width % 2 or height % 2:
            raise SourceError(f"a {format} frame needs an even width and height, got {width}x{height}")
        chroma = [(height // 2, width)] if format == "nv12" else [(height // 2, width // 2)] * 2
        luma = _plane(data, planes[0], height, width)
        chroma_planes = [_plane(data, plane, h, w) for plane, (h, w) in zip(planes[1:], chroma)]
        tight = np.empty((height * 3 // 2, width), np.uint8)
        tight[:height] = luma
        flat = tight[height:].reshape(-1)
        start = 0
        for plane in chroma_planes:
            flat[start : start + plane.size] = plane.reshape(-1)
            start += plane.size
        return tight
    channels = {"bgr": 3, "rgb": 3, "gray": 1, "yuyv": 2}[format]
    rows = _plane(data, planes[0], height, width * channels)
    return rows.reshape(height, width, channels) if channels > 1 else rows


def _plane(data: np.ndarray, plane: tuple[int, int], height: int, row_bytes: int) -> np.ndarray:
    """``height`` rows of ``row_bytes`` from ``data``, the rows ``stride`` bytes apart from ``offset``."""
    offset, stride = plane
    if stride < row_bytes or offset < 0 or offset + stride * (height - 1) + row_bytes > data.size:
        raise SourceError(
            f"a video buffer of {data.size} bytes cannot hold {height} rows of {row_bytes} bytes "
            f"{stride} bytes apart from byte {offset}"
        )
    return np.lib.stride_tricks.as_strided(data[offset:], (height, row_bytes), (stride, 1))
