#!/usr/bin/env python3
"""Estimate int8 kernel and model speed on Cortex-A53/A72/A76 (Pi 3/4/5) without a Pi.

    python tools/arm64/estimate.py [--quick] [--profiles pi3,pi4,pi5] [--json PATH] [--table PATH]

One emulated run per board profile (aarch64 CPython under qemu-user with the profile's CPU,
tools/arm64/setup.sh) executes, once each, edgeinf's kernel paths and LiteRT with XNNPACK
(the real aarch64 wheel, which picks its kernels for that CPU) on the shapes of
benchmarks/bench_int8.py, the preprocessing cases of bench_preprocess.py (against OpenCV's
aarch64 build) and the int8 face models on the engine. A qemu TCG plugin
(insn_count_plugin.c, built here with gcc) counts every executed instruction per address,
per measured call. From the same counts, two estimates of cycles per CPU:

1. counts x throughput: the dynamic instruction mix (dot products, NEON multiplies,
   pairwise accumulates, loads/stores, other NEON, scalar) against each core's issue limits
   (CPU_MODELS, from Arm's software optimization guides): the cycles the busiest resource
   needs. A throughput bound: latencies, dependencies and stalls are not in it.
2. llvm-mca: the hot basic blocks (contiguous instructions run equally often), disassembled
   from the counted opcodes, through llvm-mca's scheduling model of each core, times how often
   each ran; the rest of the instructions at the core's typical rate (REST_IPC).

Neither models the memory system (caches, DRAM bandwidth, TLB): both assume every load hits
L1, which flatters large-weight layers on the A53 (no L2 prefetch worth the name, a 64-bit
bus). qemu's Cortex-A76 model enables the A76's architectural features (dot product), not its
microarchitecture; llvm's "cortex-a76" (14 and 19 alike) schedules with the Cortex-A57 model,
the one "cortex-a72" uses, so the A76 is modelled as "neoverse-n1" (llvm >= 16), the A76's
server sibling with the same core (MCA_CPU_OF); use llvm-mca-19 when installed.

Figures are estimates: speedup = XNNPACK's cycles / edgeinf's (above 1: edgeinf faster).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated  # noqa: E402

HERE = Path(__file__).resolve().parent
PLUGIN_SOURCE = HERE / "insn_count_plugin.c"
CPU_OF = {"pi3": "cortex-a53", "pi4": "cortex-a72", "pi5": "cortex-a76"}
# llvm-mca's scheduling model per core, where its own name schedules as another core.
MCA_CPU_OF = {"cortex-a76": "neoverse-n1"}
ISAS_OF = {"pi3": ["neon"], "pi4": ["neon"], "pi5": ["neon", "neondot"]}
KERNELS = ["gemm256", "fc1024", "conv1x1_28", "conv1x1_14", "conv3x3_28", "stem", "dw56", "dw28s2"]
KERNELS += ["pre_bgr_f32", "pre_bgr_i8", "pre_nv12_i8"]
QUICK_KERNELS = ["gemm256", "conv1x1_28", "dw28s2", "pre_bgr_i8"]
MODELS = ["face_detection_short_range", "face_landmark", "face_detection_full_range"]
QUICK_MODELS = ["face_detection_short_range"]
CLASSES = ("dot", "mul", "acc", "mem", "neon", "scalar")
HARNESS = "harness"  # estimate_guest's contender of an empty call


# ------------------------------------------------------------------ instruction classes

_DOT = {"sdot", "udot", "usdot", "sudot"}
_MUL = re.compile(r"^(s|u)(mull|mlal|mlsl)2?$|^(mul|mla|mls|pmul|sqdmulh|sqrdmulh|sqdmull2?|sqdmlal2?|smmla|ummla)$")
_ACC = {"sadalp", "uadalp", "saddlp", "uaddlp"}  # pairwise adds into int32 (SADDLP starts a sum)
_SIMD_OPERAND = re.compile(r"\b(v\d+\.|[qdshb]\d+\b)")
_Q_FORM = re.compile(r"\.(16b|8h|4s|2d)\b|\bq\d+\b")


def classify(disas: str) -> str:
    """The class of one instruction from its disassembly ("mnemonic operands")."""
    mnemonic, _, operands = disas.strip().partition(" ")
    mnemonic = mnemonic.lower()
    if mnemonic in _DOT:
        return "dot"
    if mnemonic.startswith(("ld", "st", "prfm")):
        return "mem"
    simd = bool(_SIMD_OPERAND.search(operands))
    if simd and _MUL.match(mnemonic):
        return "mul"
    if mnemonic in _ACC:
        return "acc"
    return "neon" if simd else "scalar"


def is_q_form(disas: str) -> bool:
    """A 128-bit operation: a 128-bit source (a widening op of 64-bit sources, SMULL .8h from
    .8b, is one pass of the A53's 64-bit datapath) or a 2-suffixed high-half op."""
    mnemonic, _, operands = disas.strip().partition(" ")
    sources = operands.split(",", 1)[1] if "," in operands else operands
    return mnemonic.endswith("2") or bool(_Q_FORM.search(sources))


# MACs one instruction of the class does on 128-bit registers: SDOT 16 (4 lanes x 4), a
# widening multiply of eight int8 8 (SMULL .8h), of four int16 4 (SMLAL .4s).
def macs_of(disas: str) -> int:
    if classify(disas) == "dot":
        return 16
    if classify(disas) == "mul":
        return 8 if re.search(r"\.8h|\.16b", disas) else 4
    return 0


# ------------------------------------------------------------------ the counts


@dataclass
class Insn:
    vaddr: int
    count: int
    opcode: int
    disas: str  # qemu's disassembly, replaced by llvm-mc's (see decode) where it decodes
    decoded: bool = False


def decode(phases: dict[int, list[Insn]], llvm_mc: str | None) -> None:
    """Replace qemu's disassembly by llvm-mc's: qemu 7.2's disassembler predates the dot
    products (SDOT shows as unallocated), and llvm-mca reads llvm-mc's syntax."""
    if not llvm_mc:
        return
    unique = sorted({i.opcode for insns in phases.values() for i in insns})
    text = dict(zip(unique, disassemble(unique, llvm_mc)))
    for insns in phases.values():
        for insn in insns:
            if text.get(insn.opcode):
                insn.disas, insn.decoded = text[insn.opcode], True


def parse_counts(text: str) -> dict[int, list[Insn]]:
    """The plugin's output: phase id -> its executed instructions."""
    phases: dict[int, list[Insn]] = defaultdict(list)
    current = None
    for line in text.splitlines():
        if line.startswith("phase "):
            current = phases[int(line.split()[1])]
            continue
        fields = line.split(" ", 3)
        if current is None or len(fields) < 4:
            continue
        current.append(Insn(int(fields[0], 16), int(fields[1]), int(fields[2], 16), fields[3]))
    return dict(phases)


def without(insns: list[Insn], overhead: list[Insn]) -> list[Insn]:
    """A phase's instructions less, address by address, those of another phase (the empty
    call: the marks and the call that every phase makes the same way)."""
    less = {i.vaddr: i.count for i in overhead}
    kept = [replace(i, count=i.count - less.get(i.vaddr, 0)) for i in insns]
    return [i for i in kept if i.count > 0]


def class_counts(insns: list[Insn]) -> dict[str, int]:
    counts = dict.fromkeys(CLASSES, 0)
    for insn in insns:
        counts[classify(insn.disas)] += insn.count
    return counts


# ------------------------------------------------------------------ method 1: counts x throughput


@dataclass(frozen=True)
class CpuModel:
    """Issue limits per cycle (Arm Cortex-A53/A72/A76 software optimization guides)."""

    width: float  # instructions issued per cycle
    vector: float  # 128-bit NEON operations per cycle (a 64-bit op counts half on a 64-bit datapath)
    multiply: float  # NEON integer multiplies (and multiply-accumulates) per cycle
    dot: float  # SDOT/UDOT per cycle
    memory: float  # loads + stores per cycle
    scalar: float  # integer ALU operations per cycle
    q_cost: float  # vector pipe cycles of a 128-bit NEON op relative to a 64-bit one


CPU_MODELS = {
    # in-order dual issue; NEON datapath 64 bits wide (a Q-form op occupies it two cycles);
    # one load/store pipe
    "cortex-a53": CpuModel(width=2, vector=1, multiply=1, dot=0, memory=1, scalar=2, q_cost=2),
    # 3-wide out-of-order; two 128-bit NEON pipes (F0/F1), integer multiplies on F0 only;
    # one load and one store pipe
    "cortex-a72": CpuModel(width=3, vector=2, multiply=1, dot=0, memory=2, scalar=2, q_cost=1),
    # 4-wide out-of-order; two 128-bit NEON pipes (V0/V1), SDOT on both, long multiplies on V0;
    # two load pipes (one also stores)
    "cortex-a76": CpuModel(width=4, vector=2, multiply=1, dot=2, memory=2, scalar=3, q_cost=1),
}
REST_IPC = {"cortex-a53": 0.8, "cortex-a72": 1.2, "cortex-a76": 1.8}  # outside the hot blocks


def throughput_cycles(insns: list[Insn], cpu: str) -> tuple[float, str]:
    """Cycles the busiest resource needs for these instructions, and which resource it is."""
    m = CPU_MODELS[cpu]
    use = defaultdict(float)
    for insn in insns:
        cls = classify(insn.disas)
        n = insn.count
        use["issue"] += n / m.width
        vector_cost = n * (m.q_cost if is_q_form(insn.disas) else 1)
        if cls == "dot":
            use["vector"] += vector_cost / m.vector
            use["dot"] += n / (m.dot or 0.5)  # a core without dot products never runs these
        elif cls == "mul":
            use["vector"] += vector_cost / m.vector
            use["multiply"] += vector_cost / m.multiply
        elif cls in ("acc", "neon"):
            use["vector"] += vector_cost / m.vector
        elif cls == "mem":
            use["memory"] += n / m.memory
        else:
            use["scalar"] += n / m.scalar
    bound = max(use, key=use.get)
    return use[bound], bound


# ------------------------------------------------------------------ method 2: llvm-mca on hot blocks


@dataclass
class Block:
    start: int
    count: int
    insns: list[Insn]

    @property
    def weight(self) -> int:
        return self.count * len(self.insns)


def hot_blocks(insns: list[Insn], share: float = 0.98, limit: int = 200) -> list[Block]:
    """Runs of consecutive instructions executed equally often (basic blocks, near enough),
    heaviest first, until `share` of the instructions or `limit` blocks."""
    blocks: list[Block] = []
    for insn in sorted(insns, key=lambda i: i.vaddr):
        last = blocks[-1] if blocks else None
        if last and insn.vaddr == last.insns[-1].vaddr + 4 and insn.count == last.count:
            last.insns.append(insn)
        else:
            blocks.append(Block(insn.vaddr, insn.count, [insn]))
    blocks.sort(key=lambda b: b.weight, reverse=True)
    total = sum(i.count for i in insns) or 1
    chosen, covered = [], 0
    for block in blocks[:limit]:
        if covered >= share * total:
            break
        chosen.append(block)
        covered += block.weight
    return chosen


def find_llvm_tool(name: str) -> str | None:
    for version in (19, 18, 17, 16, 15, 14):
        path = shutil.which(f"{name}-{version}")
        if path:
            return path
    return shutil.which(name)


def disassemble(opcodes: list[int], llvm_mc: str) -> list[str | None]:
    """LLVM-syntax text of each opcode (None for one llvm-mc does not decode)."""
    if not opcodes:
        return []
    data = "\n".join(" ".join(f"0x{(op >> s) & 0xFF:02x}" for s in (0, 8, 16, 24)) for op in opcodes)
    proc = subprocess.run(
        [llvm_mc, "--disassemble", "-triple=aarch64", "-mattr=+dotprod,+fullfp16,+i8mm,+rcpc,+lse"],
        input=data, capture_output=True, text=True,
    )  # fmt: skip
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip() and not ln.strip().startswith(".")]
    if len(lines) == len(opcodes):
        return [" ".join(ln.split()) for ln in lines]
    if len(opcodes) == 1:
        return [None]
    half = len(opcodes) // 2  # an undecodable word shifts the lines: find it by halves
    return disassemble(opcodes[:half], llvm_mc) + disassemble(opcodes[half:], llvm_mc)


