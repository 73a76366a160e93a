"""GStreamer test, file and RTSP pipelines (an RTSP server on loopback, in the test): run where
GStreamer is installed, skipped where PyGObject is not.

Debian packages: python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
gstreamer1.0-plugins-base gstreamer1.0-plugins-good, and gir1.2-gst-rtsp-server-1.0 for the
RTSP server; tools/install_gstreamer.sh installs them and makes PyGObject importable in the venv.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import edgeinf.sources as sources
from edgeinf.sources import SourceEnded, SourceError

gi = pytest.importorskip("gi", reason="PyGObject / GStreamer not installed")


def _require(name: str, version: str = "1.0"):
    try:
        gi.require_version(name, version)
    except ValueError:
        pytest.skip(f"GStreamer typelib {name}-{version} not installed")


def test_file_through_a_gstreamer_pipeline_matches_the_frame_count(clip):
    _require("Gst")
    with sources.open(f"gst:filesrc location={clip} ! decodebin", format="i420", stall_timeout_s=20) as source:
        frames = list(source)
    # drop=true may drop frames a slow reader did not take; the last one is always delivered
    assert 1 <= len(frames) <= 24
    assert all(f.format == "i420" and (f.width, f.height) == (160, 120) for f in frames)


@pytest.fixture
def rtsp_url():
    _require("Gst")
    _require("GstRtspServer")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service("0")  # any free port
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true ! video/x-raw,width=64,height=48,framerate=10/1 ! rtpvrawpay name=pay0 )"
    )
    factory.set_shared(True)
    server.get_mount_points().add_factory("/test", factory)
    context = GLib.MainContext()
    source_id = server.attach(context)
    loop = GLib.MainLoop(context)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    yield f"rtsp://127.0.0.1:{server.get_bound_port()}/test"
    loop.quit()
    thread.join(5)
    context.find_source_by_id(source_id).destroy()


def test_rtsp_stream_from_a_local_server_through_gstreamer(rtsp_url):
    with sources.open(f"gst:rtspsrc location={rtsp_url} latency=0 ! decodebin", stall_timeout_s=20) as source:
        frames = [source.read() for _ in range(3)]
    assert [f.data.shape for f in frames] == [(48, 64, 3)] * 3
    assert frames[0].seq < frames[1].seq < frames[2].seq


@pytest.mark.parametrize("width", [160, 90])  # 90: GStreamer pads the rows of each plane to 4 bytes
def test_test_pipeline_frames_in_yuv_agree_with_bgr(width):
    cv2 = pytest.importorskip("cv2")
    _require("Gst")
    frames = {}
    for format in ("bgr", "i420", "nv12"):
        spec = f"gst:videotestsrc num-buffers=2 pattern=smpte ! video/x-raw,width={width},height=30"
        with sources.open(spec, format=format, stall_timeout_s=20) as source:
            frames[format] = source.read()
    bgr = frames["bgr"].data.astype(np.int16)
    assert frames["bgr"].data.shape == (30, width, 3) and frames["i420"].data.shape == (45, width)
    for format, code in (("i420", cv2.COLOR_YUV2BGR_I420), ("nv12", cv2.COLOR_YUV2BGR_NV12)):
        converted = cv2.cvtColor(frames[format].data, code).astype(np.int16)
        # The same colour bars: only conversion rounding and chroma edges differ (misread
        # planes give a mean difference above 100).
        assert np.abs(converted - bgr).mean() < 20, format


def test_a_slow_reader_of_a_live_pipeline_gets_the_newest_frame():
    _require("Gst")
    spec = "gst:videotestsrc is-live=true ! video/x-raw,width=64,height=48,framerate=50/1"
    with sources.open(spec, stall_timeout_s=20) as source:
        frames = []
        for _ in range(3):
            frames.append(source.read())
            time.sleep(0.2)  # ten source periods: the frames in between are replaced, not queued
        stats = source.stats
    assert all(b.seq - a.seq > 1 for a, b in zip(frames, frames[1:]))
    assert stats.delivered == 3 and stats.dropped >= 1


def test_a_pipeline_that_ends_stops_the_iteration():
    _require("Gst")
    with sources.open("gst:videotestsrc num-buffers=5 ! video/x-raw,width=32,height=24", stall_timeout_s=20) as source:
        frames = list(source)
        with pytest.raises(SourceEnded):
            source.read()
    assert 1 <= len(frames) <= 5 and frames[-1].data.shape == (24, 32, 3)


def test_an_unknown_element_is_a_clear_error():
    _require("Gst")
    with pytest.raises(SourceError, match="GStreamer cannot build .*no_such_element"):
        sources.open("gst:no_such_element ! videoconvert").start()


def test_a_missing_file_is_a_clear_error(tmp_path):
    _require("Gst")
    missing = tmp_path / "missing.avi"
    source = sources.open(f"gst:filesrc location={missing} ! decodebin", stall_timeout_s=20)
    with pytest.raises(SourceError) as caught, source:
        source.read()
    assert not isinstance(caught.value, sources.SourceStalled)  # the bus error, not a timeout
    assert "missing.avi" in str(caught.value) and "not found" in str(caught.value).lower()


def test_rtsp_without_a_server_is_a_clear_error():
    _require("Gst")
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = sources.open(f"gst:rtspsrc location=rtsp://127.0.0.1:{port}/none ! decodebin", stall_timeout_s=20)
    with pytest.raises(SourceError) as caught, source:
        source.read()
    assert not isinstance(caught.value, sources.SourceStalled)
