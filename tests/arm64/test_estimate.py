"""tools/arm64/estimate.py: instruction classes, hot blocks, the cycle models, and one small
emulated run (about 15 s of CPU) whose counts must show the dot-product GEMM's 3x fewer
multiply-accumulate instructions per MAC than edgeinf's NEON one. The emulated run needs qemu with TCG plugins, gcc and the emulated Pi
(tools/arm64/setup.sh); llvm-mca is optional (its figures are then None)."""

from __future__ import annotations

import platform
import shutil
import sys
from pathlib import Path

import pytest

if platform.machine() != "x86_64":  # a host-side tool: it drives qemu and the x86 llvm-mca
    pytest.skip(f"drives qemu from an x86_64 host; this is {platform.machine()}", allow_module_level=True)

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "arm64"
sys.path.insert(0, str(TOOLS))
estimate = pytest.importorskip("estimate")


@pytest.mark.parametrize(
    "text, cls, macs",
    [
        ("sdot v0.4s, v1.16b, v2.4b[0]", "dot", 16),
        ("smull v0.8h, v1.8b, v2.8b", "mul", 8),
        ("smlal v0.4s, v1.4h, v2.h[1]", "mul", 4),
        ("sadalp v0.4s, v1.8h", "acc", 0),
        ("saddlp v0.4s, v1.8h", "acc", 0),
        ("ld1 { v0.16b }, [x0], #16", "mem", 0),
        ("prfm pldl1keep, [x1, #256]", "mem", 0),
        ("mul x0, x1, x2", "scalar", 0),
        ("fmla v0.4s, v1.4s, v2.4s", "neon", 0),
        ("b.ne #-8", "scalar", 0),
    ],
)
def test_instruction_classes(text, cls, macs):
    assert estimate.classify(text) == cls
    assert estimate.macs_of(text) == macs


COUNTS = """phase 3
1000 5 00000000 add x0, x0, #1
1004 5 00000000 sdot v0.4s, v1.16b, v2.4b[0]
1008 5 00000000 b.ne #-8
100c 1 00000000 ret
phase 4
2000 7 00000000 ldr q0, [x1]
"""


def test_counts_parse_into_phases_and_hot_blocks():
    phases = estimate.parse_counts(COUNTS)
    assert sorted(phases) == [3, 4]
    assert estimate.class_counts(phases[3]) == {"dot": 5, "mul": 0, "acc": 0, "mem": 0, "neon": 0, "scalar": 11}
    blocks = estimate.hot_blocks(phases[3], share=0.9)  # the loop holds 15 of the 16
    assert [(b.start, len(b.insns), b.count) for b in blocks] == [(0x1000, 3, 5)]
    blocks = estimate.hot_blocks(phases[3])  # 98% by default: the ret too
    assert [(b.start, len(b.insns), b.count) for b in blocks] == [(0x1000, 3, 5), (0x100C, 1, 1)]


def test_the_empty_call_is_taken_off_a_phase_address_by_address():
    phases = estimate.parse_counts(COUNTS)
    harness = [estimate.Insn(0x1000, 2, 0, "add x0, x0, #1"), estimate.Insn(0x100C, 3, 0, "ret")]
    left = estimate.without(phases[3], harness)
    # 5 - 2 at 0x1000; the ret ran once, less than the harness's 3: gone, never negative
    assert [(i.vaddr, i.count) for i in left] == [(0x1000, 3), (0x1004, 5), (0x1008, 5)]
    assert estimate.without(phases[4], []) == phases[4]


def test_the_throughput_model_is_bound_by_the_dot_product_pipes_on_the_a76():
    insns = [estimate.Insn(4 * n, 1000, 0, "sdot v0.4s, v1.16b, v2.4b[0]") for n in range(8)]
    cycles, bound = estimate.throughput_cycles(insns, "cortex-a76")
    assert bound in ("vector", "dot") and cycles == pytest.approx(8000 / 2)
    # the A53 runs a 128-bit NEON op in two passes of its 64-bit datapath
    plain = [estimate.Insn(0, 1000, 0, "smull v0.8h, v1.8b, v2.8b"), estimate.Insn(4, 1000, 0, "sadalp v0.4s, v1.8h")]
    assert estimate.throughput_cycles(plain, "cortex-a53")[0] == pytest.approx(1000 * 1 + 1000 * 2)


