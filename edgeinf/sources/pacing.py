"""Pace a file or folder at a frame rate, so that it stands in for a camera."""

from __future__ import annotations

import threading
import time
from typing import Callable


class Pacer:
    """Wait until each frame's due time: ``start + n / fps`` on ``clock``.

    A reader that falls behind is not made to catch up with a burst: frames keep their
    schedule, as a camera's do.
    """

    def __init__(self, fps: float, stop: threading.Event, clock: Callable[[], float] = time.monotonic):
        self.period_s = 1.0 / fps
        self._stop = stop
        self._clock = clock
        self._next: float | None = None

    def wait(self) -> bool:
        """Sleep until the next frame is due; False when asked to stop meanwhile."""
        now = self._clock()
        if self._next is None:
            self._next = now
        delay = self._next - now
        self._next += self.period_s
        if delay > 0:
            return not self._stop.wait(delay)
        return not self._stop.is_set()
