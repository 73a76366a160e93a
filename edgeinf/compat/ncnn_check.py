"""Check an NCNN .param against the ncnn layer registry (and Vulkan rules from ncnn's source)."""

from __future__ import annotations

from collections import Counter

from ..formats.ncnn_param import NcnnLayer, NcnnParam
from . import tables
from .report import BackendVerdict, NodeReport, NodeStatus

_PNNX_PREFIXES = ("pnnx.", "torch.", "F.", "nn.", "Tensor.", "aten::", "prim::")


def layer_status(layer: NcnnLayer, registry: dict, target: tables.Target) -> NodeStatus:
    entry = registry["layers"].get(layer.type)
    source = f"probe:ncnn registry {target.label}"
    if entry is None:
        if layer.type.startswith("#custom"):
            return NodeStatus(
                "unsupported",
                f"custom layer {layer.type[7:]} (binary .param type index with the custom bit): only a program "
                "that registers it can load this model",
                "register the layer with ncnn.Net.register_custom_layer before load_param_bin",
                source,
            )
        if layer.type.startswith("#"):
            return NodeStatus(
                "unsupported",
                f"{target.label} has no layer with type index {layer.type[1:]} (load_param_bin fails: 'layer {layer.type[1:]} not exists or registered')",
                "the file was written by a newer ncnn: upgrade ncnn",
                source,
            )
        if layer.type.startswith(_PNNX_PREFIXES):
            return NodeStatus(
                "unsupported",
                f"pnnx left {layer.type} unlowered; {target.label} has no such layer "
                f"(load_param fails: 'layer {layer.type} not exists or registered')",
                "rewrite the op before export, move it to post-processing, or register a custom layer "
                "(ncnn.Net.register_custom_layer)",
                source,
            )
        return NodeStatus(
            "unsupported",
            f"{target.label} has no layer {layer.type} (load_param fails: 'layer {layer.type} not exists or registered')",
            "upgrade ncnn if a newer release has it, or register a custom layer",
            source,
        )
    if not entry.get("available", False):
        return NodeStatus(
            "unsupported",
            f"{layer.type} is registered but compiled out of {target.label} (create_layer returns None)",
            f"build ncnn with ncnn_add_layer({layer.type} ON), or replace the layer",
            source,
        )
    return NodeStatus("cpu", "", "", source)


def vulkan_status(layer: NcnnLayer, registry: dict, target: tables.Target) -> NodeStatus:
    """Whether ncnn's Vulkan path keeps this layer on the GPU (flags probed, fallback rules from source)."""
    entry = registry["layers"].get(layer.type) or {}
    rules = registry.get("vulkan_fallback_rules", {})
    source = f"ncnn {target.version} flags; rules: {rules.get('source', 'none')}"
    if layer.type == "Input":
        return NodeStatus("delegated", "", "", source)  # feeds the graph; has no Vulkan kernel of its own to need
    if not entry.get("support_vulkan"):
        return NodeStatus("cpu", f"{layer.type} has no Vulkan implementation in {target.label}", "", source)
    for rule in rules.get("rules", {}).get(layer.type, []) + rules.get("rules", {}).get("*", []):
        value = layer.get(rule["param"], 0)
        if "bit" in rule:
            hit = isinstance(value, int) and bool(value & (1 << rule["bit"]))
        else:
            hit = bool(value)
            if hit and "and_param" in rule:
                hit = bool(layer.get(rule["and_param"], 0))
        if hit:
            return NodeStatus(
                "cpu",
                f"{layer.type} with {rule['why']} falls back to the CPU (Net::load_param recreates it)",
                "",
                source,
            )
    return NodeStatus("delegated", "", "", source)


def check_ncnn(param: NcnnParam, target: tables.Target) -> tuple[list[NodeReport], dict[str, BackendVerdict], dict]:
    registry = tables.ncnn_registry(target)
    nodes = []
    for layer in param.layers:
        on_cpu = layer_status(layer, registry, target)
        on_vulkan = vulkan_status(layer, registry, target) if on_cpu.status != "unsupported" else on_cpu
        nodes.append(
            NodeReport(
                layer.index,
                0,
                layer.name,
                f"ncnn:{layer.type}",
                layer.type,
                None,
                {"ncnn": on_cpu, "ncnn-vulkan": on_vulkan},
            )
        )
    blockers = tuple(
        f"layer {n.index} {n.name} ({n.op}): {n.status['ncnn'].reason}"
        for n in nodes
        if n.status["ncnn"].status == "unsupported"
    )
    runnable = not blockers
    table_names = (f"ncnn_{target.version}.json ({registry.get('method', '')[:50]}...)",)
    cpu = BackendVerdict(
        backend="ncnn",
        target=target.label,
        verdict="YES" if runnable else "NO",
        runnable=runnable,
        counts=dict(Counter(n.status["ncnn"].status for n in nodes)),
        blockers=blockers,
        tables=table_names,
        note=target.note,
    )
    # Vulkan: subsets in layer order (ncnn runs layers in file order, switching device per layer)
    runs: list[tuple[bool, list[int]]] = []
    prev = None
    for n in nodes:
        on_gpu = n.status["ncnn-vulkan"].status == "delegated"
        if on_gpu != prev:
            runs.append((on_gpu, []))
            prev = on_gpu
        runs[-1][1].append(n.index)
    vk_counts = Counter(n.status["ncnn-vulkan"].status for n in nodes)
    vk_parts = tuple(tuple(m) for g, m in runs if g)
    vk = BackendVerdict(
        backend="ncnn-vulkan",
        target=target.label,
        verdict="NO" if not runnable else ("YES" if vk_counts.get("cpu", 0) == 0 else "PARTIAL"),
        runnable=runnable,
        delegate="vulkan",
        counts=dict(vk_counts),
        partitions=vk_parts,
        transitions=max(0, len(runs) - 1),
        blockers=blockers,
        tables=table_names,
        note="from layer flags and ncnn's source rules; not run here (no Vulkan device)",
    )
    dynamic = [{"name": b, "shape": list(s)} for b, s in param.input_shapes.items() if not s or 0 in s]
    notes = []
    if param.bin_note:
        notes.append(param.bin_note)
    if dynamic:
        notes.append("Input layers without 0=w 1=h 2=c take any shape: the size is set by the first input")
    facts = {
        "weight_bytes": param.bin_size or 0,
        "subgraphs": 1,
        "dynamic_inputs": tuple(dynamic),
        "notes": tuple(notes),
        "custom_ops": tuple(sorted({layer.type for layer in param.layers if layer.type not in registry["layers"]})),
    }
    return nodes, {"ncnn": cpu, "ncnn-vulkan": vk}, facts
