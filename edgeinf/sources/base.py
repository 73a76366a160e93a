"""Frames, the newest-frame mailbox and the `Source` base class.

A source runs one capture thread that pulls frames from the device as fast as the device
delivers them and keeps only the newest one. A slow consumer therefore never works on a
stale frame: `Source.read` returns the newest frame it has not seen, and every frame that
was overwritten before anyone read it is counted in ``stats.dropped``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import EdgeInfError

log = logging.getLogger(__name__)

FORMATS = ("bgr", "rgb", "gray", "nv12", "nv21", "i420", "yuyv")
"""Frame formats, as `edgeinf.preprocess` names them: YUV 4:2:0 frames are (H * 3 / 2, W) arrays."""


class SourceError(EdgeInfError, OSError):
    """A frame source cannot be opened or read: missing device or file, unsupported format."""


class SourceEnded(SourceError):
    """The stream ended (end of file, camera unplugged) and every frame has been read."""


class SourceStalled(SourceError):
    """No new frame arrived within the source's ``stall_timeout_s``."""


@dataclass(frozen=True)
class Frame:
    """One frame as the device delivered it.

    Attributes:
        data: the pixels in ``format``, rows possibly padded (``stride`` bytes apart):
            (H, W, 3) for bgr/rgb, (H, W) for gray, (H * 3 / 2, W) for nv12/nv21/i420,
            (H, W, 2) for yuyv. Hand it to ``model.run_image(frame.data, frame.format)``.
        format: one of `FORMATS`.
        seq: the source's sequence number: every frame it captured counts, read or not.
        timestamp_s: when the frame was captured, on the source's clock
            (``time.monotonic`` unless one was injected); for a file or folder read as
            fast as its reader, when the reader took it.
    """

    data: np.ndarray
    format: str
    seq: int
    timestamp_s: float

    @property
    def width(self) -> int:
        return int(self.data.shape[1])

    @property
    def height(self) -> int:
        rows = int(self.data.shape[0])
        return rows * 2 // 3 if self.format in ("nv12", "nv21", "i420") else rows

    @property
    def stride(self) -> int:
        """Bytes from one row to the next."""
        return int(self.data.strides[0])


@dataclass(frozen=True)
class SourceStats:
    """Counters of a source.

    Attributes:
        captured: frames the device delivered.
        delivered: frames `Source.read` returned.
        dropped: frames replaced by a newer one before anyone read them.
    """

    captured: int
    delivered: int
    dropped: int


