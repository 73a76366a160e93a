"""Frame sources on real video made from the manifest's photo: files, folders, cameras, picamera2."""

from __future__ import annotations

import sys
import threading
import time
import types

import numpy as np
import pytest
from clips import pan_zoom_frames, photo_rgb

import edgeinf.sources as sources
from edgeinf.sources import Frame, LatestFrame, SourceEnded, SourceError, SourceStalled


def test_file_delivers_every_frame_in_order_when_not_realtime(clip):
    import cv2

    capture = cv2.VideoCapture(str(clip))
    expected = []
    while True:
        ok, image = capture.read()
        if not ok:
            break
        expected.append(image)
    with sources.open(clip) as source:
        frames = list(source)
    assert [f.seq for f in frames] == list(range(len(expected))) and len(expected) == 24
    assert all(f.format == "bgr" and (f.width, f.height) == (160, 120) for f in frames)
    for i, (frame, image) in enumerate(zip(frames, expected)):
        assert np.array_equal(frame.data, image), f"frame {i} differs from OpenCV's own decode"
    assert source.stats.dropped == 0 and source.stats.delivered == 24


def test_slow_reader_gets_the_newest_frame_and_drops_are_counted(clip):
    fps = 50.0
    period = 1.0 / fps
    ages, seqs, newest_at_read = [], [], []
    with sources.open(clip, realtime=True, fps=fps) as source:
        for frame in source:
            now = time.monotonic()
            ages.append(now - frame.timestamp_s)
            seqs.append(frame.seq)
            newest_at_read.append(source.stats.captured - 1)
            time.sleep(3 * period)  # a consumer three times slower than the camera
    stats = source.stats
    assert stats.captured == 24
    assert stats.dropped == stats.captured - stats.delivered > 0
    # Every frame read was the newest captured, or one behind when a capture raced the read.
    assert all(newest - seq <= 1 for seq, newest in zip(seqs, newest_at_read)), (seqs, newest_at_read)
    gaps = np.diff(seqs)
    assert gaps.mean() >= 1.5, f"a reader 3x slower than the source should skip frames, gaps {gaps}"
    # The frame processed is younger than one source period (median; the margin absorbs a busy machine).
    assert float(np.median(ages)) < period, f"median age {np.median(ages) * 1e3:.1f} ms vs period {period * 1e3} ms"


def test_mailbox_keeps_only_the_newest_and_reports_stall_and_end():
    box = LatestFrame()
    pixels = np.zeros((2, 2, 3), np.uint8)
    for seq in range(5):
        assert box.put(Frame(pixels, "bgr", seq, float(seq)))
    assert box.take(timeout_s=0).seq == 4
    assert (box.captured, box.delivered, box.dropped) == (5, 1, 4)
    with pytest.raises(SourceStalled, match="no new frame within 0.01 s"):
        box.take(timeout_s=0.01)
    box.put(Frame(pixels, "bgr", 5, 5.0))
    box.close(SourceEnded("camera unplugged"))
    assert box.take(timeout_s=0).seq == 5  # a frame waiting before the end is still delivered
    with pytest.raises(SourceEnded, match="unplugged"):
        box.take(timeout_s=0)
    assert not box.put(Frame(pixels, "bgr", 6, 6.0))


def test_keep_all_mailbox_makes_the_producer_wait_instead_of_dropping():
    box = LatestFrame(keep_all=True)
    pixels = np.zeros((2, 2), np.uint8)
    produced = []

    def produce():
        for seq in range(3):
            box.put(Frame(pixels, "gray", seq, 0.0))
            produced.append(seq)
        box.close(SourceEnded("done"))

    thread = threading.Thread(target=produce)
    thread.start()
    taken = [box.take(timeout_s=5).seq for _ in range(3)]
    thread.join(5)
    assert taken == [0, 1, 2] and box.dropped == 0


def test_a_stalled_device_raises_instead_of_blocking():
    release = threading.Event()

    class Frozen(sources.Source):
        def _grab(self):
            release.wait(5)  # a camera that stopped sending
            return None

    source = Frozen("frozen camera", stall_timeout_s=0.05)
    with pytest.raises(SourceStalled):
        source.read()
    release.set()
    source.close()


def test_device_exceptions_reach_the_reader_as_source_errors():
    class Broken(sources.Source):
        def _grab(self):
            raise OSError("USB disconnect")

    with Broken("usb camera") as source, pytest.raises(SourceError, match="usb camera failed: OSError: USB disconnect"):
        source.read()


def test_folder_yields_images_in_name_order(tmp_path):
    from PIL import Image

    rgb = photo_rgb()
    Image.fromarray(rgb).save(tmp_path / "a.png")
    Image.fromarray(rgb[:, ::-1].copy()).save(tmp_path / "b.png")
    (tmp_path / "notes.txt").write_text("not an image")
    with sources.open(tmp_path) as source:
        frames = list(source)
    assert [f.format for f in frames] == ["rgb", "rgb"]
    assert np.array_equal(frames[0].data, rgb) and np.array_equal(frames[1].data, rgb[:, ::-1])


