"""How fast the estimated kernels could get: the floors under tools/arm64/estimate.py's model.

For each kernel case the least work an exact int8 kernel must issue, written as instructions
and costed by estimate.throughput_cycles (the same issue limits per core as the estimate):

* multiplies: the multiply (or dot-product) instructions alone, for the cheapest way to
  multiply the case's int8 products on that core (SMULL/SMLAL of eight int8 lanes, or
  SMLAL/SMLAL2 of four int16 lanes, or SDOT of sixteen int8 pairs where the core has it,
  k or a depthwise filter's rows padded to fours). No kernel of these routes can issue less.
* route: a whole exact route, the cheapest of those listed in ROUTES_OF: the multiplies, the
  widening of their int16 (or int8) products into int32 accumulators, the reduction of
  accumulators that hold one output in several lanes, the interleaving a depthwise SDOT needs
  (each input column once), and the requantization of every output as edgeinf does it (the float form: SCVTF, FMLA, FCVTNS, saturating narrows and an
  int8 clamp). Loads, stores and loop control are left out, so it is a floor, not a target.

The ceiling of a case is XNNPACK's estimated cycles over the floor: the speedup edgeinf would
reach if it issued nothing but the floor's instructions. A ceiling under the goal shows that
the goal is out of reach under the model by any kernel of that route family.

The estimate's second method gets its own ceiling: the route's instructions, one block per 16
outputs with no instruction waiting for another, through llvm-mca's model of the core
(mca_route_floor), against XNNPACK's llvm-mca cycles. The two methods cost the same
instructions differently (llvm-mca's A53 model issues a 128-bit operation in one pass, its A76
model prices the requantization's conversions higher), so each is held to its own floor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import estimate

GOALS = {"cortex-a53": 1.0, "cortex-a72": 1.0, "cortex-a76": 1.2}


@dataclass(frozen=True)
class Work:
    """A kernel case's work: outputs (int8 values written), each the sum of k products."""

    kind: str  # "gemm": k runs over input channels (and taps); "dw": k taps of one channel
    outputs: int
    k: int
    k_h: int = 0  # a depthwise filter's rows, and its horizontal stride
    stride: int = 1

    @property
    def macs(self) -> int:
        return self.outputs * self.k


# bench_int8's shapes, as estimate_guest builds them
KERNEL_WORK = {
    "gemm256": Work("gemm", 256 * 256, 256),
    "fc1024": Work("gemm", 1000, 1024),
    "conv1x1_28": Work("gemm", 28 * 28 * 128, 128),
    "conv1x1_14": Work("gemm", 14 * 14 * 512, 512),
    "conv3x3_28": Work("gemm", 28 * 28 * 64, 9 * 64),
    "stem": Work("gemm", 112 * 112 * 32, 27),
    "dw56": Work("dw", 56 * 56 * 128, 9, k_h=3),
    "dw28s2": Work("dw", 14 * 14 * 256, 9, k_h=3, stride=2),
}

# The requantization of 16 outputs as edgeinf's NEON kernels do it (rq_neon_inl.h).
REQUANTIZE_16 = [
    (4, "scvtf v0.4s, v0.4s"),
    (4, "fmla v0.4s, v1.4s, v2.4s"),
    (4, "fcvtns v0.4s, v0.4s"),
    (2, "sqxtn v0.4h, v1.4s"),
    (2, "sqxtn2 v0.8h, v1.4s"),
    (1, "sqxtn v0.8b, v1.8h"),
    (1, "sqxtn2 v0.16b, v1.8h"),
    (1, "smax v0.16b, v0.16b, v1.16b"),
    (1, "smin v0.16b, v0.16b, v1.16b"),
]


