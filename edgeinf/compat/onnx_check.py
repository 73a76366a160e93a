"""Check whether an ONNX model runs on ONNX Runtime, and can reach NCNN (through pnnx) and
TFLite (through onnx2tf).

ONNX Runtime: the kernels its CPU execution provider registers, per domain, op and opset
range (tools/probe_onnxruntime.py reads them from the installed runtime); an op without a
kernel still runs when ONNX defines it as a function of other ops, which ORT inlines.
NCNN: the pnnx table is probed (tools/probe_pnnx.py converts one-node models with the
real pnnx and runs the result on the real ncnn). TFLite: onnx2tf cannot be installed
here (it needs TensorFlow), so its README tables are used and the TFLite builtins it
lowers each op to are checked against the target runtime's resolver table. Every
status names which table decided.
"""

from __future__ import annotations

from collections import Counter

from ..formats.onnx import DEFAULT_DOMAIN, OnnxModel, OnnxNode
from . import tables
from .report import BackendVerdict, NodeReport, NodeStatus

_FOLDED_ALWAYS = {"Constant"}  # both converters turn Constant nodes into weights


def _any_converter_status(node: OnnxNode, converter: str, folded_into: str, source: str) -> NodeStatus | None:
    """What holds for either converter, before its table is read: no conversion for a
    custom domain, and Constant nodes folded (into ``folded_into``)."""
    if node.domain != DEFAULT_DOMAIN:
        return NodeStatus(
            "unsupported",
            f"custom domain {node.domain}: {converter} has no conversion",
            "replace the op before export",
            source,
        )
    if node.op_type in _FOLDED_ALWAYS:
        return NodeStatus("cpu", f"folded into {folded_into} by {converter}", "", source)
    return None


def ncnn_status(node: OnnxNode, pnnx: dict | None, registry: dict) -> NodeStatus:
    if pnnx is None:
        return NodeStatus("unknown", "no pnnx table", "", "")
    source = f"probe:pnnx {pnnx['version']} -> ncnn {pnnx['ncnn']}"
    known = _any_converter_status(node, "pnnx", "weights", source)
    if known is not None:
        return known
    entry = pnnx["ops"].get(node.op_type)
    if entry is None:
        return NodeStatus(
            "unknown",
            f"{node.op_type} was not probed with pnnx",
            "convert with pnnx and run `edgeinf check` on the .param",
            source,
        )
    status = entry["status"]
    if status in ("ncnn", "folded"):
        layers = ", ".join(entry.get("layers") or []) or "nothing (folded)"
        return NodeStatus("cpu", f"pnnx makes {layers}", "", source)
    if status == "leftover":
        return NodeStatus(
            "unsupported",
            f"pnnx leaves {', '.join(entry['leftover'])}, which ncnn {pnnx['ncnn']} lacks",
            "rewrite the op before export, move it to post-processing, or add a custom ncnn layer",
            source,
        )
    if status == "failed":
        return NodeStatus("unknown", f"the one-node probe failed: {entry.get('error', '')[:120]}", "", source)
    return NodeStatus("unknown", entry.get("note", f"{node.op_type}: {status}"), "", source)


def tflite_status(node: OnnxNode, o2t: dict | None, resolver: dict, target: tables.Target) -> NodeStatus:
    if o2t is None:
        return NodeStatus("unknown", "no onnx2tf table", "", "")
    source = f"table:{o2t['source']} (read, not probed) + probe:resolver {target.label}"
    known = _any_converter_status(node, "onnx2tf", "constants", source)
    if known is not None:
        return known
    entry = o2t["flatbuffer_direct"].get(node.op_type)
    if entry is None:
        if node.op_type in o2t["custom_op_candidates"]:
            return NodeStatus(
                "unsupported",
                f"onnx2tf lowers {node.op_type} to a TFLite CUSTOM op only when custom ops are allowed; {target.label} has no such kernel",
                "replace the op before export or move it to post-processing",
                source,
            )
        legacy = o2t["tf_converter"].get(node.op_type)
        if legacy:
            return NodeStatus(
                "unknown",
                f"onnx2tf's tf_converter path lists {node.op_type} as {legacy}; its TFLite ops are not tabled",
                "",
                source,
            )
        return NodeStatus(
            "unsupported", f"onnx2tf lists no conversion for {node.op_type}", "replace the op before export", source
        )
    missing = [op for op in entry["tflite_ops"] if not resolver["builtins"].get(op)]
    if entry["tflite_ops"] and len(missing) == len(entry["tflite_ops"]):
        return NodeStatus(
            "unsupported",
            f"onnx2tf lowers {node.op_type} to {', '.join(entry['tflite_ops'])}; {target.label} has none of them",
            "target a newer runtime",
            source,
        )
    reason = f"onnx2tf: {entry['tflite_text'][:80]}"
    if missing:
        reason += f" ({target.label} lacks {', '.join(missing)}, used only in some lowerings)"
    if entry.get("constraints") and entry["constraints"] != "-":
        reason += f"; constraints: {entry['constraints'][:120]}"
    return NodeStatus("cpu", reason, "", source)