@pytest.mark.parametrize(
    "spec, message",
    [
        ("/dev/video99", "no camera at /dev/video99"),
        (7, "could not open the camera 7"),
        ("missing.avi", "no source 'missing.avi'"),
    ],
)
def test_missing_devices_and_files_name_what_is_missing(spec, message):
    with pytest.raises(SourceError, match=message):
        sources.open(spec).start()


def test_empty_folder_and_undecodable_files_are_clear_errors(tmp_path):
    with pytest.raises(SourceError, match="no images"):
        sources.open(tmp_path).start()
    bad = tmp_path / "bad.avi"
    bad.write_bytes(b"RIFF" + bytes(range(256)) * 4)
    with pytest.raises(SourceError, match="could not open the video file"):
        sources.open(bad).start()
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(SourceError, match="cannot decode"):
        sources.open(tmp_path).start()


def test_gstreamer_without_pygobject_names_the_packages(monkeypatch):
    monkeypatch.setitem(sys.modules, "gi", None)  # import gi -> ImportError
    with pytest.raises(SourceError, match="python3-gi"):
        sources.open("gst:videotestsrc").start()


# -- picamera2, faked at its package boundary -------------------------------------------------


class _FakePicamera2:
    """The picamera2 calls the source makes, returning real I420 frames with padded rows."""

    instances: list = []
    padding = 32  # bytes of row padding the ISP adds

    def __init__(self, camera_num=0):
        self.frames = iter(self.i420_frames)
        self.shutter = threading.Semaphore(0)  # one release per frame: the test sets the camera's pace
        self.free_running = False
        self.started = self.closed = False
        self.config = None
        _FakePicamera2.instances.append(self)

    def create_video_configuration(self, main, lores):
        return {"main": main, "lores": lores}

    def configure(self, config):
        self.config = config

    def stream_configuration(self, name):
        width, _ = self.config[name]["size"]
        return {
            "size": self.config[name]["size"],
            "stride": width + self.padding,
            "format": self.config[name]["format"],
        }

    def start(self):
        self.started = True

    def capture_array(self, name):
        assert name == "lores" and self.started
        while not self.shutter.acquire(timeout=0.01) and not self.free_running:
            pass
        tight = next(self.frames, self.i420_frames[-1])
        width = self.config["lores"]["size"][0]
        height = tight.shape[0] * 2 // 3
        stride = width + self.padding
        flat = np.full(height * 3 // 2 * stride, 7, np.uint8)  # padding bytes the frame must not show
        flat[: height * stride].reshape(height, stride)[:, :width] = tight[:height]
        chroma = tight[height:].reshape(height, width // 2)
        flat[height * stride :].reshape(height, stride // 2)[:, : width // 2] = chroma
        self.last = flat.reshape(height * 3 // 2, stride)
        return self.last

    def stop(self):
        self.started = False

    def close(self):
        self.closed = True


@pytest.mark.parametrize("padding", [32, 0])
def test_picamera2_lores_yuv420_frames_are_repacked_from_padded_rows(monkeypatch, padding):
    import cv2

    monkeypatch.setattr(_FakePicamera2, "padding", padding)

    width, height = 160, 120
    tight = [cv2.cvtColor(f, cv2.COLOR_BGR2YUV_I420) for f in pan_zoom_frames(3, (width, height))]
    _FakePicamera2.i420_frames = tight
    _FakePicamera2.instances = []
    monkeypatch.setitem(sys.modules, "picamera2", types.SimpleNamespace(Picamera2=_FakePicamera2))
    frames = []
    with sources.open("picamera2", size=(width, height)) as source:
        for _ in range(3):
            _FakePicamera2.instances[0].shutter.release()
            frames.append(source.read())
            # Unpadded rows are handed over as they came (no copy); padded ones repacked once.
            assert np.shares_memory(frames[-1].data, _FakePicamera2.instances[0].last) == (padding == 0)
        _FakePicamera2.instances[0].free_running = True  # a camera keeps delivering until stopped
    assert [f.format for f in frames] == ["i420"] * 3
    for frame, expected in zip(frames, tight):
        assert (frame.width, frame.height) == (width, height)
        assert np.array_equal(frame.data, expected)
    camera = _FakePicamera2.instances[0]
    assert camera.config["lores"] == {"size": (width, height), "format": "YUV420"}
    assert camera.closed and not camera.started


def test_picamera2_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "picamera2", None)
    with pytest.raises(SourceError, match="python3-picamera2"):
        sources.open("picamera2").start()


def test_gstreamer_refuses_an_unsupported_format():
    with pytest.raises(SourceError, match="GStreamer frames can be"):
        sources.GStreamerSource("videotestsrc", format="rgba")


def test_gstreamer_test_pipeline_delivers_frames_when_installed():
    pytest.importorskip("gi", reason="PyGObject / GStreamer not installed (apt: python3-gi gir1.2-gstreamer-1.0)")
    with sources.open("gst:videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48", format="bgr") as source:
        frames = list(source)
    assert 1 <= len(frames) <= 5 and all(f.data.shape == (48, 64, 3) for f in frames)