def _ceil_to(n: int, m: int) -> int:
    return -(-n // m) * m


def _gemm_int8_pairs(w: Work) -> list[tuple[float, str]]:
    """Eight int8 products along k per SMULL/SMLAL, two summed in int16 (weights in
    [-127, 127]), SADALP into int32; each output's four lanes reduced by ADDP (3 per 4 outputs)."""
    per_output = _ceil_to(w.k, 16) / 16
    return [
        (w.outputs * per_output, "smull v0.8h, v1.8b, v2.8b"),
        (w.outputs * per_output, "smlal v0.8h, v1.8b, v2.8b"),
        (w.outputs * per_output, "sadalp v0.4s, v1.8h"),
        (w.outputs * 3 / 4, "addp v0.4s, v1.4s, v2.4s"),
    ]


def _gemm_int16_lanes(w: Work) -> list[tuple[float, str]]:
    """Outputs in the lanes (no reduction), int16 operands, SMLAL/SMLAL2 by element: 4 products each."""
    return [
        (w.macs / 8, "smlal v0.4s, v1.4h, v2.h[0]"),
        (w.macs / 8, "smlal2 v0.4s, v1.8h, v2.h[0]"),
    ]


def _gemm_sdot(w: Work) -> list[tuple[float, str]]:
    """Outputs in the lanes, SDOT by element: four products of four k each, k padded to 4."""
    return [(w.outputs * _ceil_to(w.k, 4) / 16, "sdot v0.4s, v1.16b, v2.4b[0]")]


def _dw_int8_pairs(w: Work) -> list[tuple[float, str]]:
    """Per 8 channels: SMULL of one tap, SMLAL of a second into int16, SADDW/SADDW2 into int32."""
    units, pairs = w.outputs / 8, -(-w.k // 2)
    return [
        (units * pairs, "smull v0.8h, v1.8b, v2.8b"),
        (units * (w.k - pairs), "smlal v0.8h, v1.8b, v2.8b"),
        (units * pairs, "saddw v0.4s, v0.4s, v1.4h"),
        (units * pairs, "saddw2 v0.4s, v0.4s, v1.8h"),
    ]


def _dw_int16(w: Work) -> list[tuple[float, str]]:
    """Per 8 channels and tap: inputs widened to int16 (SXTL), SMLAL/SMLAL2 into int32."""
    units = w.outputs / 8 * w.k
    return [
        (units, "sxtl v0.8h, v1.8b"),
        (units, "smlal v0.4s, v1.4h, v2.4h"),
        (units, "smlal2 v0.4s, v1.8h, v2.8h"),
    ]


def _dw_sdot(w: Work) -> list[tuple[float, str]]:
    """Per 16 channels: SDOT of four filter rows of one filter column (rows padded to 4), the
    inputs interleaved so (two rounds of ZIP, 8 per 16 channels of four rows), each input
    column once: stride columns per output pixel."""
    units, groups = w.outputs / 16, -(-w.k_h // 4)
    return [
        (units * (w.k // w.k_h) * groups * 4, "sdot v0.4s, v1.16b, v2.16b"),
        (units * w.stride * groups * 4, "zip1 v0.16b, v1.16b, v2.16b"),
        (units * w.stride * groups * 4, "zip1 v0.8h, v1.8h, v2.8h"),
    ]


ROUTES_OF = {
    "gemm": {
        "int8 pairs + SADALP": (_gemm_int8_pairs, False),
        "int16 SMLAL by lane": (_gemm_int16_lanes, False),
        "SDOT by lane": (_gemm_sdot, True),
    },
    "dw": {
        "int8 pairs + SADDW": (_dw_int8_pairs, False),
        "int16 SMLAL": (_dw_int16, False),
        "SDOT of interleaved rows": (_dw_sdot, True),
    },
}


def _cycles(parts: list[tuple[float, str]], cpu: str) -> tuple[float, str]:
    insns = [estimate.Insn(0, count, 0, text) for count, text in parts if count]  # type: ignore[arg-type]
    return estimate.throughput_cycles(insns, cpu)


def _is_multiply(text: str) -> bool:
    return estimate.classify(text) in ("dot", "mul")


def floors(work: Work, cpu: str, dot: bool) -> dict:
    """The multiply floor and the cheapest route's floor (cycles, binding resource, route name)."""
    requantize = [(work.outputs / 16 * n, text) for n, text in REQUANTIZE_16]
    best_mul, best_route = None, None
    for name, (route, needs_dot) in ROUTES_OF[work.kind].items():
        if needs_dot and not dot:
            continue
        parts = route(work)
        mul = _cycles([p for p in parts if _is_multiply(p[1])], cpu)
        whole = _cycles(parts + requantize, cpu)
        if best_mul is None or mul[0] < best_mul[0]:
            best_mul = mul
        if best_route is None or whole[0] < best_route[0]:
            best_route = (*whole, name)
    assert best_mul and best_route
    return {"multiply_cycles": best_mul[0], "route_cycles": best_route[0], "route_bound": best_route[1],
            "route": best_route[2]}  # fmt: skip


# ------------------------------------------------------------------ the floors under llvm-mca

# Registers of a floor block: the operands every instruction reads (by-element forms take
# their indexed operand from v0-v15), and the destinations, taken in turn so that no
# instruction waits for another: what the scheduling model gives for the mix alone.
_SOURCES = ("v13", "v14", "v15")
_DESTINATIONS = [f"v{n}" for n in range(32) if f"v{n}" not in _SOURCES]
_REGISTER = re.compile(r"\bv\d+")


def _floor_block(parts: list[tuple[float, str]], units: float) -> tuple[list[str], int]:
    """One unit of a floor's instructions (parts counted over ``units``) as a loop body: each
    kind's copies spread evenly through the block, every destination its own register."""
    per_unit = [(count / units, text) for count, text in parts if count]
    scale = next((m for m in (1, 2, 4, 8) if all(abs(n * m - round(n * m)) < 1e-6 for n, _ in per_unit)), 8)
    placed = []
    for count, text in per_unit:
        copies = max(1, round(count * scale))
        placed += [((j + 0.5) / copies, text) for j in range(copies)]
    block = []
    for n, (_, text) in enumerate(sorted(placed, key=lambda p: p[0])):
        registers = iter([_DESTINATIONS[n % len(_DESTINATIONS)], *_SOURCES])  # the first is written
        block.append(_REGISTER.sub(lambda _m, used=registers: next(used), text))
    return block, scale


def mca_floor_cycles(parts: list[tuple[float, str]], units: float, cpu: str, llvm_mca: str) -> float | None:
    """llvm-mca's cycles for a floor's instructions (``parts``, counted over ``units`` units
    of work): one unit's worth as a block with no dependence between its instructions, run
    back to back through the core's scheduling model. None where llvm-mca gives no figure."""
    block, scale = _floor_block(parts, units)
    (per_iteration,) = estimate.mca_cycles_per_iteration([block], cpu, llvm_mca)
    return per_iteration * units / scale if per_iteration is not None else None


def mca_route_floor(work: Work, cpu: str, dot: bool, llvm_mca: str) -> float | None:
    """The least llvm-mca's model of ``cpu`` gives any exact route of ``work`` (floors'
    routes, with edgeinf's requantization), in cycles; per 16 outputs a block."""
    units = work.outputs / 16
    requantize = [(units * n, text) for n, text in REQUANTIZE_16]
    found = [
        mca_floor_cycles(route(work) + requantize, units, cpu, llvm_mca)
        for route, needs_dot in ROUTES_OF[work.kind].values()
        if dot or not needs_dot
    ]
    known = [f for f in found if f]
    return min(known) if known else None


def _not_dispatched(row: dict) -> bool:
    """A path the board does not run: a Pi 5 runs the dot-product one."""
    return row["cpu"] == "cortex-a76" and row["isa"] != "neondot"


def _xnnpack_row(rows: list[dict], mine: dict) -> dict | None:
    """XNNPACK's row for the CPU and case of edgeinf's row ``mine``."""
    key = (mine["cpu"], mine["case"])
    return next((r for r in rows if r["contender"] == "XNNPACK" and (r["cpu"], r["case"]) == key), None)


def kernel_bounds(rows: list[dict], llvm_mca: str | None = None) -> list[dict]:
    """Per kernel case, CPU and edgeinf path: the speedup now and its ceilings by the issue
    limits and, given llvm-mca's path, by llvm-mca (XNNPACK's llvm-mca cycles over
    mca_route_floor)."""
    out = []
    for mine in rows:
        work = KERNEL_WORK.get(mine["case"])
        if mine["contender"] != "edgeinf" or work is None or _not_dispatched(mine):
            continue
        theirs = _xnnpack_row(rows, mine)
        if theirs is None or not mine["throughput_cycles"]:
            continue
        f = floors(work, mine["cpu"], dot=mine["isa"] == "neondot")
        xnn = theirs["throughput_cycles"]
        mca_now = (
            round(theirs["mca_cycles"] / mine["mca_cycles"], 2) if theirs["mca_cycles"] and mine["mca_cycles"] else None
        )
        out.append({
            "case": mine["title"], "cpu": mine["cpu"], "edgeinf_path": f"edgeinf {mine['isa']}",
            "goal": GOALS[mine["cpu"]],
            "now_issue_limits": round(xnn / mine["throughput_cycles"], 2), "now_llvm_mca": mca_now,
            "ceiling_multiplies": round(xnn / f["multiply_cycles"], 2),
            "ceiling_route": round(xnn / f["route_cycles"], 2),
            "route": f"{f['route']} ({f['route_bound']}-bound)",
        })  # fmt: skip
        if llvm_mca:
            floor = mca_route_floor(work, mine["cpu"], mine["isa"] == "neondot", llvm_mca)
            known = floor and theirs["mca_cycles"]
            out[-1]["ceiling_route_llvm_mca"] = round(theirs["mca_cycles"] / floor, 2) if known else None
    return out


# ------------------------------------------------------------------ whole models

# The engine's work by kind, from the function that holds each instruction (first match).
GROUPS = [
    ("depthwise", ("DwWeights", "dwconv", "Depthwise")),
    ("conv/FC GEMM", ("PairKernel", "K16Kernel", "DotKernel", "dot_tile", "gemm", "gather_rows", "FullyConnected")),
    ("direct conv", ("conv2d_direct", "conv_window_rows")),
    ("ADD", ("qs8_add", "AddStep")),
]
# The kernel cases that stand for each kind of work in a model's ceiling (model_gaps).
CASES_OF_GROUP = {
    "depthwise": ("dw56", "dw28s2"),
    "conv/FC GEMM": ("gemm256", "fc1024", "conv1x1_28", "conv1x1_14", "conv3x3_28"),
    "direct conv": ("stem",),
}
OTHER_STEPS = "other steps"
OUTSIDE = "outside edgeinf"  # libc, Python, numpy: the call's way in and out


def group_of(owner: str, libraries: set[str]) -> str:
    """The kind of work of a by_function owner: a function of the extension, or a library
    (or "(unmapped)") outside it."""
    if owner in libraries or owner == "(unmapped)":
        return OUTSIDE
    for name, needles in GROUPS:
        if any(n in owner for n in needles):
            return name
    return OTHER_STEPS


def group_cycles(parts, libraries: set[str]) -> dict[str, float]:
    """Issue-limit cycles per kind of work, from by_function's parts (each bound on its own).
    libraries: the names of the libraries mapped beside the extension."""
    out: dict[str, float] = {}
    for part in parts:
        key = group_of(part.name, libraries)
        out[key] = out.get(key, 0.0) + part.cycles
    return out


def room_of_groups(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (CPU, edgeinf path) and kind of kernel work: the most any of its kernel cases can
    still shrink under the model, its route ceiling over its speedup now (at least 1)."""
    room: dict[tuple[str, str], dict[str, float]] = {}
    case_of = {r["title"]: r["case"] for r in rows}  # kernel_bounds names a case by its title
    for b in kernel_bounds(rows):
        group = next((g for g, cases in CASES_OF_GROUP.items() if case_of.get(b["case"]) in cases), None)
        if group is None or not b["now_issue_limits"]:
            continue
        found = room.setdefault((b["cpu"], b["edgeinf_path"]), {})
        found[group] = max(found.get(group, 1.0), b["ceiling_route"] / b["now_issue_limits"])
    return room


def model_gaps(rows: list[dict]) -> list[dict]:
    """Per model, CPU and the path the board dispatches: edgeinf's cycles by kind of work as a
    share of XNNPACK's whole model (they add up to 1 / speedup; the goal needs 1 / goal).

    Where the estimate ran the kernel cases of every kind of kernel work, also a ceiling: the
    model's speedup if each kind's share shrank by the most any of its kernel cases still can
    (room_of_groups), ADD, the other steps and the way in and out staying as they are. It
    assumes a model's layers of a kind sit no farther from their floors than the kernel case
    farthest from its own."""
    room = room_of_groups(rows)
    out = []
    for mine in rows:
        if mine["contender"] != "edgeinf" or "by_group" not in mine:
            continue
        if _not_dispatched(mine):
            continue
        theirs = _xnnpack_row(rows, mine)
        if theirs is None or not mine["throughput_cycles"]:
            continue
        xnn, groups = theirs["throughput_cycles"], mine["by_group"]
        # each group is bound by its own busiest resource, so their cycles add up to more than
        # the model's: scale them to add up to it
        scale = mine["throughput_cycles"] / (sum(groups.values()) or 1)
        row = {
            "model": mine["case"], "cpu": mine["cpu"], "edgeinf_path": f"edgeinf {mine['isa']}",
            "now_issue_limits": round(xnn / mine["throughput_cycles"], 2), "needed_share": round(1 / GOALS[mine["cpu"]], 2),
        }  # fmt: skip
        for name in [g for g, _ in GROUPS] + [OTHER_STEPS, OUTSIDE]:
            row[f"{name} share"] = round(groups.get(name, 0.0) * scale / xnn, 3)
        kinds = room.get((mine["cpu"], row["edgeinf_path"]), {})
        best = sum(groups.get(name, 0.0) * scale / xnn / kinds.get(name, 1.0) for name in groups)
        known = best and all(g in kinds for g in CASES_OF_GROUP)
        row["ceiling (kernel work at its route ceilings)"] = round(1 / best, 2) if known else None
        out.append(row)
    return out


# ------------------------------------------------------------------ whole models, layer by layer

# The requantization's extra work where a layer's reference rounds half away from zero (a
# right shift, or FULLY_CONNECTED's double): the float form's offset chosen by the sign of
# each accumulator (rq_neon_inl.h's float_form_split), per 16 outputs. Every layer of the
# face models has one; the float form without it would be off on about one accumulator in 2^r.
SPLIT_16 = [(4, "cmlt v0.4s, v1.4s, #0"), (4, "bsl v0.16b, v1.16b, v2.16b")]

# ... or, where every channel shifts right, the fixed-point steps themselves, per 16 outputs:
# SQRDMULH, then SSRA by 31 (a negative value down by one) and SRSHL (rounding half up: half
# away from zero together), saturating narrows with the zero point added in int16, the clamp.
FIXED_RIGHT_16 = [
    (4, "sqrdmulh v0.4s, v0.4s, v1.4s"),
    (4, "ssra v0.4s, v0.4s, #31"),
    (4, "srshl v0.4s, v0.4s, v1.4s"),
    (2, "sqxtn v0.4h, v1.4s"),
    (2, "sqxtn2 v0.8h, v1.4s"),
    (2, "sqadd v0.8h, v0.8h, v1.8h"),
    (1, "sqxtn v0.8b, v1.8h"),
    (1, "sqxtn2 v0.16b, v1.8h"),
    (1, "smax v0.16b, v0.16b, v1.16b"),
    (1, "smin v0.16b, v0.16b, v1.16b"),
]

# ADD of 16 values by its cheapest exact route: the linear form (qs8_binary/binary.h's
# AddLinear) with int16 coefficients. Both inputs widened to int16, their products summed
# into int32 lanes by SMULL/SMLAL by element, a narrowing floor shift, int8 saturation and
# the clamp; the bias is left out.
ADD_16 = [
    (4, "sxtl v0.8h, v1.8b"),
    (8, "smlal v0.4s, v1.4h, v2.h[0]"),
    (4, "sqshrn v0.4h, v1.4s, #8"),
    (2, "sqxtn v0.8b, v1.8h"),
    (1, "smax v0.16b, v0.16b, v1.16b"),
    (1, "smin v0.16b, v0.16b, v1.16b"),
]

# Input channels up to which a spatial conv runs on the direct kernel (conv2d.h's
# kSmallInputChannels): by_function counts those layers as "direct conv".
SMALL_INPUT_CHANNELS = 4


def model_layers(path: str) -> list[dict]:
    """The work of an int8 model's layers as the engine plans them (edgeinf.engine.plan):
    per conv, depthwise and fully connected step its Work, kind of work (GROUPS' names) and
    whether its requantization is split; per ADD its values. Imports edgeinf (the host's)."""
    from edgeinf.engine.plan import plan_model  # noqa: PLC0415 (the rest of this module is stdlib)
    from edgeinf.formats.tflite import read_tflite  # noqa: PLC0415

    layers = []
    for step in plan_model(read_tflite(path)).steps:
        a = step.args
        if step.method in ("conv2d", "depthwise_conv2d"):
            batch, _, _, in_c, out_h, out_w, _, stride_w = a["geometry"][:8]
            pixels, (n, k_h, k_w, last) = batch * out_h * out_w, a["weights"].shape
            split = bool((a["shift"] < 0).any())
            if step.method == "depthwise_conv2d":  # weights [1, k_h, k_w, channels]
                work, group = Work("dw", pixels * last, k_h * k_w, k_h=k_h, stride=stride_w), "depthwise"
            else:
                work = Work("gemm", pixels * n, k_h * k_w * last)
                direct = k_h * k_w > 1 and in_c <= SMALL_INPUT_CHANNELS
                group = "direct conv" if direct else "conv/FC GEMM"
            layers.append({"group": group, "work": vars(work), "split": split})
        elif step.method == "fully_connected":
            n, k = a["weights"].shape
            layers.append({"group": "conv/FC GEMM", "work": vars(Work("gemm", a["rows"] * n, k)), "split": True})
        elif step.method == "add":
            values = 1
            for d in a["shape"]:
                values *= d
            layers.append({"group": "ADD", "values": values})
    return layers


def layer_floor(layer: dict, cpu: str, dot: bool) -> float:
    """The least a layer of model_layers needs (issue-limit cycles): the cheapest route of its
    work with the cheapest exact requantization (the float form, or where the reference
    shifts right the split float form or the fixed-point steps), or ADD by ADD_16."""
    if layer["group"] == "ADD":
        return _cycles([(layer["values"] / 16 * n, text) for n, text in ADD_16], cpu)[0]
    work = Work(**layer["work"])
    forms = [REQUANTIZE_16 + SPLIT_16, FIXED_RIGHT_16] if layer["split"] else [REQUANTIZE_16]
    best = None
    for requantize in forms:
        parts = [(work.outputs / 16 * n, text) for n, text in requantize]
        for route, needs_dot in ROUTES_OF[work.kind].values():
            if needs_dot and not dot:
                continue
            cycles = _cycles(route(work) + parts, cpu)[0]
            best = cycles if best is None else min(best, cycles)
    assert best is not None
    return best


def model_floors(rows: list[dict], layers: dict[str, list[dict]]) -> list[dict]:
    """Per model, CPU and the path the board dispatches: each kind of layer work at its floor,
    summed layer by layer (layer_floor), as a share of XNNPACK's whole model; the other steps
    and the way in and out as edgeinf runs them now. The ceiling is XNNPACK's cycles over that
    sum: what edgeinf would reach if every conv, depthwise, fully connected and ADD layer issued
    only its multiplies, the interleaving a depthwise SDOT needs and its exact requantization,
    with no load, store or loop."""
    out = []
    for mine in rows:
        found = layers.get(mine["case"])
        if mine["contender"] != "edgeinf" or "by_group" not in mine or not found or _not_dispatched(mine):
            continue
        theirs = _xnnpack_row(rows, mine)
        if theirs is None or not mine["throughput_cycles"]:
            continue
        xnn, groups = theirs["throughput_cycles"], mine["by_group"]
        scale = mine["throughput_cycles"] / (sum(groups.values()) or 1)  # as in model_gaps
        floor: dict[str, float] = {}
        for layer in found:
            # in the currency of the scaled shares: parts bound on their own add up to more
            # than the whole, whose resources the model lets the layers share
            cost = layer_floor(layer, mine["cpu"], dot=mine["isa"] == "neondot") * scale
            floor[layer["group"]] = floor.get(layer["group"], 0.0) + cost
        as_now = {name: groups.get(name, 0.0) * scale for name in (OTHER_STEPS, OUTSIDE)}
        row = {
            "model": mine["case"], "cpu": mine["cpu"], "edgeinf_path": f"edgeinf {mine['isa']}",
            "now_issue_limits": round(xnn / mine["throughput_cycles"], 2), "goal": GOALS[mine["cpu"]],
        }  # fmt: skip
        for name, _ in GROUPS:
            row[f"{name} floor share"] = round(floor.get(name, 0.0) / xnn, 3)
        for name, cycles in as_now.items():
            row[f"{name} share (as now)"] = round(cycles / xnn, 3)
        row["ceiling (every layer at its floor)"] = round(xnn / (sum(floor.values()) + sum(as_now.values())), 2)
        out.append(row)
    return out


KERNEL_TITLE = (
    "Ceilings of the kernel cases: XNNPACK's cycles over the least an exact kernel must issue "
    "(tools/arm64/bounds.py), by the issue limits and by llvm-mca (the floor's instructions, with no dependence "
    "between them, through the core's scheduling model); a ceiling under the goal is out of reach for that route "
    "family under that method"
)
MODEL_TITLE = (
    "Where the whole models' cycles go: edgeinf's issue-limit cycles by kind of work, as a share of XNNPACK's "
    "whole model (each kind's own cycles, scaled to add up to the model's: 1 / speedup; the goal needs them to add up to needed_share). "
    "Ceiling: the model's speedup with each kind of kernel work (depthwise, conv/FC GEMM, direct conv) shrunk by the most "
    "any of its kernel cases above still can (route ceiling / now), ADD, other steps and the way in and out as they are "
    "(an assumption, not a floor: the model's layers of a kind taken to be no farther from their floors than that case)"
)

FLOOR_TITLE = (
    "The whole models' floors, layer by layer (issue limits): every conv, depthwise, fully connected and ADD layer "
    "of the model at the least its cheapest exact route must issue (its multiplies, a depthwise SDOT's interleaving, "
    "its cheapest exact requantization (the float form with the split offsets the reference's rounding needs, or the fixed-point steps where every channel shifts right); ADD by its linear form with int16 "
    "coefficients; no loads, stores or loops), as shares of XNNPACK's whole model, the other steps and the way in "
    "and out as edgeinf runs them now, all scaled as in the table above (parts bound on their own add up to more than "
    "the whole). Ceiling: XNNPACK's cycles over that sum, the most edgeinf can reach under "
    "the model while the other steps stay as they are"
)


def tables(rows: list[dict], layers: dict[str, list[dict]] | None = None) -> list[dict]:
    """The bound tables of an estimate, as benchmarks/README.md renders them; layers: the
    models' model_layers by case name, for the layer-by-layer floors."""
    out = [
        {"title": KERNEL_TITLE, "rows": kernel_bounds(rows, estimate.find_llvm_tool("llvm-mca"))},
        {"title": MODEL_TITLE, "rows": model_gaps(rows)},
    ]
    if layers:
        out.append({"title": FLOOR_TITLE, "rows": model_floors(rows, layers)})
    return out
