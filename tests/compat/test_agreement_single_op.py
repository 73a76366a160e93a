"""Generated single-op models: the verdict agrees with both TFLite runtimes.

Every op the XNNPACK probe builds (tools/probe_xnnpack.py: valid one-op models with
constant parameters) is written at several versions: 1, the last version each runtime
has, and one past it. "Runs" must hold exactly when the runtime loads, allocates and
invokes the model; XNNPACK placement must match the runtime's DELEGATE nodes. A model
the reader refuses (e.g. a convolution without its bias) must fail or crash in both runtimes.

Models whose graph inputs include int32 tensors are left out: their validity depends on
the values fed at run time (an axis, a shape), which no static check can know.
"""

from __future__ import annotations

import json

import pytest
from probe_xnnpack import specs
from runtime_worker import delegate_partitions

import edgeinf
from edgeinf.compat import tables
from edgeinf.errors import ModelFileError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_writer import set_op_version

# runtimes and CLIs in child processes: minutes under emulation, so not in the emulated subset
pytestmark = pytest.mark.slow

TARGETS = {
    "ai-edge-litert==2.3.0": "tflite_ai_edge_litert_2.3.0",
    "tflite-runtime==2.14.0": "tflite_tflite_runtime_2.14.0",
}


def _cases():
    cases = []
    for op, builder, base, variants in specs():
        for k, kw in enumerate([base] + [dict(base, **v) for v in variants]):
            cases.append(pytest.param(op, builder, kw, id=f"{op}-{k}"))
    return cases


def _versions(op: str) -> list[int]:
    out = {1}
    for name in TARGETS.values():
        have = tables.load(name)["builtins"].get(op, [])
        if have:
            out.update((max(have), max(have) + 1))
    return sorted(out)


@pytest.mark.parametrize("op, builder, kw", _cases())
def test_single_op_models(tmp_path, tflite_workers, op, builder, kw):
    g, target_index, outputs = builder(**kw)
    base = g.build(outputs)
    try:
        model = read_tflite(base)
    except ModelFileError as exc:  # refused before any runtime: no runtime may run it either
        path = tmp_path / f"{op}.tflite"
        path.write_bytes(base)
        for target, worker in tflite_workers.items():
            reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
            assert not reply["ok"], f"edgeinf refuses {op} ({exc}) but {target} runs it"
        return
    if any(model.main.tensors[i].dtype == "INT32" for i in model.main.inputs):
        pytest.skip("int32 graph inputs: validity depends on run-time values")
    disagreements = []
    for version in _versions(op):
        data = set_op_version(base, op, version) if version != 1 else base
        path = tmp_path / f"{op}_v{version}.tflite"
        path.write_bytes(data)
        for target, worker in tflite_workers.items():
            report = edgeinf.check(path, target=target)
            reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
            if report.runnable("tflite") != reply["ok"]:
                disagreements.append(
                    f"v{version} on {target}: check runnable={report.runnable('tflite')} "
                    f"{json.dumps([b[:120] for b in report.backends['tflite'].blockers])}, runtime ok={reply['ok']} "
                    f"{reply.get('stage')}: {(reply.get('error') or '')[:160]}"
                )
                continue
            if reply["ok"]:
                partitions, _ = delegate_partitions(reply["ops"])
                taken = target_index in {i for p in partitions for i in p}
                said = report.nodes[target_index].status["tflite"].status == "delegated"
                if taken != said:
                    disagreements.append(
                        f"v{version} on {target}: XNNPACK took={taken}, check says {report.nodes[target_index].status['tflite']}"
                    )
    assert not disagreements, f"{op} {kw}: " + " | ".join(disagreements)
