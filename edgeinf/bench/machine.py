"""Where a figure was measured: date, CPU, cores, ISA, board, load, stolen CPU time and package versions."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's name from /proc/cpuinfo, with the x86 family and model numbers.

    A VM's name can hide the core: "AMD EPYC" has been Zen 1 (family 23, model 1), with
    its 256-bit operations split in two, and Zen 3 (family 25), which differ about 4x in
    int8 throughput per core, so every ratio in a report depends on which one ran it.
    """
    from .. import board

    blocks, board_fields = board._parse_cpuinfo(board._read_text(Path(cpuinfo)))
    fields = {**board_fields, **(blocks[0] if blocks else {})}  # a Pi's "Hardware" is board-wide
    name = next((fields[k] for k in ("model name", "hardware", "cpu model") if fields.get(k)), "")
    if not name:
        return platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def _load_average() -> float | None:
    # Other work on a shared machine slows every contender; the figure says how busy it was.
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


STOLEN_WARNING_SHARE = 0.02  # above it, a VM's timings drift with its neighbours' load


class StolenTime:
    """The share of this machine's CPU time that its hypervisor ran other guests on, since start.

    Linux counts it as ``steal`` in /proc/stat. Inside a VM on a shared host (a cloud
    instance, a CI runner) a busy neighbour takes cores away mid-run: every contender
    slows down and latency tails grow, more the longer a run keeps the cores busy.
    On bare metal, a Pi or a Jetson it stays 0.

    >>> watch = StolenTime()
    >>> share = watch.share()  # None where /proc/stat is missing
    """

    def __init__(self, stat: str | Path = "/proc/stat"):
        self.stat = Path(stat)
        self.start = self._read()

    def _read(self) -> tuple[int, int] | None:
        """(steal, total) jiffies over all CPUs; None without a readable /proc/stat."""
        try:
            first = self.stat.read_text().split("\n", 1)[0].split()
        except OSError:
            return None
        if not first or first[0] != "cpu" or len(first) < 9:
            return None
        jiffies = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
        return jiffies[7], sum(jiffies)

    def share(self) -> float | None:
        """Stolen jiffies over all jiffies since the start (0.0 when no time passed)."""
        now = self._read()
        if self.start is None or now is None:
            return None
        total = now[1] - self.start[1]
        return (now[0] - self.start[0]) / total if total > 0 else 0.0

    def restart(self) -> None:
        self.start = self._read()


_since_import = StolenTime()  # a benchmark imports edgeinf.bench as it starts: its whole run


def stolen_warning(share: float | None) -> str | None:
    """A sentence for a report when the hypervisor took enough CPU time to skew it."""
    if share is None or share < STOLEN_WARNING_SHARE:
        return None
    return f"the hypervisor gave {share:.0%} of this VM's CPU time to other guests (steal): timings are slow and noisy"


def environment() -> dict:
    """Date, machine and versions, as every benchmark report records them (no runtime is imported)."""
    from .. import __version__, board
    from ..model import default_threads

    try:
        from ..isa import active_isa

        isa = active_isa()
    except Exception:  # the native module is not built: report it rather than fail
        isa = "unknown (edgeinf._C not built)"
    conditions = board.conditions()  # governor, clocks, temperature, throttling: what skews a run
    stolen = _since_import.share()
    warning = stolen_warning(stolen)
    if warning:
        conditions["warnings"].append(warning)
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "arch": platform.machine(),
            "cpu": cpu_model(),
            "cores_usable": default_threads(),
            "isa": isa,
            "os": f"{platform.system()} {platform.release()}",
            "board": board.detect().as_dict(),  # "emulated": true marks a run under qemu: not the board's speed
            "conditions": conditions,
            "load_avg_1m": _load_average(),
            "cpu_stolen_share": None if stolen is None else round(stolen, 4),  # since edgeinf.bench was imported
        },
        "versions": {
            "edgeinf": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            **{
                dist: _version(dist)
                for dist in ("ai-edge-litert", "tflite-runtime", "ncnn", "opencv-python-headless", "pillow")
            },
        },
    }
