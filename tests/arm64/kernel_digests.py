"""Fixed-seed results of the integer-exact native kernels, as one sha256 per case and kernel path.

The kernels promise bit-exact integer results on every path (scalar, AVX2, NEON, NEON with
dot product), so these digests must be equal across paths on one machine and across
machines: the x86 host and the emulated (or real) Pi. Run as a script it prints JSON::

    {"machine": "x86_64", "isas": ["scalar", "avx2"], "cases": {"<case>": {"<isa>": "<sha256>"}}}

A case is a function of a seeded generator that calls one kernel and returns its outputs
(numpy arrays). Inputs include the edge values the kernels promise to handle (extremes,
ties, tails shorter than a vector), so a difference shows up in the digest.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Callable

import numpy as np

from edgeinf import kernels

SEED = 20261130
CASES: dict[str, Callable[[np.random.Generator], object]] = {}


def case(name: str):
    """Register a digest case under ``name``."""

    def register(fn):
        CASES[name] = fn
        return fn

    return register


def as_outputs(value) -> list[np.ndarray]:
    """A case's result as a flat list of contiguous arrays."""
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in as_outputs(item)]
    return [np.ascontiguousarray(value)]


def digest_of(value) -> str:
    """sha256 over dtype, shape and bytes of each output array."""
    digest = hashlib.sha256()
    for array in as_outputs(value):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def run_case(name: str, isa: str):
    """The outputs of one case on one kernel path."""
    with kernels.use_isa(isa):
        return CASES[name](np.random.default_rng(SEED))


def digests(isas: list[str] | None = None) -> dict:
    isas = isas or kernels.supported_isas()
    return {
        "machine": platform.machine(),
        "isas": isas,
        "cases": {name: {isa: digest_of(run_case(name, isa)) for isa in isas} for name in sorted(CASES)},
    }


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    """Where two outputs first differ, for a mismatch message."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    index = int(np.flatnonzero(a.ravel() != b.ravel())[0])
    return f"first difference at flat index {index}: {a.ravel()[index]!r} vs {b.ravel()[index]!r}"


if __name__ == "__main__":
    json.dump(digests(), sys.stdout, indent=1, sort_keys=True)
    print()
