"""Probe ONNX -> NCNN conversion with pnnx, op by op; write edgeinf/compat/tables/onnx_ncnn_pnnx_<ver>.json.

For each ONNX operator in OPS, a one-node model (float input [1, 8, 16, 16], typical
attributes, constant inputs as initializers) is converted by the installed pnnx binary
(``pnnx model.onnx inputshape=[1,8,16,16]``, pnnx's own way of fixing dynamic shapes).
The layer types in its ``.ncnn.param`` are then checked against the installed ncnn's
layer registry (tables/ncnn_<ver>.json), and the pair is loaded and run by ncnn in a
worker process (tools/runtime_worker.py). pnnx writes ops it cannot lower under their
pnnx/torch names (``pnnx.Expression``, ``torch.xxx``, ``F.xxx``), which ncnn then refuses
with "layer ... not exists or registered": those show up as ``leftover``.

Status per op: ``ncnn`` (converted and ran), ``folded`` (pnnx removed the node, e.g.
Identity; the output is a copy of the input), ``leftover`` (pnnx left layers ncnn lacks),
``failed`` (pnnx or ncnn failed; ``error`` says which).

Usage:
    python tools/probe_pnnx.py [--pnnx PATH] [--python /work/venv/bin/python]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from runtime_worker import RuntimeWorker
from table_file import TABLES, write_table

from edgeinf.errors import ModelFileError
from edgeinf.formats.ncnn_param import read_ncnn_param

SHAPE = [1, 8, 16, 16]
_R = np.random.default_rng(3)


def _w(*shape):
    return _R.uniform(-1, 1, size=shape).astype(np.float32)


def _i64(*values):
    return np.array(values, dtype=np.int64)


# op -> (attributes, extra constant inputs (None = absent optional input), opset)
OPS: dict[str, tuple[dict, list, int]] = {
    "Conv": ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, [_w(4, 8, 3, 3), _w(4)], 13),
    "ConvTranspose": ({"kernel_shape": [2, 2], "strides": [2, 2]}, [_w(8, 4, 2, 2), _w(4)], 13),
    "BatchNormalization": ({}, [_w(8) + 2, _w(8), _w(8), np.abs(_w(8)) + 1], 13),
    "InstanceNormalization": ({}, [_w(8), _w(8)], 13),
    "LayerNormalization": ({"axis": -1}, [_w(16), _w(16)], 17),
    "GroupNormalization": ({"num_groups": 2}, [_w(2), _w(2)], 18),
    "Relu": ({}, [], 13),
    "LeakyRelu": ({"alpha": 0.1}, [], 13),
    "PRelu": ({}, [_w(8, 1, 1)], 13),
    "Elu": ({}, [], 13),
    "Selu": ({}, [], 13),
    "Sigmoid": ({}, [], 13),
    "HardSigmoid": ({"alpha": 0.2, "beta": 0.5}, [], 13),
    "HardSwish": ({}, [], 14),
    "Tanh": ({}, [], 13),
    "Softplus": ({}, [], 13),
    "Mish": ({}, [], 18),
    "Gelu": ({}, [], 20),
    "Erf": ({}, [], 13),
    "Exp": ({}, [], 13),
    "Log": ({}, [], 13),
    "Sqrt": ({}, [], 13),
    "Abs": ({}, [], 13),
    "Neg": ({}, [], 13),
    "Floor": ({}, [], 13),
    "Ceil": ({}, [], 13),
    "Round": ({}, [], 13),
    "Sin": ({}, [], 13),
    "Cos": ({}, [], 13),
    "Reciprocal": ({}, [], 13),
    "Sign": ({}, [], 13),
    "Clip": ({}, [np.array(0, np.float32), np.array(6, np.float32)], 13),
    "Add": ({}, [_w(8, 1, 1)], 13),
    "Sub": ({}, [_w(8, 1, 1)], 13),
    "Mul": ({}, [_w(8, 1, 1)], 13),
    "Div": ({}, [np.abs(_w(8, 1, 1)) + 1], 13),
    "Pow": ({}, [np.array(2.0, np.float32)], 13),
    "Max": ({}, [_w(1, 8, 16, 16)], 13),
    "Min": ({}, [_w(1, 8, 16, 16)], 13),
    "Sum": ({}, [_w(1, 8, 16, 16)], 13),
    "MatMul": ({}, [_w(16, 12)], 13),
    "Gemm": ({"transB": 1}, "gemm", 13),
    "MaxPool": ({"kernel_shape": [2, 2], "strides": [2, 2]}, [], 13),
    "AveragePool": ({"kernel_shape": [2, 2], "strides": [2, 2]}, [], 13),
    "GlobalAveragePool": ({}, [], 13),
    "GlobalMaxPool": ({}, [], 13),
    "LRN": ({"size": 3}, [], 13),
    "Concat": ({"axis": 1}, [_w(1, 4, 16, 16)], 13),
    "Reshape": ({}, [_i64(1, 8, 256)], 13),
    "Flatten": ({"axis": 1}, [], 13),
    "Transpose": ({"perm": [0, 2, 3, 1]}, [], 13),
    "Squeeze": ({}, [_i64(0)], 13),
    "Unsqueeze": ({}, [_i64(0)], 13),
    "Slice": ({}, [_i64(0), _i64(8), _i64(2), _i64(1)], 13),
    "Split": ({"axis": 1}, [_i64(4, 4)], 13),
    "Pad": ({"mode": "constant"}, [_i64(0, 0, 1, 1, 0, 0, 1, 1)], 13),
    "Resize": ({"mode": "linear"}, [None, np.array([1, 1, 2, 2], np.float32)], 13),
    "Softmax": ({"axis": 1}, [], 13),
    "LogSoftmax": ({"axis": 1}, [], 13),
    "ReduceMean": ({"axes": [2, 3], "keepdims": 1}, [], 13),
    "ReduceSum": ({"keepdims": 1}, [_i64(2, 3)], 13),
    "ReduceMax": ({"axes": [2, 3], "keepdims": 1}, [], 13),
    "ReduceMin": ({"axes": [2, 3], "keepdims": 1}, [], 13),
    "ReduceL2": ({"axes": [2, 3], "keepdims": 1}, [], 13),
    "Identity": ({}, [], 13),
    "Dropout": ({}, [], 13),
    "Cast": ({"to": 1}, [], 13),
    "Shape": ({}, [], 13),
    "Gather": ({"axis": 1}, [_i64(0, 2)], 13),
    "Expand": ({}, [_i64(2, 8, 16, 16)], 13),
    "Tile": ({}, [_i64(1, 2, 1, 1)], 13),
    "Where": ({}, "where", 13),
    "Equal": ({}, [_w(1, 8, 16, 16)], 13),
    "Greater": ({}, [_w(1, 8, 16, 16)], 13),
    "Less": ({}, [_w(1, 8, 16, 16)], 13),
    "ArgMax": ({"axis": 1, "keepdims": 1}, [], 13),
    "TopK": ({"axis": -1}, [_i64(4)], 13),
    "DepthToSpace": ({"blocksize": 2, "mode": "CRD"}, [], 13),
    "SpaceToDepth": ({"blocksize": 2}, [], 13),
    "GridSample": ({}, [_w(1, 16, 16, 2)], 16),
    "CumSum": ({}, [np.array(1, np.int64)], 14),
    "Einsum": ({"equation": "bchw,bchw->bchw"}, [_w(1, 8, 16, 16)], 13),
    "Range": ({}, "range", 13),
    "ConstantOfShape": ({}, "constantofshape", 13),
    "NonMaxSuppression": ({}, "nms", 13),
}


PASS_THROUGH = {"Identity", "Dropout"}


def make_model(op: str, attrs: dict, extra, opset: int):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)
    inits, inputs = [], ["x"]
    outputs = ["y", "y2"] if op == "Split" else (["y", "idx"] if op == "TopK" else ["y"])
    if extra == "gemm":
        # Gemm wants 2-D input: flatten first
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
        inits = [numpy_helper.from_array(_w(10, 64), "B"), numpy_helper.from_array(_w(10), "C")]
        inputs = ["x", "B", "C"]
    elif extra == "where":
        inits = [
            numpy_helper.from_array(_R.integers(0, 2, size=SHAPE).astype(bool), "cond"),
            numpy_helper.from_array(_w(*SHAPE), "other"),
        ]
        inputs = ["cond", "x", "other"]
    elif extra in ("range", "constantofshape", "nms"):
        return None  # shape-computing ops: no image input to give pnnx; recorded as not probed
    else:
        for k, value in enumerate(extra):
            if value is None:
                inputs.append("")
                continue
            name = f"c{k}"
            inits.append(numpy_helper.from_array(np.asarray(value), name))
            inputs.append(name)
    nodes = [helper.make_node(op, inputs, outputs, **attrs)]
    if op in PASS_THROUGH:
        # alone, the node would make the graph output its input, which pnnx cannot convert;
        # in real graphs these sit between other nodes: put it between two ReLUs
        nodes = [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node(op, ["a"], ["b"], **attrs),
            helper.make_node("Relu", ["b"], ["y"]),
        ]
    outs = [
        helper.make_tensor_value_info(o, TensorProto.FLOAT if o != "idx" else TensorProto.INT64, None) for o in outputs
    ]
    graph = helper.make_graph(nodes, op.lower(), [x], outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return onnx._serialize(model) if hasattr(onnx, "_serialize") else model.SerializeToString()


def pnnx_path(explicit: str | None) -> str:
    if explicit:
        return explicit
    import importlib.util

    spec = importlib.util.find_spec("pnnx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pnnx is not installed: pip install --no-deps pnnx (the binary needs no torch for ONNX input)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "pnnx")


def pnnx_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("pnnx")


def probe(pnnx: str, python: str, out_dir: Path) -> Path:
    ncnn_tables = sorted(out_dir.glob("ncnn_*.json"))
    if not ncnn_tables:
        raise SystemExit("run tools/probe_ncnn.py first (the ncnn registry is needed)")
    registry = json.loads(ncnn_tables[-1].read_text())
    known = {name for name, e in registry["layers"].items() if e["available"]}
    results = {}
    with tempfile.TemporaryDirectory() as tmp, RuntimeWorker(python, timeout_s=60) as worker:
        for op, (attrs, extra, opset) in OPS.items():
            data = make_model(op, attrs, extra, opset)
            if data is None:
                results[op] = {"status": "not_probed", "note": "computes shapes or boxes; needs a graph context"}
                continue
            work = Path(tmp) / op
            work.mkdir()
            model = work / "m.onnx"
            model.write_bytes(data)
            shape = "[1,64]" if extra == "gemm" else "[" + ",".join(map(str, SHAPE)) + "]"
            proc = subprocess.run(
                [pnnx, str(model), f"inputshape={shape}"], cwd=work, capture_output=True, text=True, timeout=120
            )
            param = work / "m.ncnn.param"
            if proc.returncode != 0 or not param.is_file():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                results[op] = {"status": "failed", "error": f"pnnx exit {proc.returncode}: {tail[0][:160]}"}
                continue
            try:
                parsed = read_ncnn_param(param)
            except ModelFileError as exc:
                results[op] = {"status": "failed", "error": f"edgeinf cannot read pnnx's output: {exc}"}
                continue
            layers = sorted(
                {layer.type for layer in parsed.layers} - {"Input"} - ({"ReLU"} if op in PASS_THROUGH else set())
            )
            leftover = [t for t in layers if t not in known]
            entry = {"layers": layers}
            if leftover:
                entry.update(status="leftover", leftover=leftover)
            else:
                in_shape = [1, 64] if extra == "gemm" else SHAPE
                inputs = {b: in_shape[1:] for b in parsed.input_shapes}
                reply = worker.ask(
                    {"kind": "ncnn", "path": str(param), "bin": str(work / "m.ncnn.bin"), "inputs": inputs}
                )
                if reply.get("ok"):
                    entry["status"] = "ncnn" if layers and layers != ["Noop"] else "folded"
                else:
                    entry.update(status="failed", error=f"ncnn {reply.get('stage')}: {reply.get('error')}")
            results[op] = entry
            shutil.rmtree(work, ignore_errors=True)
    version = pnnx_version()
    table = {
        "_comment": "Generated by tools/probe_pnnx.py; do not edit. ONNX op -> what pnnx makes of it for ncnn.",
        "converter": "pnnx",
        "version": version,
        "ncnn": registry["version"],
        "probed": datetime.date.today().isoformat(),
        "method": "one-node ONNX model per op (input [1,8,16,16], typical attributes, constant inputs as initializers), "
        "converted by the pnnx binary with inputshape=, layer types checked against the ncnn registry, then loaded and "
        "run by ncnn in a worker process",
        "ops": results,
    }
    out = out_dir / f"onnx_ncnn_pnnx_{version}.json"
    counts: dict[str, int] = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    write_table(out, table, f"pnnx {version} -> ncnn {registry['version']}: {counts}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pnnx", default=None)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out-dir", type=Path, default=TABLES)
    args = parser.parse_args(argv)
    probe(pnnx_path(args.pnnx), args.python, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
