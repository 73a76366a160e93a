"""The TFLite verdict agrees with reality, on both TFLite runtimes.

"Runs" must hold exactly when the named runtime builds the interpreter, allocates and
invokes the model (in a child process: tools/runtime_worker.py); for models that run,
the nodes the check puts on XNNPACK must be the nodes the runtime's delegate took
(recovered from the interpreter's DELEGATE nodes), partition for partition.
"""

from __future__ import annotations

import pytest
from runtime_worker import delegate_partitions

import edgeinf
from edgeinf.formats.tflite_writer import insert_custom_op, make_dim_dynamic, set_op_version

# runtimes and CLIs in child processes: minutes under emulation, so not in the emulated subset
pytestmark = pytest.mark.slow

TARGETS = ["ai-edge-litert==2.3.0", "tflite-runtime==2.14.0"]
REAL = ["face_detection_short_range", "face_detection_full_range", "face_detection_full_range_sparse", "face_landmark"]


def assert_agrees(path, target: str, worker) -> dict:
    """Check, run for real, and compare; returns the runtime's reply."""
    report = edgeinf.check(path, target=target)
    reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
    predicted = report.runnable("tflite")
    assert predicted == reply["ok"], (
        f"{path.name} on {target}: check says runnable={predicted} ({report.backends['tflite'].blockers[:2]}), "
        f"the runtime says ok={reply['ok']} at {reply.get('stage')}: {(reply.get('error') or '')[:300]}"
    )
    if reply["ok"]:
        partitions, cpu = delegate_partitions(reply["ops"])
        got = {tuple(p) for p in partitions}
        want = {tuple(p) for p in report.backends["tflite"].partitions}
        if got != want:
            ours = {n.index for n in report.nodes if n.subgraph == 0 and n.status["tflite"].status == "delegated"}
            theirs = {i for p in partitions for i in p}
            only_ours, only_theirs = sorted(ours - theirs), sorted(theirs - ours)
            first = (only_ours or only_theirs)[0] if (only_ours or only_theirs) else None
            detail = (
                f"first differing node {first}: {report.nodes[first].key} {report.nodes[first].status['tflite']}"
                if first is not None
                else "same nodes, different grouping"
            )
            pytest.fail(
                f"{path.name} on {target}: XNNPACK partitions differ: check {len(want)}, runtime {len(got)}; {detail}"
            )
    return reply


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", REAL)
def test_real_models(model_path, tflite_workers, name, target):
    reply = assert_agrees(model_path(name), target, tflite_workers[target])
    assert reply["ok"]  # the manifest's models all run on both runtimes


def _edits():
    return {
        "conv_v8": lambda d: set_op_version(d, "CONV_2D", 8),  # LiteRT 2.3 has v8, tflite-runtime 2.14 stops at v7
        "dequantize_v6": lambda d: set_op_version(d, "DEQUANTIZE", 6),
        "dequantize_v9": lambda d: set_op_version(d, "DEQUANTIZE", 9),
        "add_v99": lambda d: set_op_version(d, "ADD", 99),
        "custom_op": lambda d: insert_custom_op(d, "MyFancyOp"),
        "flex_op": lambda d: insert_custom_op(d, "FlexIdentity"),
        "xnnpack_only_custom_op": lambda d: insert_custom_op(d, "Convolution2DTransposeBias"),
        "dynamic_batch": lambda d: make_dim_dynamic(d),
        "dynamic_and_bumped": lambda d: make_dim_dynamic(set_op_version(d, "PAD", 4)),
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("edit", sorted(_edits()))
@pytest.mark.parametrize("name", ["face_detection_short_range", "face_detection_full_range_sparse"])
def test_modified_real_models(model_path, tflite_workers, tmp_path, name, edit, target):
    path = tmp_path / f"{name}_{edit}.tflite"
    path.write_bytes(_edits()[edit](model_path(name).read_bytes()))
    assert_agrees(path, target, tflite_workers[target])


def test_a_bumped_version_differs_between_runtimes(model_path, tmp_path):
    # the case users hit: converted for a newer runtime, deployed on tflite-runtime 2.14
    path = tmp_path / "conv_v8.tflite"
    path.write_bytes(set_op_version(model_path("face_detection_short_range").read_bytes(), "CONV_2D", 8))
    new, old = edgeinf.check(path, target="ai-edge-litert==2.3.0"), edgeinf.check(path, target="tflite-runtime==2.14.0")
    assert new.verdict("tflite") == "YES" and old.verdict("tflite") == "NO"
    problems = old.problems("tflite")
    assert len(problems) == 21  # every CONV_2D node is reported, not just the first
    reason = problems[0][1]
    assert "v1..v7, the model needs v8" in reason.reason and "ai_edge_litert 2.3.0" in reason.suggestion
