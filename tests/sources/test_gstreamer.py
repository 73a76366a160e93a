"""GStreamer file pipelines and RTSP from a local GStreamer RTSP server: run where GStreamer is installed.

Debian packages: python3-gi gir1.2-gstreamer-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good
(and gir1.2-gst-rtsp-server-1.0 for the RTSP server); the venv sees them through PyGObject.
"""

from __future__ import annotations

import threading

import pytest

import edgeinf.sources as sources

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
        "( videotestsrc is-live=true ! video/x-raw,width=64,height=48,framerate=10/1 ! jpegenc ! rtpjpegpay name=pay0 )"
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