def _function_body(node: OnnxNode, opset: int) -> bool:
    """Whether ONNX defines the op as a function of other ops (ORT then inlines it)."""
    try:
        import onnx  # noqa: PLC0415 (installed whenever an .onnx file could be read)

        schema = onnx.defs.get_schema(node.op_type, opset, "" if node.domain == DEFAULT_DOMAIN else node.domain)
    except Exception:  # noqa: BLE001 (SchemaError: unknown op)
        return False
    # onnx's stub for OpSchema omits these two properties the binding has.
    return bool(schema.has_function or schema.has_context_dependent_function)  # type: ignore[attr-defined]


def _constraint_types(node: OnnxNode, version: int, value_types: dict[str, str]) -> dict[str, str]:
    """The node's type per type constraint (``{"T": "float"}``), from its inputs' known types."""
    try:
        import onnx  # noqa: PLC0415

        schema = onnx.defs.get_schema(node.op_type, version, "" if node.domain == DEFAULT_DOMAIN else node.domain)
    except Exception:  # noqa: BLE001 (an op onnx does not know: no constraints to read)
        return {}
    bound: dict[str, str] = {}
    formal = list(schema.inputs)
    for i, name in enumerate(node.inputs):
        if not name or name not in value_types or not formal:
            continue
        param = formal[min(i, len(formal) - 1)]  # a variadic last input covers the rest
        bound.setdefault(param.type_str, value_types[name])
    return bound


# ORT runs a float16 node that has only a float kernel by inserting Casts around it
# (its InsertCastTransformer); no other type gets that treatment.
_CAST_TO_FLOAT = {"float16"}


def _kernel_takes(kernel: dict, bound: dict[str, str]) -> tuple[bool, bool]:
    """(takes the types as they are, takes them once float16 is cast to float)."""
    exact = cast = True
    for name, allowed in kernel["types"].items():
        given = bound.get(name)
        if given is None:
            continue
        if given not in allowed:
            exact = False
            if not (given in _CAST_TO_FLOAT and "float" in allowed):
                cast = False
    return exact, cast


def ort_status(
    node: OnnxNode, opsets: dict[str, int], kernels: dict, target: tables.Target, value_types=None
) -> NodeStatus:
    source = f"probe:{target.label} CPUExecutionProvider kernels"
    opset = opsets.get(node.domain)
    newest = kernels["max_opset"].get(node.domain)
    if newest is not None and opset is not None and opset > newest:
        return NodeStatus(
            "unsupported",
            f"the model imports {node.domain} opset {opset}; {target.label} knows opsets up to {newest}",
            "export with an older opset, or use a newer onnxruntime",
            source,
        )
    version = node.since_version or opset or 1
    ranges = kernels["ops"].get(node.domain, {}).get(node.op_type)
    if ranges:
        versioned = [r for r in ranges if r["since"] <= version and (r["until"] is None or version <= r["until"])]
        if versioned:
            bound = _constraint_types(node, version, value_types or {})
            takes = [_kernel_takes(r, bound) for r in versioned]
            if any(exact for exact, _ in takes) or not bound:
                return NodeStatus("cpu", "", "", source)
            if any(cast for _, cast in takes):
                return NodeStatus("cpu", "no float16 kernel: ORT runs it in float32 between inserted Casts", "", source)
            given = ", ".join(f"{k}={v}" for k, v in sorted(bound.items()))
            offered = "; ".join(
                ", ".join(f"{k} in {{{','.join(v)}}}" for k, v in r["types"].items()) for r in versioned
            )
            return NodeStatus(
                "unsupported",
                f"no CPU kernel for {node.op_type} version {version} with {given} (kernels take {offered})",
                "cast the tensor to a type the kernel takes before export",
                source,
            )
        covered = ", ".join(f"{r['since']}..{r['until'] or ''}" for r in ranges)
        return NodeStatus(
            "unsupported",
            f"no CPU kernel for {node.op_type} version {version} (kernels cover {covered})",
            "re-export with an opset the kernels cover",
            source,
        )
    if node.op_type in _FOLDED_ALWAYS and node.domain == DEFAULT_DOMAIN:
        return NodeStatus("cpu", "a constant: folded into the graph's weights", "", source)
    if _function_body(node, opset or version):
        return NodeStatus(
            "cpu", f"ONNX defines {node.op_type} as a function: ORT expands it into ops it runs", "", source
        )
    where = "" if node.domain == DEFAULT_DOMAIN else f" in domain {node.domain}"
    return NodeStatus(
        "unsupported",
        f"{target.label} has no CPU kernel for {node.op_type}{where}",
        "replace the op before export, or register a custom op library with ORT",
        source,
    )