def mca_cycles_per_iteration(blocks: list[list[str]], cpu: str, llvm_mca: str) -> list[float | None]:
    """llvm-mca's cycles per iteration of each block (a loop body run back to back)."""
    source = []
    for n, lines in enumerate(blocks):
        source += [f"# LLVM-MCA-BEGIN b{n}", *lines, f"# LLVM-MCA-END b{n}"]
    proc = subprocess.run(
        [llvm_mca, "-mtriple=aarch64", f"-mcpu={MCA_CPU_OF.get(cpu, cpu)}", "-mattr=+dotprod", "-iterations=100",
         "--all-views=false", "--summary-view"],
        input="\n".join(source) + "\n", capture_output=True, text=True,
    )  # fmt: skip
    found: dict[int, float] = {}
    region = None
    iterations = None
    for line in proc.stdout.splitlines():
        m = re.match(r"\[\d+\] Code Region - b(\d+)", line)
        if m:
            region = int(m.group(1))
        elif line.startswith("Iterations:"):
            iterations = int(line.split()[1])
        elif line.startswith("Total Cycles:") and iterations:
            found[region if region is not None else 0] = int(line.split()[2]) / iterations
    return [found.get(n) for n in range(len(blocks))]


class McaEstimator:
    def __init__(self) -> None:
        self.llvm_mc = find_llvm_tool("llvm-mc")
        self.llvm_mca = find_llvm_tool("llvm-mca")

    @property
    def version(self) -> str | None:
        if not self.llvm_mca:
            return None
        out = subprocess.run([self.llvm_mca, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"LLVM version (\S+)", out)
        return m.group(1) if m else out.strip()

    def cycles(self, insns: list[Insn], cpu: str) -> dict | None:
        if not (self.llvm_mc and self.llvm_mca):
            return None
        blocks = hot_blocks(insns)
        texts = [[i.disas for i in b.insns] if all(i.decoded for i in b.insns) else None for b in blocks]
        usable = [(b, t) for b, t in zip(blocks, texts) if t]
        per_iter = mca_cycles_per_iteration([t for _, t in usable], cpu, self.llvm_mca)
        cycles, covered, top = 0.0, 0, []
        for (block, _), cpi in zip(usable, per_iter):
            if cpi is None:
                continue
            cycles += block.count * cpi
            covered += block.weight
            top.append({"start": block.start, "instructions": len(block.insns), "runs": block.count,
                        "cycles_per_run": round(cpi, 2)})  # fmt: skip
        total = sum(i.count for i in insns)
        cycles += (total - covered) / REST_IPC[cpu]
        return {"cycles": cycles, "hot_share": covered / total if total else 0.0, "hot_blocks": top[:3]}


# ------------------------------------------------------------------ attribution


@dataclass
class Mapping:
    start: int
    end: int
    offset: int
    path: str

    @property
    def library(self) -> str:
        return Path(self.path).name


def attribute(insns: list[Insn], mappings: list[Mapping]) -> dict[str, int]:
    """Executed instructions per library (XNNPACK is inside LiteRT's stripped libraries)."""
    found: dict[str, int] = defaultdict(int)
    for insn in insns:
        owner = next((m.library for m in mappings if m.start <= insn.vaddr < m.end), "other")
        found[owner] += insn.count
    ranked = sorted(found.items(), key=lambda kv: -kv[1])
    top = dict(ranked[:4])
    if len(ranked) > 4:
        top["(others)"] = sum(count for _, count in ranked[4:])
    return top


def symbol_of(vaddr: int, mappings: list[Mapping], symbols: dict[str, list[tuple[int, str]]]) -> str:
    for m in mappings:
        if m.start <= vaddr < m.end:
            table = symbols.get(m.path)
            base = m.start - m.offset
            if table:
                offset = vaddr - base
                best = None
                for value, name in table:
                    if value <= offset:
                        best = name
                    else:
                        break
                if best:
                    return f"{m.library}:{best}"
            return f"{m.library}+0x{vaddr - base:x} (stripped)"
    return f"0x{vaddr:x}"


def function_symbols(path: Path) -> list[tuple[int, str]]:
    proc = subprocess.run([emulated.CROSS_NM, "-C", "--defined-only", str(path)], capture_output=True, text=True)
    found = []
    for line in proc.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW" and parts[0]:
            found.append((int(parts[0], 16), parts[2][:120]))
    return sorted(found)


# ------------------------------------------------------------------ the run


def build_plugin(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plugin = out_dir / "insn_count.so"
    if not plugin.exists() or plugin.stat().st_mtime < PLUGIN_SOURCE.stat().st_mtime:
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(plugin), str(PLUGIN_SOURCE)],
            check=True,
        )
    return plugin


