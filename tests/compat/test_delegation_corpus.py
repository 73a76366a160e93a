"""The check's XNNPACK partitions equal LiteRT's, node set for node set, on every model the
tests have: the manifest's float models, their int8 versions from `edgeinf quantize` and
from TFLite's own calibrator, and the engine tests' per-op int8 models.

The runtime's side is what `edgeinf.load` reads back from the interpreter after
allocate_tensors (``model.details["delegate_nodes"]``); the load also compares the two
itself and must have found nothing to correct.
"""

from __future__ import annotations

import logging

import pytest
from compat_env import legacy_python
from delegation_corpus import calibrator_models, engine_op_models, manifest_models, quantize_models
from runtime_worker import RuntimeWorker

import edgeinf
from edgeinf.compat.delegation import delegate_partitions

pytest.importorskip("ai_edge_litert.interpreter")


def _disagreements(models: dict, caplog) -> list[str]:
    found = []
    for label, path in models.items():
        predicted = [list(p) for p in edgeinf.check(path, backend="tflite").backends["tflite"].partitions]
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING, logger="edgeinf.compat.delegation"),
            edgeinf.load(path, backend="tflite", num_threads=1) as model,
        ):
            actual = model.details["delegate_nodes"]
            said_at_load = model.details["predicted_delegate_nodes"]
        if sorted(predicted) != sorted(actual):
            found.append(
                f"{label}: predicted {len(predicted)} partition(s) {predicted}, LiteRT made {len(actual)} {actual}"
            )
        if said_at_load != predicted or caplog.records:
            found.append(f"{label}: load() saw {said_at_load} and logged {[r.getMessage() for r in caplog.records]}")
    return found


def test_manifest_float_models(caplog):
    models = manifest_models()
    assert len(models) >= 4
    assert not _disagreements(models, caplog)


def test_edgeinf_quantize_int8_models(caplog):
    models = quantize_models()
    if not models:
        pytest.skip("no int8 model from edgeinf quantize: none cached, and ai-edge-quantizer is not installed")
    assert not _disagreements(models, caplog)


def test_tflite_calibrator_int8_models(tmp_path, caplog):
    pytest.importorskip("cv2")
    pytest.importorskip("ai_edge_litert._pywrap_tensorflow_lite_calibration_wrapper")
    models = calibrator_models(tmp_path)
    assert not _disagreements(models, caplog)
    # the case that was wrong: int8 PRELU stays on the CPU, between 21 XNNPACK kernels
    report = edgeinf.check(models["face_landmark (TFLite calibrator)"], backend="tflite")
    verdict = report.backends["tflite"]
    assert len(verdict.partitions) == 21
    assert {n.op for n in report.nodes if n.status["tflite"].status == "cpu"} == {"PRELU"}


def test_engine_per_op_int8_models(tmp_path, caplog):
    models = engine_op_models(tmp_path)
    assert len(models) >= 50
    assert not _disagreements(models, caplog)


def test_tflite_runtime_2_14_agrees_on_the_whole_corpus(tmp_path):
    """The same corpus against tflite-runtime 2.14's XNNPACK (in its numpy<2 environment)."""
    python = legacy_python()
    if python is None:
        pytest.skip("no tflite-runtime 2.14 environment (set EDGEINF_LEGACY_PYTHON)")
    models = {**manifest_models(), **quantize_models(), **engine_op_models(tmp_path)}
    try:
        import cv2  # noqa: F401

        models.update(calibrator_models(tmp_path))
    except ImportError:  # no OpenCV or no calibrator in this LiteRT wheel
        pass
    found = []
    with RuntimeWorker(python, "tflite_runtime", timeout_s=120) as worker:
        for label, path in models.items():
            reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
            report = edgeinf.check(path, backend="tflite", target="tflite-runtime==2.14.0")
            if "ops" not in reply:
                if report.runnable("tflite"):
                    found.append(f"{label}: the check says it runs, 2.14 failed: {reply.get('error')}")
                continue
            actual, _ = delegate_partitions(reply["ops"])
            predicted = [list(p) for p in report.backends["tflite"].partitions]
            if sorted(predicted) != sorted(actual):
                found.append(f"{label}: predicted {predicted}, tflite-runtime 2.14 made {actual}")
    assert not found