def check_onnx(
    model: OnnxModel,
    tflite_target: tables.Target | None,
    ncnn_target: tables.Target | None,
    ort_target: tables.Target | None = None,
):
    pnnx = tables.pnnx_table()
    o2t = tables.onnx2tf_table()
    registry = tables.ncnn_registry(ncnn_target) if ncnn_target else None
    resolver = tables.resolver(tflite_target) if tflite_target else None
    kernels = tables.onnxruntime_kernels(ort_target) if ort_target else None
    nodes = []
    for n in model.nodes:
        status = {}
        if ort_target and kernels is not None:
            status["onnxruntime"] = ort_status(n, model.opsets, kernels, ort_target, model.value_types)
        if ncnn_target and registry is not None:
            status["ncnn"] = ncnn_status(n, pnnx, registry)
        if tflite_target and resolver is not None:
            status["tflite"] = tflite_status(n, o2t, resolver, tflite_target)
        nodes.append(NodeReport(n.index, 0, n.name, n.key, n.op_type, n.since_version, status))
    verdicts = {}
    if ort_target and kernels is not None:
        counts = Counter(n.status["onnxruntime"].status for n in nodes)
        blockers = tuple(
            f"node {n.index} {n.name} ({n.op}): {n.status['onnxruntime'].reason}"
            for n in nodes
            if n.status["onnxruntime"].status == "unsupported"
        )
        verdicts["onnxruntime"] = BackendVerdict(
            backend="onnxruntime",
            target=ort_target.label,
            verdict="NO" if blockers else "YES",
            runnable=not blockers,
            counts={k: counts.get(k, 0) for k in ("cpu", "unsupported", "unknown")},
            blockers=blockers,
            tables=(kernels.get("method", ""),),
            note=ort_target.note,
        )
    for backend, target, via in (("ncnn", ncnn_target, "pnnx"), ("tflite", tflite_target, "onnx2tf")):
        if target is None:
            continue
        counts = Counter(n.status[backend].status for n in nodes)
        blockers = tuple(
            f"node {n.index} {n.name} ({n.op}): {n.status[backend].reason}"
            for n in nodes
            if n.status[backend].status == "unsupported"
        )
        runnable = not blockers
        verdict = "NO" if blockers else ("YES" if counts.get("unknown", 0) == 0 else "PARTIAL")
        table = pnnx if backend == "ncnn" else o2t
        verdicts[backend] = BackendVerdict(
            backend=backend,
            target=target.label,
            verdict=verdict,
            runnable=runnable,
            counts={k: counts.get(k, 0) for k in ("cpu", "unsupported", "unknown")},
            blockers=blockers,
            tables=(table.get("method", table.get("source", "")) if table else "none",),
            via=via,
            note="a verdict on converting (`edgeinf convert`) then running the result",
        )
    dynamic = [
        {"name": v.name, "shape": list(v.shape) if v.shape is not None else None} for v in model.inputs if v.is_dynamic
    ]
    notes = []
    if dynamic:
        notes.append(
            "dynamic input dimensions: give pnnx inputshape=[...] and onnx2tf -b/-ois to fix them before converting"
        )
    control = sorted({n.op_type for n in model.nodes if n.op_type in ("If", "Loop", "Scan")})
    facts = {
        "weight_bytes": model.weight_bytes,
        "subgraphs": 1 + sum(1 for n in model.nodes if n.has_subgraph),
        "dynamic_inputs": tuple(dynamic),
        "control_flow": tuple(control),
        "custom_ops": tuple(sorted({n.key for n in model.nodes if n.domain != DEFAULT_DOMAIN})),
        "notes": tuple(notes),
    }
    return nodes, verdicts, facts
