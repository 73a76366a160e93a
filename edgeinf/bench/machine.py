"""Where a figure was measured: date, CPU, cores, ISA, board, load and package versions."""

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


def environment() -> dict:
    """Date, machine and versions, as every benchmark report records them (no runtime is imported)."""
    from .. import __version__, board
    from ..model import default_threads

    try:
        from ..isa import active_isa

        isa = active_isa()
    except Exception:  # the native module is not built: report it rather than fail
        isa = "unknown (edgeinf._C not built)"
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "arch": platform.machine(),
            "cpu": cpu_model(),
            "cores_usable": default_threads(),
            "isa": isa,
            "os": f"{platform.system()} {platform.release()}",
            "board": board.detect().as_dict(),  # "emulated": true marks a run under qemu: not the board's speed
            "conditions": board.conditions(),  # governor, clocks, temperature, throttling: what skews a run
            "load_avg_1m": _load_average(),
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
