"""Rate limits: a token bucket per API key.

The event loop is the only caller, so no lock is needed; the clock is injected so the
arithmetic is tested without sleeping.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_TRACKED_KEYS = 10000
"""Buckets kept at most (clients without keys are tracked by address: bound the memory)."""


class TokenBucket:
    """``burst`` tokens, refilled at ``rate_per_s``; a request takes one."""

    __slots__ = ("rate_per_s", "burst", "tokens", "stamp")

    def __init__(self, rate_per_s: float, burst: int, now: float):
        self.rate_per_s = rate_per_s
        self.burst = max(1, burst)
        self.tokens = float(self.burst)
        self.stamp = now

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until the next one."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate_per_s)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate_per_s


class RateLimiter:
    """One `TokenBucket` per key; ``rate_per_s <= 0`` lets everything through."""

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def retry_after(self, key: str) -> int:
        """0 when ``key`` may go ahead, else whole seconds to wait (for ``Retry-After``)."""
        if self.rate_per_s <= 0:
            return 0
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate_per_s, self.burst, now)
            if len(self._buckets) > MAX_TRACKED_KEYS:
                self._buckets.popitem(last=False)  # the longest unseen key starts afresh
        else:
            self._buckets.move_to_end(key)
        wait = bucket.take(now)
        return 0 if wait == 0.0 else max(1, math.ceil(wait))