def plugin_support() -> str | None:
    """Why qemu's plugins cannot be used here, or None."""
    if shutil.which("qemu-aarch64") is None:
        return "qemu-aarch64 is not installed"
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    out = subprocess.run(["qemu-aarch64", "-d", "help"], capture_output=True, text=True).stdout
    if "plugin" not in out:
        return "this qemu-aarch64 was built without TCG plugin support"
    return None


def run_profile(emulator, stage: Path, plugin: Path, profile: str, spec: dict, work: Path) -> tuple[dict, str]:
    """One emulated run with the counting plugin: (the guest's manifest, the plugin's counts)."""
    spec_path, manifest_path = work / f"spec-{profile}.json", work / f"manifest-{profile}.json"
    spec_path.write_text(json.dumps(spec))
    counts_prefix = work / f"counts-{profile}"
    for old in work.glob(f"counts-{profile}.*"):
        old.unlink()
    proc = emulator.run(
        [str(stage / "tools/arm64/estimate_guest.py"), str(spec_path), str(manifest_path)],
        profile=profile,
        cwd=stage,
        pythonpath=[stage],
        extra_env={"QEMU_PLUGIN": f"{plugin},out={counts_prefix}"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"emulated run on {profile} failed:\n{proc.stderr[-4000:]}")
    manifest = json.loads(manifest_path.read_text())
    # the guest's own process is the one whose counts hold phases (children write other files)
    texts = [p.read_text() for p in sorted(work.glob(f"counts-{profile}.*"))]
    return manifest, "\n".join(t for t in texts if t.startswith("phase"))


def estimate_profile(manifest: dict, counts: str, profile: str, mca: McaEstimator, so: Path) -> list[dict]:
    import bounds  # noqa: PLC0415 (both import this module)
    import by_function  # noqa: PLC0415

    cpu = CPU_OF[profile]
    phases = parse_counts(counts)
    decode(phases, mca.llvm_mc)
    mappings = [Mapping(**m) for m in manifest["mappings"]]
    so_symbols = function_symbols(so)
    symbols = {m.path: so_symbols for m in mappings if m.library == so.name}
    libraries = {m.library for m in mappings if m.library != so.name}
    rows = []
    harness = next((phases.get(p["id"], []) for p in manifest["phases"] if p["contender"] == HARNESS), [])
    for phase in manifest["phases"]:
        insns = phases.get(phase["id"], [])
        if phase["contender"] != HARNESS:
            insns = without(insns, harness)
        classes = class_counts(insns)
        m1, bound = throughput_cycles(insns, cpu)
        m2 = mca.cycles(insns, cpu)
        hottest = max(insns, key=lambda i: i.count, default=None)
        row = {
            "profile": profile,
            "cpu": cpu,
            "case": phase["case"],
            "title": phase["title"],
            "contender": phase["contender"],
            "isa": phase["isa"],
            "macs": phase["macs"],
            "instructions": sum(classes.values()),
            "classes": classes,
            "by_library": attribute(insns, mappings),
            "hottest": symbol_of(hottest.vaddr, mappings, symbols) if hottest else None,
            "throughput_cycles": round(m1),
            "throughput_bound": bound,
            "mca_cycles": round(m2["cycles"]) if m2 else None,
            "mca_hot_share": round(m2["hot_share"], 3) if m2 else None,
            "mca_hot_blocks": m2["hot_blocks"] if m2 else None,
        }
        mult = classes["dot"] + classes["mul"] + classes["acc"]
        if phase["macs"] and mult:
            row["mac_instructions_per_kmac"] = round(1000 * mult / phase["macs"], 3)
            row["multiplies_per_kmac"] = round(1000 * (classes["dot"] + classes["mul"]) / phase["macs"], 3)
        if phase["contender"] == "edgeinf" and phase["case"].endswith(" int8"):  # a whole model
            parts = by_function.by_function(insns, mappings, so.name, so_symbols, cpu)
            row["by_group"] = {k: round(v) for k, v in bounds.group_cycles(parts, libraries).items()}
        rows.append(row)
    return rows


def _label(row: dict) -> str:
    if row["contender"] == "edgeinf":
        return f"edgeinf {row['isa']}"
    return row["contender"]


def compare(rows: list[dict]) -> list[dict]:
    """Per CPU and case: each edgeinf path against XNNPACK (or preprocessing's best OpenCV)."""
    out = []
    by_key = defaultdict(list)
    for row in rows:
        by_key[(row["cpu"], row["case"])].append(row)
    for (cpu, case), group in by_key.items():
        others = [r for r in group if r["contender"] != "edgeinf"]
        if not others:
            continue
        for metric in ("throughput_cycles", "mca_cycles"):
            if any(r[metric] is None for r in group):
                continue
            best = min(others, key=lambda r: r[metric])
            for mine in (r for r in group if r["contender"] == "edgeinf"):
                out.append({
                    "cpu": cpu, "case": case, "title": mine["title"], "method": metric,
                    "edgeinf": _label(mine), "against": best["contender"],
                    "edgeinf_cycles": mine[metric], "against_cycles": best[metric],
                    "speedup": round(best[metric] / mine[metric], 3) if mine[metric] else None,
                })  # fmt: skip
    return out


def sanity(rows: list[dict]) -> dict:
    """Multiply(-accumulate) instructions per MAC, plain NEON over dot product, per case.

    ``xnnpack_multiplies``: XNNPACK's Cortex-A53 kernels (int16 SMLAL by lane, 4 MACs an
    instruction) over its Cortex-A76 ones (SDOT, 16): the textbook 4x. ``edgeinf_*``:
    edgeinf's NEON path (SMULL/SMLAL of int8, 8 MACs, and a SADALP per two) over its SDOT path
    on the same CPU: 3x the multiply-accumulate instructions and 2x the multiplies with weights
    in [-127, 127], 4x and 2x when a -128 weight forbids the int16 sum of two products.
    """

    def per_kmac(contender, isa, cpu, case, key):
        for r in rows:
            if (r["contender"], r["isa"], r["cpu"], r["case"]) == (contender, isa, cpu, case) and key in r:
                return r[key]
        return None

    ratios: dict[str, dict] = {}
    for row in rows:
        if not row["classes"]["dot"] or "mac_instructions_per_kmac" not in row:
            continue  # kernels without a dot-product path (depthwise) run the same code on both
        case, found = row["case"], ratios.setdefault(row["case"], {})
        if row["contender"] == "edgeinf":
            neon = per_kmac("edgeinf", "neon", row["cpu"], case, "mac_instructions_per_kmac")
            neon_mul = per_kmac("edgeinf", "neon", row["cpu"], case, "multiplies_per_kmac")
            if neon:
                found["edgeinf_mac_instructions"] = neon / row["mac_instructions_per_kmac"]
                found["edgeinf_multiplies"] = neon_mul / row["multiplies_per_kmac"]
        else:
            plain = per_kmac(row["contender"], None, "cortex-a53", case, "multiplies_per_kmac")
            if plain:
                found["xnnpack_multiplies"] = plain / row["multiplies_per_kmac"]
    return {case: found for case, found in ratios.items() if found}


TITLE = (
    "ESTIMATES for Cortex-A53/A72/A76 (Pi 3/4/5), not measurements: edgeinf vs XNNPACK cycles from "
    "instructions counted under qemu (tools/arm64/estimate.py)"
)


def report_rows(result: dict) -> list[dict]:
    """One flat row per case, CPU and edgeinf path: the speedup by both methods (benchmarks/README.md)."""
    merged: dict[tuple, dict] = {}
    for c in result["comparisons"]:
        key = (c["title"], c["cpu"], c["edgeinf"], c["against"])
        row = merged.setdefault(
            key, {"case": c["title"], "cpu": c["cpu"], "edgeinf_path": c["edgeinf"], "against": c["against"]}
        )
        name = "speedup_issue_limits" if c["method"] == "throughput_cycles" else "speedup_llvm_mca"
        row[name] = round(c["speedup"], 2) if c["speedup"] else None
    for row in merged.values():
        row.setdefault("speedup_issue_limits", None)
        row.setdefault("speedup_llvm_mca", None)
    return list(merged.values())


def table(result: dict) -> str:
    """The same rows as markdown, with the method and its limits."""
    lines = [
        f"### {TITLE}",
        "",
        "Executed instructions counted by a qemu-user TCG plugin for one call of each contender, all in the",
        "same emulated run per CPU, turned into cycles by (1) each core's issue limits and (2) llvm-mca's",
        "scheduling models on the hot blocks. The memory system is not modelled (every load hits L1).",
        f"llvm-mca {result['versions']['llvm-mca']}. Speedup = XNNPACK cycles / edgeinf cycles (preprocessing:",
        "against the fastest OpenCV or Pillow contender of bench_preprocess).",
        "",
        "| case | CPU | edgeinf path | vs | speedup (issue limits) | speedup (llvm-mca) |",
        "|---|---|---|---|---:|---:|",
    ]
    fmt = lambda v: f"{v:.2f}x" if v else "-"  # noqa: E731
    for r in result["rows"]:
        lines.append(
            f"| {r['case']} | {r['cpu']} | {r['edgeinf_path']} | {r['against']} "
            f"| {fmt(r['speedup_issue_limits'])} | {fmt(r['speedup_llvm_mca'])} |"
        )
    if result["sanity"]:
        lines += ["", "Sanity check from the counts, plain NEON over dot-product instructions per MAC:", ""]
        lines += ["| case | XNNPACK multiplies, A53 / A76 | edgeinf multiply-accumulates, NEON / SDOT |"]
        lines += ["|---|---:|---:|"]
        fmt = lambda v: f"{v:.2f}x" if v else "-"  # noqa: E731
        for case, r in result["sanity"].items():
            lines.append(f"| {case} | {fmt(r.get('xnnpack_multiplies'))} | {fmt(r.get('edgeinf_mac_instructions'))} |")
    for extra in result.get("tables", []):
        if extra["rows"]:
            columns = list(extra["rows"][0])
            lines += ["", f"{extra['title']}:", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in extra["rows"]]
    return "\n".join(lines) + "\n"


def host_models(names: list[str]) -> dict[str, str]:
    sys.path.insert(0, str(emulated.REPO))
    from edgeinf.quantize import int8_path

    return {f"{name} int8": str(int8_path(name)) for name in names}


def estimate(
    profiles: list[str],
    kernels: list[str],
    model_names: list[str],
    *,
    keep: Path | None = None,
    reuse: Path | None = None,
    home: Path = emulated.DEFAULT_HOME,
    log=print,
) -> dict:
    """The estimate for these board profiles, kernel cases and zoo models (see the module doc).

    keep: also leave each profile's counts and manifest in this folder; reuse: read them from
    this folder (a previous --keep) instead of running the emulation again.

    Raises:
        emulated.EmulationUnavailable: qemu (with plugins), gcc or the emulated Python is missing.
    """
    reason = plugin_support() or emulated.Emulator(home).missing()
    if reason:
        raise emulated.EmulationUnavailable(reason)
    import bounds  # noqa: PLC0415 (it imports this module)

    emulator = emulated.Emulator(home)
    started = time.monotonic()
    so, _ = emulated.cross_build(emulator)
    mca = McaEstimator()
    rows, harness = [], []
    # a stage and plugin of this run's own: runs at the same time (the test, a report) do not
    # replace each other's files
    with tempfile.TemporaryDirectory(prefix="edgeinf-estimate-") as tmp:
        work = Path(tmp)
        if not reuse:
            stage = emulated.stage(so, work / "stage")
            plugin = build_plugin(work)
            models = host_models(model_names)
        for profile in profiles:
            if reuse:
                manifest = json.loads((reuse / f"manifest-{profile}.json").read_text())
                counts = "\n".join(p.read_text() for p in sorted(reuse.glob(f"counts-{profile}.*")))
            else:
                spec = {"kernels": kernels, "models": models, "isas": ISAS_OF[profile]}
                folder = keep or work / "counts"
                folder.mkdir(parents=True, exist_ok=True)
                manifest, counts = run_profile(emulator, stage, plugin, profile, spec, folder)
            found = estimate_profile(manifest, counts, profile, mca, so)
            rows += [r for r in found if r["contender"] != HARNESS]
            harness += [r for r in found if r["contender"] == HARNESS]
            log(f"estimate: {profile} done ({time.monotonic() - started:.0f} s)")
    qemu = subprocess.run(["qemu-aarch64", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    result = {
        "benchmark": "arm_estimate",
        "title": TITLE,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpu": f"emulated {', '.join(CPU_OF[p] for p in profiles)} (estimates)", "arch": "aarch64"},
        "versions": {"qemu": qemu.split("version")[-1].strip(), "llvm-mca": mca.version, **guest_versions(emulator)},
        "note": "estimates from emulated instruction counts, not measurements on a board",
        "cpu_models": {k: vars(v) for k, v in CPU_MODELS.items()},
        "contenders": rows,
        "comparisons": compare(rows),
        "sanity": sanity(rows),
        # what the marks and the call of a lambda add to every contender's counts
        "harness_instructions": {r["cpu"]: r["instructions"] for r in harness},
    }
    result["rows"] = report_rows(result)
    layers = {case: bounds.model_layers(path) for case, path in host_models(model_names).items()}
    result["tables"] = bounds.tables(rows, layers)
    return result


def guest_versions(emulator) -> dict:
    """Versions of the aarch64 wheels the guest ran (from their dist-info folder names)."""
    found = {}
    for dist in ("ai_edge_litert", "numpy", "opencv_python_headless"):
        names = sorted(emulator.site.glob(f"{dist}-*.dist-info"))
        if names:
            found[dist.replace("_", "-")] = names[-1].name[len(dist) + 1 : -len(".dist-info")]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset: 4 kernels, 1 model")
    parser.add_argument("--profiles", default="pi3,pi4,pi5")
    parser.add_argument("--kernels", help="comma-separated case names (default: all, or the quick set)")
    parser.add_argument("--models", help="comma-separated zoo names of int8 models ('' for none)")
    parser.add_argument("--json", type=Path, default=emulated.REPO / "benchmarks/results/arm_estimate.json")
    parser.add_argument("--table", type=Path, help="write the markdown table here")
    parser.add_argument("--keep", type=Path, help="keep the raw counts and manifests in this folder")
    parser.add_argument(
        "--reuse", type=Path, help="estimate from a --keep folder instead of emulating again (same build)"
    )
    parser.add_argument("--home", type=Path, default=emulated.DEFAULT_HOME)
    args = parser.parse_args(argv)

    kernels = args.kernels.split(",") if args.kernels else (QUICK_KERNELS if args.quick else KERNELS)
    if args.models is not None:
        model_names = [m for m in args.models.split(",") if m]
    else:
        model_names = QUICK_MODELS if args.quick else MODELS
    try:
        result = estimate(
            args.profiles.split(","), kernels, model_names, keep=args.keep, reuse=args.reuse, home=args.home,
            log=lambda text: print(text, file=sys.stderr),
        )  # fmt: skip
    except emulated.EmulationUnavailable as exc:
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    text = table(result)
    if args.table:
        args.table.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