def test_llvm_mca_cycles_for_a_dot_product_loop():
    mca = estimate.McaEstimator()
    if not (mca.llvm_mc and mca.llvm_mca):
        pytest.skip("llvm-mc / llvm-mca not installed (apt-get install llvm)")
    # sdot v0.4s, v1.16b, v2.4b[0] / sdot v3.4s, ... / subs x0, x0, #1 / b.ne
    text = estimate.disassemble([0x4F82E020, 0x4F82E023, 0xF1000400, 0x54FFFFA1], mca.llvm_mc)
    assert text[0].startswith("sdot") and text[-1].startswith("b.ne")
    (a76,) = estimate.mca_cycles_per_iteration([text], "cortex-a76", mca.llvm_mca)
    assert 0.5 <= a76 <= 4


def _row(contender, isa, cpu, dots, muls, accs, macs=16000):
    classes = {"dot": dots, "mul": muls, "acc": accs, "mem": 0, "neon": 0, "scalar": 0}
    return {"contender": contender, "isa": isa, "cpu": cpu, "case": "gemm", "classes": classes, "macs": macs,
            "mac_instructions_per_kmac": 1000 * (dots + muls + accs) / macs,
            "multiplies_per_kmac": 1000 * (dots + muls) / macs}  # fmt: skip


def test_the_sanity_check_compares_plain_neon_with_dot_products():
    rows = [
        _row("XNNPACK", None, "cortex-a53", 0, 4000, 0),  # SMLAL by lane: 4 MACs each
        _row("XNNPACK", None, "cortex-a76", 1000, 0, 0),  # SDOT: 16
        _row("edgeinf", "neon", "cortex-a76", 0, 2000, 1000),
        _row("edgeinf", "neondot", "cortex-a76", 1000, 0, 0),
    ]
    found = estimate.sanity(rows)["gemm"]
    assert found == {"xnnpack_multiplies": 4.0, "edgeinf_mac_instructions": 3.0, "edgeinf_multiplies": 2.0}


def _emulation_missing() -> str | None:
    import emulated

    if not estimate.find_llvm_tool("llvm-mc"):  # qemu 7.2's disassembler does not know SDOT
        return "llvm-mc not installed (apt-get install llvm)"
    return (
        estimate.plugin_support()
        or emulated.Emulator().missing()
        or (None if shutil.which(emulated.CROSS_NM) else f"{emulated.CROSS_NM} missing")
    )


def test_an_emulated_gemm_counts_3x_fewer_mac_instructions_with_sdot():
    """One 64x64x64 GEMM on the emulated Pi 5 through edgeinf's NEON and dot-product paths."""
    reason = _emulation_missing()
    if reason:
        pytest.skip(reason)
    result = estimate.estimate(["pi5"], ["gemm64"], [], log=lambda _: None)
    rows = {(r["contender"], r["isa"]): r for r in result["contenders"]}
    assert set(rows) == {("edgeinf", "neon"), ("edgeinf", "neondot")}
    assert rows[("edgeinf", "neondot")]["classes"]["dot"] == 64**3 // 16  # every MAC in an SDOT
    assert rows[("edgeinf", "neon")]["classes"]["dot"] == 0
    # SMULL + SMLAL + SADALP per 32 MACs (6 per 8 columns and 4 K) against one SDOT per 16
    assert 2.8 <= result["sanity"]["gemm64"]["edgeinf_mac_instructions"] <= 3.2
    assert 1.8 <= result["sanity"]["gemm64"]["edgeinf_multiplies"] <= 2.2
    # the marks and an empty call: a few thousand instructions, taken off every phase
    assert 100 < result["harness_instructions"]["cortex-a76"] < 20_000
    for row in result["contenders"]:
        assert row["throughput_cycles"] > 0
        assert row["by_library"] and next(iter(row["by_library"])).startswith("_C.")  # the kernel, not Python
