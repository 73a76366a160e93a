"""This process's resident memory, read from Linux /proc (a fallback elsewhere).

Standard library only: `edgeinf.load` measures its own peak with it at no import cost.
"""

from __future__ import annotations

import os
import sys


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _ru_maxrss_bytes()


def _ru_maxrss_bytes() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def reset_peak_rss() -> bool:
    """Restart the peak RSS count (Linux >= 4.0: ``5`` into /proc/self/clear_refs).

    Returns:
        True when the peak was reset; False when only the process-lifetime peak exists.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak RSS since the last `reset_peak_rss` (VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return _ru_maxrss_bytes()
