"""A circuit breaker: stop calling a stage that keeps failing, try it again later."""

from __future__ import annotations

import time
from typing import Callable

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class CircuitBreaker:
    """Opens after ``failures`` consecutive failures; after ``reset_s`` lets one trial call through.

    A trial that succeeds closes the breaker, one that fails opens it for another
    ``reset_s``. Not thread-safe on its own: the pipeline calls it under its lock.

    Args:
        failures: consecutive failures (errors or timeouts) that open the breaker.
        reset_s: how long it stays open before a trial.
        clock: injected for tests.
    """

    def __init__(self, failures: int = 3, reset_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        if not isinstance(failures, int) or failures < 1:
            raise ValueError(f"failures must be an integer >= 1, got {failures!r}")
        if not reset_s >= 0:
            raise ValueError(f"reset_s must be >= 0, got {reset_s!r}")
        self.failures = failures
        self.reset_s = reset_s
        self.clock = clock
        self.state = CLOSED
        self.consecutive_failures = 0
        self.opened = 0  # times the breaker opened
        self._opened_at = 0.0
        self._trial_out = False

    def allow(self) -> bool:
        """May a call go through now? In the half-open state only one trial at a time does."""
        if self.state == CLOSED:
            return True
        if self.state == OPEN:
            if self.clock() - self._opened_at < self.reset_s:
                return False
            self.state = HALF_OPEN
            self._trial_out = False
        if self._trial_out:
            return False
        self._trial_out = True
        return True

    def release(self) -> None:
        """A call `allow` let through did not run (its frame was dropped): free the trial slot."""
        if self.state == HALF_OPEN:
            self._trial_out = False

    def record(self, ok: bool) -> None:
        """The outcome of a call that `allow` let through."""
        if ok:
            self.state = CLOSED
            self.consecutive_failures = 0
            self._trial_out = False
            return
        self.consecutive_failures += 1
        if self.state == HALF_OPEN or self.consecutive_failures >= self.failures:
            if self.state != OPEN:
                self.opened += 1
            self.state = OPEN
            self._opened_at = self.clock()
            self._trial_out = False
