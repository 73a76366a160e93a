"""``tegrastats`` lines of JetPack 4 (``POM_5V_IN 4122/3107``) and 5/6 (``VDD_IN 3913mW/3922mW``).

Direct sysfs reads (`jetson.jetson_rails`) are cheaper and do not drift with the text
format; this parser is the fallback for systems where the rails are not exposed.
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from ...errors import SensorError
from .base import Clock, PowerSample
from .jetson import choose_total

log = logging.getLogger(__name__)

# "<RAIL> <now>[mW]/<avg>[mW]"; the \b after the numbers keeps "RAM 1501/3956MB" out.
_RAIL = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?\b")
_TEMP = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")


@dataclass(frozen=True)
class TegrastatsLine:
    """One parsed line: rails as (now_mw, average_mw) and temperatures in m°C."""

    rails_mw: dict[str, tuple[int, int]] = field(default_factory=dict)
    temps_mc: dict[str, int] = field(default_factory=dict)

    def total_mw(self) -> float:
        """Board input power by the rule of `jetson.choose_total`.

        Raises:
            SensorError: the line has no rails, or no rule says which rails are the total.
        """
        rule = choose_total(list(self.rails_mw))
        if rule is None:
            raise SensorError(f"tegrastats: no board-total rule for rails {sorted(self.rails_mw) or 'none'}")
        return float(sum(self.rails_mw[name][0] for name in rule.rails))


def parse_tegrastats(line: str) -> TegrastatsLine:
    """Parses one line of either format.

    >>> parse_tegrastats("RAM 1/2MB POM_5V_IN 4122/3107 CPU@44C").rails_mw
    {'POM_5V_IN': (4122, 3107)}
    """
    rails = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _RAIL.finditer(line)}
    # Memory and swap use the same "<name> <used>/<total>" shape only with an MB/kB suffix,
    # which the pattern refuses; drop names that are never rails, to be safe.
    for not_rail in ("RAM", "SWAP", "IRAM", "lfb", "cached"):
        rails.pop(not_rail, None)
    temps = {m.group(1): round(float(m.group(2)) * 1000) for m in _TEMP.finditer(line)}
    return TegrastatsLine(rails, temps)


class TegrastatsSensor:
    """Runs ``tegrastats --interval <ms>`` and returns the board total of its latest line.

    Args:
        command: the executable (a stub that replays recorded lines in tests).
        interval_ms: tegrastats' own sampling interval.
        clock: monotonic seconds.
        first_line_timeout_s: how long `read` waits for the first line.
    """

    def __init__(
        self,
        command: str = "tegrastats",
        interval_ms: int = 1000,
        clock: Clock = time.monotonic,
        first_line_timeout_s: float = 5.0,
    ):
        self.command = [command, "--interval", str(interval_ms)]
        self.interval_s = interval_ms / 1000.0
        self.clock = clock
        self.first_line_timeout_s = first_line_timeout_s
        self.name = "tegrastats"
        self._latest: Optional[tuple[float, TegrastatsLine]] = None
        self._got_line = threading.Event()
        self._lock = threading.Lock()
        self._process: Optional[subprocess.Popen] = None
        self._thread: Optional[threading.Thread] = None

    def _start(self) -> None:
        try:
            self._process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, encoding="ascii", errors="replace"
            )
        except OSError as exc:
            raise SensorError(f"{self.command[0]}: cannot start ({exc.strerror})") from None
        self._thread = threading.Thread(target=self._pump, name="tegrastats-reader", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            parsed = parse_tegrastats(line)
            if parsed.rails_mw:
                with self._lock:
                    self._latest = (self.clock(), parsed)
                self._got_line.set()

    def latest(self) -> tuple[float, TegrastatsLine]:
        if self._process is None:
            self._start()
        if not self._got_line.wait(self.first_line_timeout_s):
            raise SensorError(f"tegrastats printed no power line within {self.first_line_timeout_s} s")
        with self._lock:
            assert self._latest is not None
            when, line = self._latest
        stale_after = 3 * self.interval_s + 1.0
        if self.clock() - when > stale_after:
            state = "exited" if self._process and self._process.poll() is not None else "silent"
            raise SensorError(f"tegrastats {state}: last line {self.clock() - when:.1f} s ago")
        return when, line

    def read(self) -> PowerSample:
        when, line = self.latest()
        return PowerSample(when, line.total_mw(), self.name)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