class LatestFrame:
    """A one-frame mailbox: `put` replaces the frame waiting, `take` waits for a newer one.

    With ``keep_all`` the producer waits until the frame waiting was taken instead of
    replacing it (a file read as fast as its consumer, with no frame skipped).
    """

    def __init__(self, keep_all: bool = False):
        self._cond = threading.Condition()
        self._frame: Frame | None = None
        self._taken = True
        self._end: BaseException | None = None
        self._keep_all = keep_all
        self.captured = 0
        self.delivered = 0
        self.dropped = 0

    def put(self, frame: Frame) -> bool:
        """Offer a frame; False when the mailbox was closed (the producer should stop)."""
        with self._cond:
            while self._keep_all and not self._taken and self._end is None:
                self._cond.wait()
            if self._end is not None:
                return False
            if not self._taken:
                self.dropped += 1
            self._frame, self._taken = frame, False
            self.captured += 1
            self._cond.notify_all()
            return True

    def take(self, timeout_s: float | None) -> Frame:
        """The newest frame not taken yet, waiting up to ``timeout_s`` for one.

        Raises:
            SourceEnded / SourceError: the producer finished or failed and nothing is waiting.
            SourceStalled: nothing new within ``timeout_s``.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: not self._taken or self._end is not None, timeout_s):
                raise SourceStalled(f"no new frame within {timeout_s} s")
            if self._taken:
                assert self._end is not None  # the wait ended on the producer closing
                raise self._end
            assert self._frame is not None  # a frame not taken was put
            self._taken = True
            self.delivered += 1
            self._cond.notify_all()
            return self._frame

    def close(self, reason: BaseException) -> None:
        """No more frames: wake every waiter; a frame already waiting can still be taken."""
        with self._cond:
            if self._end is None:
                self._end = reason
            self._cond.notify_all()


class Source:
    """Base class of frame sources: a capture thread and a `LatestFrame` mailbox.

    Subclasses implement `_open` (raise `SourceError` for a missing device or an
    unsupported format), `_grab` (the next frame's pixels, or None at the end of the
    stream) and `_release`. Sources are context managers; iterate to read until the end.

    Args:
        name: what the source is, for messages.
        stall_timeout_s: `read` raises `SourceStalled` when no frame came for this long.
        keep_all: never replace an unread frame (files and folders read as fast as their
            consumer); cameras and streams replace it (latest-frame semantics).
        clock: the timestamp clock.

    >>> with edgeinf.sources.open("clip.mp4") as source:      # doctest: +SKIP
    ...     for frame in source:
    ...         faces = detector.detect(frame.data, frame.format)
    """

    format = "bgr"

    def __init__(
        self,
        name: str,
        *,
        stall_timeout_s: float = 5.0,
        keep_all: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not stall_timeout_s > 0:
            raise SourceError(f"stall_timeout_s must be positive, got {stall_timeout_s}")
        self.name = name
        self.stall_timeout_s = stall_timeout_s
        self.clock = clock
        self._keep_all = keep_all
        self._mailbox = LatestFrame(keep_all=keep_all)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._seq = 0

    # -- subclass hooks ----------------------------------------------------------------
    def _open(self) -> None:
        """Open the device; raise `SourceError` naming what is missing or unsupported."""

    def _grab(self) -> np.ndarray | None:
        raise NotImplementedError

    def _release(self) -> None:
        """Close the device (called on the capture thread)."""

    # -- public ------------------------------------------------------------------------
    def start(self) -> Source:
        """Open the device and start capturing (done by `read` and ``with`` if not yet)."""
        if self._thread is None:
            self._open()
            self._thread = threading.Thread(target=self._capture, name=f"edgeinf-source:{self.name}", daemon=True)
            self._thread.start()
        return self

    def read(self, timeout_s: float | None = None) -> Frame:
        """The newest frame not read yet.

        Args:
            timeout_s: how long to wait for a new frame; default ``stall_timeout_s``.

        Raises:
            SourceEnded: the stream ended and every frame was read.
            SourceStalled: no new frame within the timeout.
            SourceError: the device failed.
        """
        self.start()
        frame = self._mailbox.take(self.stall_timeout_s if timeout_s is None else timeout_s)
        if self._keep_all:  # a file read ahead: its frame is "captured" when the reader takes it
            frame = dataclasses.replace(frame, timestamp_s=self.clock())
        return frame

    @property
    def stats(self) -> SourceStats:
        box = self._mailbox
        return SourceStats(captured=box.captured, delivered=box.delivered, dropped=box.dropped)

    def close(self) -> None:
        """Stop capturing and release the device. Idempotent."""
        self._stop.set()
        self._mailbox.close(SourceEnded(f"{self.name} was closed"))
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.stall_timeout_s)
            if thread.is_alive():
                log.warning("the capture thread of %s is still blocked in the device after close()", self.name)

    def __iter__(self):
        while True:
            try:
                yield self.read()
            except SourceEnded:
                return

    def __enter__(self) -> Source:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<edgeinf.sources.{type(self).__name__} {self.name}>"

    # -- the capture thread ------------------------------------------------------------
    def _capture(self) -> None:
        end: BaseException = SourceEnded(f"{self.name} ended")
        try:
            while not self._stop.is_set():
                data = self._grab()
                if data is None:
                    break
                frame = Frame(data, self.format, self._seq, self.clock())
                self._seq += 1
                if not self._mailbox.put(frame):
                    break
        except SourceError as exc:
            end = exc
        except Exception as exc:  # the device's own exception becomes the reader's error
            end = SourceError(f"{self.name} failed: {type(exc).__name__}: {exc}")
            end.__cause__ = exc
        finally:
            try:
                self._release()
            finally:
                self._mailbox.close(end)
