"""Which native kernel path runs, and a way to force one.

The native module picks the best path the CPU supports (cpuid on x86, HWCAP on
aarch64). ``EDGEINF_ISA`` forces a path for the whole process: the native module reads
it once when it loads, whichever edgeinf module imports it first, and an unknown or
unusable value fails that import with an ImportError naming the variable. ``use_isa``
forces a path for a block, which is how tests compare every variant with the scalar
reference.

>>> from edgeinf.isa import active_isa, supported_isas
>>> active_isa() in supported_isas()
True
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from . import _C

_switch_lock = threading.Lock()

# The x86 paths built on AVX2: a kernel without a variant of their own runs AVX2's (the
# VNNI paths add the GEMM and, on avx512vnni, a depthwise kernel with AVX2's channel tail).
AVX2_PATHS = frozenset({"avx2", "avx2vnni", "avx512vnni", "avx512amx", "avx2-emulated-vnni"})
# The paths with AVX-512 kernels: avx512amx runs the GEMM and convolutions on AMX tiles and
# everything else as avx512vnni does.
AVX512_PATHS = frozenset({"avx512vnni", "avx512amx"})


def active_isa() -> str:
    """The kernel path in use: ``scalar``, ``avx2``, ``avx2vnni``, ``avx512vnni``,
    ``avx512amx``, ``neon`` or ``neondot``.

    ``avx2vnni`` (AVX-VNNI) and ``avx512vnni`` (AVX-512 VNNI) run the int8 GEMM, fully
    connected and convolution with the VPDPBUSD dot-product instruction; ``avx512vnni`` also
    runs the depthwise convolution on zmm; every other kernel runs on AVX2. ``avx512amx``
    (AMX-INT8, Intel Xeons from Sapphire Rapids on) runs the GEMM, fully connected and the
    convolutions of several taps on AMX tiles (TDPBUSD), and the rest as ``avx512vnni``.
    """
    return _C.active_isa()


def supported_isas() -> list[str]:
    """Paths built into this package that this CPU can run, scalar first."""
    return list(_C.supported_isas())


def emulated_isas() -> list[str]:
    """Test paths this CPU can run that emulate an instruction it lacks exactly with ones it
    has: ``avx2-emulated-vnni`` is the ``avx2vnni`` path with VPDPBUSD done by AVX2. Never
    chosen by default nor listed by `supported_isas`; `use_isa` takes them, so tests run
    everything around the instruction on any AVX2 CPU."""
    return list(_C.emulated_isas())


def built_isas() -> list[str]:
    """Paths compiled into this package for its target architecture."""
    return list(_C.built_isas())


def cpu_features() -> dict[str, bool | str | None]:
    """CPU features that matter to the kernels (avx2, fma, neon, dotprod, ...).

    On aarch64 Linux also ``arm_core`` (``"cortex-a72"``; None where the core is not known)
    and ``arm_out_of_order``: the plain NEON GEMM picks its schedule by them.
    """
    return dict(_C.cpu_features())


def set_isa(name: str) -> str:
    """Force a kernel path for the whole process; returns the previous one.

    Raises:
        InputError: if ``name`` is unknown or not usable on this CPU.
    """
    return _C.set_isa(name)


@contextlib.contextmanager
def use_isa(name: str) -> Iterator[str]:
    """Run a block on one kernel path, then restore the previous one."""
    with _switch_lock:
        previous = _C.set_isa(name)
        try:
            yield name
        finally:
            _C.set_isa(previous)
