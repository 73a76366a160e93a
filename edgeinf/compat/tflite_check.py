"""Check a .tflite model against a TFLite runtime's resolver and XNNPACK tables."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from ..formats.tflite import Operator, TfliteModel
from . import tables
from .delegation import verdict_for
from .features import node_features, static_tensors
from .graph import activation_memory, macs, partition, transition_bytes
from .report import BackendVerdict, NodeReport, NodeStatus

CONTROL_FLOW = ("WHILE", "IF", "CALL_ONCE", "CALL", "STABLEHLO_WHILE", "STABLEHLO_CASE")
# dtypes no pip TFLite runtime feeds through its Python API or that only a few kernels take
_RARE_DTYPES = (
    "INT4",
    "UINT4",
    "INT2",
    "FLOAT8_E4M3FN",
    "FLOAT8_E5M2",
    "BFLOAT16",
    "COMPLEX128",
    "RESOURCE",
    "VARIANT",
)

_FEATURE_HINTS = {
    "static": "XNNPACK needs constant weights, bias, shapes and axes: fold them into constants at conversion",
    "beta": "XNNPACK takes SOFTMAX only with beta = 1.0",
    "alpha": "give LEAKY_RELU its alpha option (a missing option leaves it on the CPU)",
    "dtype": "this runtime's XNNPACK takes this op only in float32 here; ai-edge-litert also takes int8 (QS8) ops",
    "n_inputs": "XNNPACK takes CONCATENATION of 2..4 inputs here",
    "unit_strides": "XNNPACK takes STRIDED_SLICE only with unit strides",
    "filter": "XNNPACK does not take 1x1 pooling with a stride above 1",
}


def _fmt(features: dict, keys) -> str:
    return ", ".join(f"{k}={features.get(k)!r}" for k in keys)


# features that select a different kernel family: no answer is extrapolated across them
_TYPE_FEATURES = ("dtype", "weights")

_TYPE_ERROR = re.compile(r"(?i)only (currently )?supports|unsupported|not supported|type|supported currently")
_VALUE_ERROR = re.compile(r"(?i)values|data\[")


def kernel_rejects(xtable: dict | None, target: tables.Target, op: str, features: dict) -> NodeStatus | None:
    """A probe with exactly these features that the runtime could not run: its kernel failed
    to prepare (CONV_2D without bias), rejected the type at invoke (NEG on int8 in 2.14), or
    the process crashed (DEPTHWISE_CONV_2D without bias)."""
    if xtable is None:
        return None
    for r in xtable["ops"].get(op, []):
        error = r.get("error") or ""
        stage, _, message = error.partition(": ")
        fatal = stage in ("allocate", "crash") or (
            stage == "invoke" and _TYPE_ERROR.search(message) and not _VALUE_ERROR.search(message)
        )
        if fatal and r.get("features") and all(features.get(k) == v for k, v in r["features"].items()):
            what = "crashed" if stage == "crash" else f"fails at {stage}"
            return NodeStatus(
                "unsupported",
                f"{target.label} {what} on {op} with {_fmt(features, r['features'])} ({message[:120]})",
                "check the op's inputs, options and dtype against what the runtime's kernel takes (e.g. a bias tensor)",
                f"probe:xnnpack {target.label} (a one-op probe with these features failed)",
            )
    return None


def xnnpack_status(xtable: dict | None, target: tables.Target, op: str, features: dict) -> NodeStatus:
    """Whether XNNPACK takes a node, from the probe records of the target runtime."""
    source = f"probe:xnnpack {target.label}"
    if xtable is None:
        return NodeStatus("unknown", f"no XNNPACK table for {target.label}", "", "")
    records = [r for r in xtable["ops"].get(op, []) if r.get("delegated") is not None and r.get("features")]
    if not records:
        return NodeStatus("cpu", f"XNNPACK on {target.label} did not take {op} in any probe", "", source)
    if not any(r["delegated"] for r in records):
        return NodeStatus("cpu", f"XNNPACK on {target.label} does not take {op}", "", source)
    for r in records:  # a probe with exactly this node's features
        if all(features.get(k) == v for k, v in r["features"].items()):
            if r["delegated"]:
                return NodeStatus("delegated", "", "", source)
            diff = [k for k, v in records[0]["features"].items() if r["features"].get(k) != v]
            hint = next((_FEATURE_HINTS[k] for k in diff if k in _FEATURE_HINTS), "")
            return NodeStatus(
                "cpu", f"XNNPACK on {target.label} does not take {op} with {_fmt(features, diff)}", hint, source
            )
    # The element and weight types decide which XNNPACK kernels exist at all (int8 PRELU has
    # none while float PRELU is taken): never carry an answer over to a type no probe had.
    for k in _TYPE_FEATURES:
        if k in features and not any(r["features"].get(k) == features[k] for r in records if k in r["features"]):
            probed = sorted({str(r["features"][k]) for r in records if k in r["features"]})
            if not probed:
                continue
            return NodeStatus(
                "unknown",
                f"no probe of {op} with {k}={features[k]!r} on {target.label} (probed: {', '.join(probed)})",
                "load the model to see what the runtime does: edgeinf.load reports it in model.details",
                source,
            )
    # no probe matches exactly: start from the most similar probe, and reject on any feature
    # value that every probe having it left on the CPU
    nearest = max(records, key=lambda r: sum(features.get(k) == v for k, v in r["features"].items()))
    diffs = [k for k, v in nearest["features"].items() if features.get(k) != v]
    rejected = []
    for k in {k for r in records for k in r["features"]}:
        having = [r for r in records if k in r["features"] and r["features"][k] == features.get(k)]
        if (
            having
            and not any(r["delegated"] for r in having)
            and any(r["delegated"] for r in records if k in r["features"])
        ):
            rejected.append(k)
    if rejected:
        rejected.sort()
        hint = next((_FEATURE_HINTS[k] for k in rejected if k in _FEATURE_HINTS), "")
        return NodeStatus(
            "cpu", f"XNNPACK on {target.label} does not take {op} with {_fmt(features, rejected)}", hint, source
        )
    if not nearest["delegated"]:
        return NodeStatus(
            "cpu",
            f"XNNPACK on {target.label} does not take {op} like this (nearest probe: {_fmt(nearest['features'], nearest['features'])})",
            "",
            source,
        )
    if diffs:
        return NodeStatus(
            "delegated",
            f"assumed: {_fmt(features, diffs)} not probed; the nearest probe was taken",
            "",
            source + " (extrapolated)",
        )
    return NodeStatus("delegated", "", "", source)


def _other_targets_with(op: str, version: int, current: tables.Target) -> list[str]:
    out = []
    for package in tables.TFLITE_PACKAGES:
        for v in tables.versions("tflite", package):
            if (package, v) == (current.package, current.version):
                continue
            if version in tables.load(f"tflite_{package}_{v}")["builtins"].get(op, []):
                out.append(f"{package} {v}")
    return out


def runtime_status(op: Operator, resolver: dict, target: tables.Target) -> NodeStatus:
    """Whether the target runtime can create this node at all."""
    oc = op.opcode
    source = f"probe:resolver {target.label}"
    if oc.name.startswith("UNKNOWN_"):
        return NodeStatus(
            "unsupported",
            f"op code {oc.code} is newer than every schema edgeinf knows",
            "upgrade edgeinf and the runtime, or re-convert with an older converter",
            "schema",
        )
    if oc.is_custom:
        name = oc.custom_code or ""
        if oc.is_flex:
            return NodeStatus(
                "unsupported",
                f"Select TensorFlow op {name} needs the Flex delegate, which {target.label} does not link "
                "(fails at allocate_tensors)",
                "re-convert with only TFLITE_BUILTINS (no SELECT_TF_OPS), or replace the op",
                source,
            )
        entry = resolver.get("custom_ops", {}).get(name)
        if entry and entry.get("registered"):
            return NodeStatus("cpu", f"custom op {name} is registered in {target.label}", "", source)
        return NodeStatus(
            "unsupported",
            f"custom op {name} is not registered in {target.label} (allocate_tensors fails: Encountered unresolved custom op)",
            f"register a kernel for {name} with the interpreter, or replace it with builtins / move it to post-processing",
            source,
        )
    if oc.name in resolver.get("unknown_codes", []):
        have = _other_targets_with(oc.name, oc.version, target)
        return NodeStatus(
            "unsupported",
            f"{target.label} predates op {oc.name} (code {oc.code}): 'Op builtin_code out of range'",
            ("use " + " or ".join(have)) if have else "replace the op or re-convert",
            source,
        )
    versions = resolver["builtins"].get(oc.name, [])
    if oc.version in versions:
        return NodeStatus("cpu", "", "", source)
    if not versions:
        have = _other_targets_with(oc.name, oc.version, target)
        return NodeStatus(
            "unsupported",
            f"{target.label} has no kernel for {oc.name}",
            ("use " + " or ".join(have)) if have else f"replace {oc.name} or re-convert without it",
            source,
        )
    first_rt = tables.min_runtime().get(oc.name, {}).get(str(oc.version))
    have = _other_targets_with(oc.name, oc.version, target)
    hint = []
    if have:
        hint.append("upgrade to " + " or ".join(have))
    hint.append(f"re-convert with a converter that emits {oc.name} v{max(versions)} or older")
    reason = f"{target.label} has {oc.name} v{min(versions)}..v{max(versions)}, the model needs v{oc.version}"
    if first_rt:
        reason += f" (first in TF/TFLite {first_rt})"
    return NodeStatus("unsupported", reason, "; ".join(hint), source)


@lru_cache(maxsize=4096)
def _delegate_decision(target: tables.Target, op: str, features: tuple) -> NodeStatus:
    # nodes with the same op and features get the same answer: decide once per check session
    xtable = tables.xnnpack(target)
    f = dict(features)
    return kernel_rejects(xtable, target, op, f) or xnnpack_status(xtable, target, op, f)


def check_tflite(model: TfliteModel, target: tables.Target) -> tuple[list[NodeReport], BackendVerdict, dict]:
    """Per-node statuses for one TFLite target, the backend verdict, and model facts."""
    resolver = tables.resolver(target)
    xtable = tables.xnnpack(target)
    nodes: list[NodeReport] = []
    main_status: list[NodeStatus] = []
    for sg in model.subgraphs:
        static = static_tensors(sg)
        for op in sg.operators:
            st = runtime_status(op, resolver, target)
            if st.status == "cpu" and not op.opcode.is_custom:
                features = node_features(model, sg, op, static)
                xs = _delegate_decision(target, op.opcode.name, tuple(sorted(features.items())))
                if xs.status == "unsupported":
                    st = xs
                elif xs.status == "delegated":
                    st = NodeStatus("delegated", xs.reason, "", xs.source)
                elif xs.status in ("cpu", "unknown"):
                    st = NodeStatus(xs.status, xs.reason, xs.suggestion, xs.source)
            out_name = sg.tensors[op.outputs[0]].name if op.outputs and op.outputs[0] >= 0 else ""
            nodes.append(
                NodeReport(
                    op.index,
                    sg.index,
                    out_name,
                    op.opcode.key,
                    op.opcode.name if not op.opcode.is_custom else f"CUSTOM:{op.opcode.custom_code}",
                    op.opcode.version,
                    {"tflite": st},
                )
            )
            if sg.index == 0:
                main_status.append(st)

    sg = model.main
    blockers = tuple(
        f"node {n.index} ({n.key} v{n.version}): {n.status['tflite'].reason}"
        for n in nodes
        if n.status["tflite"].status == "unsupported"
    )
    counts = Counter(n.status["tflite"].status for n in nodes)
    subsets = partition(
        [op.inputs for op in sg.operators],
        [op.outputs for op in sg.operators],
        [s.status == "delegated" for s in main_status],
    )
    partitions = tuple(tuple(sorted(m)) for kind, m in subsets if kind)
    advice = int8_slowdown(model, subsets, target)
    transitions = max(0, len(subsets) - 1) if partitions else 0
    runnable = not blockers
    verdict = verdict_for(runnable, counts, len(partitions))
    note = target.note
    if xtable is None:
        note = ((note + "; ") if note else "") + "no XNNPACK table for this runtime: delegation not assessed"
    verdict_obj = BackendVerdict(
        backend="tflite",
        target=target.label,
        verdict=verdict,
        runnable=runnable,
        delegate="xnnpack",
        counts={k: counts.get(k, 0) for k in ("delegated", "cpu", "unsupported", "unknown")},
        partitions=partitions,
        transitions=transitions,
        transition_bytes=transition_bytes(sg, subsets) if partitions else 0,
        blockers=blockers,
        tables=tuple(
            t
            for t in (
                f"tflite_{target.package}_{target.version}.json ({resolver.get('method', '')[:60]}...)",
                f"xnnpack_{target.package}_{target.version}.json" if xtable else "",
                "tflite_min_runtime.json (" + tables.load("tflite_min_runtime")["source"] + ")",
            )
            if t
        ),
        note=note,
        advice=advice,
    )
    return nodes, verdict_obj, _facts(model)


_QUANTIZED_TYPES = ("INT8", "UINT8", "INT16")


def int8_slowdown(model: TfliteModel, subsets: list[tuple[bool, list[int]]], target: tables.Target) -> tuple[str, ...]:
    """A warning when a quantized model runs as several XNNPACK partitions with CPU nodes
    between them: each switch costs a round trip through the CPU kernels, and LiteRT's
    reference int8 kernels for those nodes are slow, so such a model often runs several
    times slower than its float original (face_landmark calibrated to int8: 21 partitions
    around int8 PRELU, 4.6x slower than float on ai_edge_litert 2.3.0)."""
    sg = model.main
    kinds = [kind for kind, _ in subsets]
    if kinds.count(True) < 2:
        return ()
    outputs = [sg.tensors[op.outputs[0]].dtype for op in sg.operators if op.outputs and op.outputs[0] >= 0]
    if sum(d in _QUANTIZED_TYPES for d in outputs) * 2 <= len(outputs):
        return ()  # a float model (or a float one with a few quantized tensors)
    first, last = kinds.index(True), len(kinds) - 1 - kinds[::-1].index(True)
    between = sorted(i for kind, members in subsets[first:last] if not kind for i in members)
    if not between:
        return ()
    ops = Counter(sg.operators[i].opcode.name for i in between)
    listed = ", ".join(f"{name} x{n}" for name, n in ops.most_common())
    switches = sum(1 for a, b in zip(kinds[first:last], kinds[first + 1 : last + 1]) if a != b)
    remedies = []
    xtable = tables.xnnpack(target) or {"ops": {}}
    float_ok = sorted(
        op
        for op in ops
        if any(r.get("delegated") and r["features"].get("dtype") == "FLOAT32" for r in xtable["ops"].get(op, []))
    )
    if float_ok:
        remedies.append(f"keep {' and '.join(float_ok)} in float when quantizing (XNNPACK takes the float form)")
    if _engine_runs(model):
        remedies.append("run it on edgeinf's int8 engine, which runs every node of this model: backend='edgeinf'")
    return (
        f"on {target.label} this int8 model will likely run slower than its float original: "
        f"{len(between)} node(s) ({listed}) stay on the CPU between {kinds.count(True)} XNNPACK partitions "
        f"({switches} CPU/XNNPACK switches per run)" + ("; " + ", or ".join(remedies) if remedies else ""),
    )


def _engine_runs(model: TfliteModel) -> bool:
    try:
        from ..engine.plan import node_support
    except ImportError:  # the engine's native module is not built
        return False
    return all(n.native for n in node_support(model))


def _facts(model: TfliteModel) -> dict:
    sg = model.main
    total, peak = activation_memory(sg)
    dtypes = Counter(t.dtype for g in model.subgraphs for t in g.tensors)
    customs = sorted(
        {
            op.opcode.custom_code or ""
            for g in model.subgraphs
            for op in g.operators
            if op.opcode.is_custom and not op.opcode.is_flex
        }
    )
    flex = sorted({op.opcode.custom_code or "" for g in model.subgraphs for op in g.operators if op.opcode.is_flex})
    control = sorted({op.opcode.name for g in model.subgraphs for op in g.operators if op.opcode.name in CONTROL_FLOW})
    dynamic = []
    for i in sg.inputs:
        t = sg.tensors[i]
        if t.is_dynamic and t.shape_signature is not None:
            dynamic.append({"name": t.name, "shape": list(t.shape_signature)})
    notes = []
    if dynamic:
        notes.append(
            "dynamic inputs run at the shape stored in the file (1 for each -1) unless resized before allocate_tensors"
        )
    sparse = sum(1 for g in model.subgraphs for t in g.tensors if t.sparsity is not None)
    if sparse:
        notes.append(f"{sparse} sparse constant tensors are densified (DENSIFY) when the interpreter prepares")
    rare = tuple(sorted(d for d in dtypes if d in _RARE_DTYPES or d.startswith("UNKNOWN")))
    return {
        "weight_bytes": sum(model.buffer_sizes),
        "activation_bytes": total,
        "activation_peak_bytes": peak,
        "macs": macs(sg),
        "subgraphs": len(model.subgraphs),
        "custom_ops": tuple(customs),
        "flex_ops": tuple(flex),
        "control_flow": tuple(control),
        "dynamic_inputs": tuple(dynamic),
        "sparse_tensors": sparse,
        "dtypes": dict(dtypes),
        "unsupported_dtypes": {"tflite": rare} if rare else {},
        "min_runtime_version": model.min_runtime_version,
        "notes": tuple(notes),
    }
