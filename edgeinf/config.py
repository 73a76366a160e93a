"""Environment knobs, read in one place.

EDGEINF_ISA     force a kernel path: scalar | avx2 | neon | neondot (tests, debugging); read by
                the native module itself when it loads (csrc/dispatch.cc), so that it holds
                however edgeinf is imported
EDGEINF_CACHE   where fetched models are kept (default: $XDG_CACHE_HOME/edgeinf or ~/.cache/edgeinf)
EDGEINF_BACKENDS  backends load(backend="auto") prefers, comma separated, e.g. "edgeinf,tflite" to run
                .tflite files on the int8 engine; the default order (tflite, ncnn) follows them
EDGEINF_DEBUG   1: the `edgeinf` command prints the traceback of an error, not just its one-line message
"""

from __future__ import annotations

import os
from pathlib import Path


def forced_isa() -> str | None:
    return os.environ.get("EDGEINF_ISA") or None


def cache_dir() -> Path:
    explicit = os.environ.get("EDGEINF_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "edgeinf"


def backend_preference() -> tuple[str, ...]:
    """The backend names EDGEINF_BACKENDS lists, in order (empty when unset)."""
    raw = os.environ.get("EDGEINF_BACKENDS", "")
    return tuple(name.strip() for name in raw.split(",") if name.strip())


def debug() -> bool:
    return os.environ.get("EDGEINF_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
