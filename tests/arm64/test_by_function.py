"""tools/arm64/by_function.py: counted instructions attributed to the extension's functions
(by its symbol table) or to the library that maps them, each part's cycles by its own bound."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

if platform.machine() != "x86_64":  # a host-side tool, as estimate.py
    pytest.skip(f"reads an x86_64 host's estimate; this is {platform.machine()}", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "arm64"))
estimate = pytest.importorskip("estimate")
by_function = pytest.importorskip("by_function")

SO = "/stage/edgeinf/_C.cpython-311-aarch64-linux-gnu.so"
MAPPINGS = [
    estimate.Mapping(0x10000, 0x20000, 0x0, SO),
    estimate.Mapping(0x40000, 0x50000, 0x1000, "/usr/lib/libc.so.6"),
]
SYMBOLS = [(0x100, "qs8_add__neon"), (0x400, "channel_lookup__neon")]


def test_instructions_go_to_the_function_or_library_that_holds_them():
    insns = [
        estimate.Insn(0x10100, 1000, 0, "sqrdmulh v0.4s, v1.4s, v2.4s"),  # qs8_add__neon
        estimate.Insn(0x10104, 1000, 0, "sqrdmulh v4.4s, v5.4s, v2.4s"),
        estimate.Insn(0x10400, 300, 0, "ldrb w1, [x2, x3]"),  # channel_lookup__neon
        estimate.Insn(0x40010, 50, 0, "ldp x0, x1, [sp]"),  # libc
        estimate.Insn(0x90000, 7, 0, "nop"),  # nowhere
    ]
    parts = by_function.by_function(insns, MAPPINGS, Path(SO).name, SYMBOLS, "cortex-a76")
    assert [(p.name, p.instructions) for p in parts] == [
        ("qs8_add__neon", 2000),
        ("channel_lookup__neon", 300),
        ("libc.so.6", 50),
        ("(unmapped)", 7),
    ]
    # two multiplies on the A76's single multiply pipe (its two vector pipes would take half)
    assert parts[0].cycles == pytest.approx(2000) and parts[0].bound == "multiply"
    assert parts[1].bound == "memory" and parts[1].cycles == pytest.approx(150)
