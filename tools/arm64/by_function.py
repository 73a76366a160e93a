#!/usr/bin/env python3
"""Where an estimate's instructions go: counts and issue-limit cycles per function.

    python tools/arm64/estimate.py --models face_landmark --kernels gemm64 --keep counts/
    python tools/arm64/by_function.py counts/ [--profiles pi3,pi5] [--so build/arm64/lib/edgeinf/_C...so] [--top 12]

Reads the raw counts and manifests that ``estimate.py --keep`` leaves, and attributes each
counted instruction of every phase to the function of edgeinf's aarch64 extension that holds
it (its symbol table, through the cross ``nm``), or to the library it lies in (LiteRT's
libraries are stripped: XNNPACK shows as one line). Per function: the executed
instructions and the cycles the busiest resource of each core needs for them
(estimate.throughput_cycles), so an engine step's kernel can be weighed against the whole
model. Pass the .so the counted run used (the default is the cross-build's, which is that
one until csrc/ changes). The cycles of the parts add up to more than the whole: each part
is bound by its own busiest resource.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated  # noqa: E402
import estimate  # noqa: E402


@dataclass(frozen=True)
class Part:
    name: str
    instructions: int
    cycles: float
    bound: str


def owner_of(vaddr: int, mappings: list[estimate.Mapping], so_name: str, symbols: list[tuple[int, str]]) -> str:
    """The function of the extension at vaddr, else the name of the library that maps it."""
    mapping = next((m for m in mappings if m.start <= vaddr < m.end), None)
    if mapping is None:
        return "(unmapped)"
    if mapping.library != so_name:
        return mapping.library
    offset = vaddr - (mapping.start - mapping.offset)
    k = bisect.bisect_right([value for value, _ in symbols], offset) - 1
    return symbols[k][1] if k >= 0 else mapping.library


def by_function(
    insns: list[estimate.Insn], mappings: list[estimate.Mapping], so_name: str, symbols, cpu: str
) -> list[Part]:
    """The phase's instructions grouped by owner, the costliest first."""
    groups: dict[str, list[estimate.Insn]] = defaultdict(list)
    for insn in insns:
        groups[owner_of(insn.vaddr, mappings, so_name, symbols)].append(insn)
    parts = []
    for name, group in groups.items():
        cycles, bound = estimate.throughput_cycles(group, cpu)
        parts.append(Part(name, sum(i.count for i in group), cycles, bound))
    return sorted(parts, key=lambda p: -p.cycles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keep", type=Path, help="the folder of estimate.py --keep")
    parser.add_argument("--profiles", default="pi3,pi4,pi5")
    parser.add_argument("--so", type=Path, help="the aarch64 _C .so the counted run used")
    parser.add_argument("--top", type=int, default=12, help="functions shown per phase")
    args = parser.parse_args(argv)
    so = args.so or next((emulated.DEFAULT_BUILD / "lib" / "edgeinf").glob("_C*.so"), None)
    if so is None or not so.exists():
        parser.error("no aarch64 _C .so: pass --so, or cross-build (tools/arm64/cross_build.py)")
    symbols = estimate.function_symbols(so)
    llvm_mc = estimate.find_llvm_tool("llvm-mc")
    for profile in args.profiles.split(","):
        manifest_path = args.keep / f"manifest-{profile}.json"
        if not manifest_path.exists():
            continue
        manifest = json.loads(manifest_path.read_text())
        phases = estimate.parse_counts("\n".join(p.read_text() for p in sorted(args.keep.glob(f"counts-{profile}.*"))))
        estimate.decode(phases, llvm_mc)
        mappings = [estimate.Mapping(**m) for m in manifest["mappings"]]
        cpu = estimate.CPU_OF[profile]
        for phase in manifest["phases"]:
            insns = phases.get(phase["id"], [])
            total, _ = estimate.throughput_cycles(insns, cpu)
            who = f"{phase['contender']} {phase['isa']}" if phase["isa"] else phase["contender"]
            print(f"{cpu} {phase['case']} {who}: {total / 1e6:.2f}M cycles (issue limits)")
            for part in by_function(insns, mappings, so.name, symbols, cpu)[: args.top]:
                share = 100 * part.cycles / total if total else 0.0
                print(
                    f"  {part.cycles / 1e6:8.3f}M {share:5.1f}%  {part.instructions / 1e6:8.3f}M insns"
                    f"  {part.bound:7s} {part.name[:100]}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
