"""tools/arm64/bounds.py: the least work an exact int8 kernel must issue on each Pi core,
costed by estimate.py's issue limits, and the ceilings it puts on a speedup over XNNPACK."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

if platform.machine() != "x86_64":  # a host-side tool, as estimate.py
    pytest.skip(f"reads an x86_64 host's estimate; this is {platform.machine()}", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "arm64"))
import bounds  # noqa: E402  (the host tools import only the standard library: nothing to skip)
import by_function  # noqa: E402

GEMM = bounds.Work("gemm", 256 * 256, 256)


def test_the_a72_multiplies_eight_int8_products_a_cycle_on_its_one_multiply_pipe():
    f = bounds.floors(GEMM, "cortex-a72", dot=False)
    assert f["multiply_cycles"] == pytest.approx(GEMM.macs / 8)
    # the route adds accumulates and requantization on the two vector pipes: still multiply-bound
    assert f["route_cycles"] == pytest.approx(GEMM.macs / 8) and f["route_bound"] == "multiply"


def test_the_a76_dot_products_run_32_products_a_cycle_and_need_k_in_fours():
    f = bounds.floors(GEMM, "cortex-a76", dot=True)
    assert f["multiply_cycles"] == pytest.approx(GEMM.macs / 32) and f["route"] == "SDOT by lane"
    stem = bounds.Work("gemm", 100, 27)  # k = 27 runs as 28
    assert bounds.floors(stem, "cortex-a76", dot=True)["multiply_cycles"] == pytest.approx(100 * 28 / 32)
    # without dot products the A76 is the A72's single multiply pipe
    assert bounds.floors(GEMM, "cortex-a76", dot=False)["multiply_cycles"] == pytest.approx(GEMM.macs / 8)


def test_the_a53_pays_two_passes_for_each_128_bit_widening():
    dw = bounds.Work("dw", 8, 9)  # one pixel of 8 channels
    f = bounds.floors(dw, "cortex-a53", dot=False)
    # int8 pairs: 9 multiplies of 64-bit halves (1 each), 5 SADDW + 5 SADDW2 (2 each), and
    # half of a 16-channel requantization (20 128-bit operations, 2 each)
    assert f["route"] == "int8 pairs + SADDW"
    assert f["route_cycles"] == pytest.approx(9 + 20 + 20)


def test_a_depthwise_sdot_pads_the_filter_rows_to_four_and_interleaves_each_input_column_once():
    dw = bounds.Work("dw", 16, 9, k_h=3, stride=2)  # one pixel of 16 channels
    # 3 filter columns x 1 group of 4 rows x 4 SDOTs, 2 new columns x 8 ZIPs, 20 to requantize,
    # on the A76's two vector pipes
    f = bounds.floors(dw, "cortex-a76", dot=True)
    assert f["route"] == "SDOT of interleaved rows" and f["route_cycles"] == pytest.approx((12 + 16 + 20) / 2)
    assert f["multiply_cycles"] == pytest.approx(12 / 2)


def test_an_llvm_mca_floor_block_has_no_instruction_waiting_for_another():
    parts = [(64.0, "sdot v0.4s, v1.16b, v2.4b[0]"), (8.0, "scvtf v0.4s, v0.4s"), (2.0, "smax v0.16b, v0.16b, v1.16b")]
    block, scale = bounds._floor_block(parts, units=4)
    assert scale == 2  # half an SMAX a unit: two units a block
    assert [line.split()[0] for line in block].count("sdot") == 32 and len(block) == 32 + 4 + 1
    written = [line.split()[1].rstrip(",").split(".")[0] for line in block]
    read = {reg.split(".")[0] for line in block for reg in line.split(None, 1)[1].split(", ")[1:]}
    assert not read & set(written)  # operands are never results: only accumulators chain
    assert all(written[n] != written[n + 1] for n in range(len(written) - 1))
    assert block[0].startswith("sdot") and block[-1].startswith("sdot")  # the kinds spread through the block


def llvm_mca_or_skip() -> str:
    import estimate  # noqa: PLC0415

    tool = estimate.find_llvm_tool("llvm-mca")
    if not tool:
        pytest.skip("llvm-mca not installed (apt-get install llvm)")
    return tool


def test_llvm_mca_floors_keep_the_a72s_one_multiply_pipe_and_the_a76s_two_dot_product_pipes():
    tool = llvm_mca_or_skip()
    # 8 products a cycle on the A72's one multiply pipe, as by the issue limits
    assert bounds.mca_route_floor(GEMM, "cortex-a72", dot=False, llvm_mca=tool) == pytest.approx(
        GEMM.macs / 8, rel=0.01
    )
    # 32 a cycle by SDOT on the A76, and the requantization on the same two vector pipes on top
    a76 = bounds.mca_route_floor(GEMM, "cortex-a76", dot=True, llvm_mca=tool)
    assert GEMM.macs / 32 < a76 < GEMM.macs / 32 * 1.2
    rows = [
        row("XNNPACK", "cortex-a72", "gemm256", GEMM.macs / 8, mca=GEMM.macs / 4),
        row("edgeinf", "cortex-a72", "gemm256", GEMM.macs / 8, isa="neon", mca=GEMM.macs / 4),
    ]
    (found,) = bounds.kernel_bounds(rows, tool)
    assert found["ceiling_route"] == 1.0 and found["ceiling_route_llvm_mca"] == pytest.approx(2.0, abs=0.02)
    assert "ceiling_route_llvm_mca" not in bounds.kernel_bounds(rows)[0]  # no llvm-mca given: no figure


def row(contender, cpu, case, cycles, isa=None, mca=None, **extra):
    return {"contender": contender, "cpu": cpu, "case": case, "title": case, "isa": isa,
            "throughput_cycles": cycles, "mca_cycles": mca, **extra}  # fmt: skip


def test_a_kernel_ceiling_is_xnnpacks_cycles_over_the_floor():
    work = bounds.KERNEL_WORK["gemm256"]
    rows = [
        row("XNNPACK", "cortex-a72", "gemm256", work.macs / 8, mca=100),
        row("edgeinf", "cortex-a72", "gemm256", work.macs / 4, isa="neon", mca=200),
        row("edgeinf", "cortex-a76", "gemm256", 1, isa="neon"),  # a Pi 5 runs neondot: left out
    ]
    (found,) = bounds.kernel_bounds(rows)
    assert found["now_issue_limits"] == 0.5 and found["now_llvm_mca"] == 0.5
    assert found["ceiling_multiplies"] == 1.0 and found["ceiling_route"] == 1.0 and found["goal"] == 1.0


def test_model_cycles_are_grouped_by_kind_of_work_as_shares_of_xnnpacks_model():
    so = "_C.cpython-311-aarch64-linux-gnu.so"
    parts = [
        by_function.Part(
            "void edgeinf::qs8::(anonymous namespace)::run<true, 9ul>(edgeinf::qs8::DwWeights", 1, 40, "x"
        ),
        by_function.Part("void edgeinf::qs8::neon::(anonymous namespace)::tile<PairKernel>", 1, 30, "x"),
        by_function.Part("edgeinf::qs8::qs8_add__neon(signed char const*)", 1, 20, "x"),
        by_function.Part("edgeinf::engine::PadStep::run(edgeinf::engine::ThreadPool&) const", 1, 5, "x"),
        by_function.Part("libc.so.6", 1, 5, "x"),
    ]
    groups = bounds.group_cycles(parts, {"libc.so.6", "python3.11"})
    assert groups == {"depthwise": 40, "conv/FC GEMM": 30, "ADD": 20, "other steps": 5, "outside edgeinf": 5}
    rows = [
        row("XNNPACK", "cortex-a76", "m int8", 80),
        row("edgeinf", "cortex-a76", "m int8", 100, isa="neondot", by_group=groups),
    ]
    (found,) = bounds.model_gaps(rows)
    assert found["now_issue_limits"] == 0.8 and found["needed_share"] == 0.83
    # the groups' 100 cycles scaled to the model's 100, over XNNPACK's 80
    assert found["depthwise share"] == 0.5 and found["ADD share"] == 0.25
    rows[1]["throughput_cycles"] = 50  # the parts overlap: their own bounds add up to twice the whole
    (found,) = bounds.model_gaps(rows)
    assert found["depthwise share"] == 0.25 and found["ADD share"] == 0.125
    assert so  # the extension's own name never counts as outside
    assert bounds.group_of(so, {"libc.so.6"}) == "other steps"
    # the dot-product GEMM's tiles, which requantize their own outputs
    dot_tile = "void edgeinf::qs8::(anonymous namespace)::dot_tile<8, 2>(unsigned long, signed char const*"
    assert bounds.group_of(dot_tile, {"libc.so.6"}) == "conv/FC GEMM"
    # the out-of-order cores' NEON GEMM, a panel a call
    k16 = "void edgeinf::qs8::(anonymous namespace)::K16Kernel::panel<true>(unsigned long, signed char const*"
    assert bounds.group_of(k16, {"libc.so.6"}) == "conv/FC GEMM"


def test_a_model_ceiling_shrinks_each_kind_of_kernel_work_by_the_room_its_kernel_cases_show():
    groups = {"depthwise": 40, "conv/FC GEMM": 30, "direct conv": 10, "ADD": 20}
    rows = [
        row("XNNPACK", "cortex-a76", "m int8", 80),
        row("edgeinf", "cortex-a76", "m int8", 100, isa="neondot", by_group=groups),
    ]
    (found,) = bounds.model_gaps(rows)
    assert found["ceiling (kernel work at its route ceilings)"] is None  # no kernel cases ran
    # each kind's case with a ceiling 2x (depthwise), 1x (GEMM) and 1.25x (stem) its speedup now
    for case, now, room in (("dw56", 1.0, 2.0), ("dw28s2", 1.0, 1.5), ("gemm256", 1.0, 1.0), ("stem", 1.0, 1.25)):
        floor = bounds.floors(bounds.KERNEL_WORK[case], "cortex-a76", dot=True)["route_cycles"]
        rows.append(row("XNNPACK", "cortex-a76", case, floor * room))
        rows.append(row("edgeinf", "cortex-a76", case, floor * room / now, isa="neondot"))
    (found,) = bounds.model_gaps(rows)
    # shares of XNNPACK's 80: 0.5 / 2 + 0.375 / 1 + 0.125 / 1.25 + 0.25 (ADD as it is) = 0.975
    assert found["ceiling (kernel work at its route ceilings)"] == round(1 / 0.975, 2)


def test_a_layer_that_shifts_right_takes_the_cheaper_of_the_split_float_form_and_the_fixed_point_steps():
    layer = {"group": "conv/FC GEMM", "work": vars(bounds.Work("gemm", 16 * 100, 4)), "split": False}
    unsplit = bounds.layer_floor(layer, "cortex-a76", dot=True)
    split = bounds.layer_floor({**layer, "split": True}, "cortex-a76", dot=True)
    # 100 blocks of 16 outputs: 4 SDOTs and 20 requantizing operations on two vector pipes; with
    # a right shift the float form needs 8 more (28), the fixed-point steps 22
    assert unsplit == pytest.approx(100 * (4 + 20) / 2) and split == pytest.approx(100 * (4 + 22) / 2)


def test_add_costs_twenty_vector_operations_per_16_values_by_its_int16_linear_form():
    add = {"group": "ADD", "values": 16 * 10}
    assert bounds.layer_floor(add, "cortex-a76", dot=True) == pytest.approx(10 * 20 / 2)
    # on the A53 the eight SMLALs of 64-bit halves issue one a cycle, the rest as 128-bit operations twice
    assert bounds.layer_floor(add, "cortex-a53", dot=False) >= 10 * 20


def test_the_layers_of_a_real_int8_model_are_its_planned_steps():
    pytest.importorskip("numpy")
    from edgeinf.quantize import int8_path

    layers = bounds.model_layers(str(int8_path("face_detection_short_range")))
    groups = [layer["group"] for layer in layers]
    assert groups.count("direct conv") == 1 and groups.count("depthwise") == 16 and groups.count("ADD") == 16
    assert groups.count("conv/FC GEMM") == 20
    stem = layers[groups.index("direct conv")]  # 5x5 stride 2, 3 -> 24 channels, 128 -> 64
    assert stem["work"] == vars(bounds.Work("gemm", 64 * 64 * 24, 5 * 5 * 3))
    # int8 TFLite rescales every layer down: a right shift, rounded half away from zero
    assert all(layer["split"] for layer in layers if layer["group"] != "ADD")


def test_a_model_floor_sums_its_layers_floors_and_keeps_the_other_steps_as_they_run():
    groups = {"depthwise": 40, "conv/FC GEMM": 30, "ADD": 20, "other steps": 6, "outside edgeinf": 4}
    rows = [
        row("XNNPACK", "cortex-a76", "m int8", 80),
        row("edgeinf", "cortex-a76", "m int8", 100, isa="neondot", by_group=groups),
    ]
    layers = [
        {"group": "conv/FC GEMM", "work": vars(bounds.Work("gemm", 16, 4)), "split": True},  # 13 cycles
        {"group": "ADD", "values": 32},  # 20 cycles
    ]
    (found,) = bounds.model_floors(rows, {"m int8": layers})
    assert found["conv/FC GEMM floor share"] == round(13 / 80, 3) and found["ADD floor share"] == 0.25
    assert found["depthwise floor share"] == 0.0 and found["other steps share (as now)"] == 0.075
    assert found["ceiling (every layer at its floor)"] == round(80 / (13 + 20 + 6 + 4), 2)
    assert bounds.model_floors(rows, {}) == []  # no layers for the model: no floor
    # the parts, each bound on its own, add up to twice the whole: floors and shares alike halve
    rows[1]["throughput_cycles"] = 50
    (found,) = bounds.model_floors(rows, {"m int8": layers})
    assert found["ADD floor share"] == 0.125 and found["other steps share (as now)"] == round(3 / 80, 3)
    assert found["ceiling (every layer at its floor)"] == round(80 / ((13 + 20 + 6 + 4) / 2), 2)
