"""benchmarks/bench_onnx.py keeps the benchmark JSON contract and puts the runtimes side by side."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("onnxruntime")
pytest.importorskip("ncnn")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("pnnx") is None, reason="pip install --no-deps pnnx")
def test_quick_run_measures_ort_and_the_ncnn_conversion_at_1_and_2_threads(tmp_path):
    target = tmp_path / "onnx.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_onnx.py"), "--quick", "--models", "ppocr_cls_mobile"]
        + ["--json", str(target)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(target.read_text())
    assert doc["benchmark"] == "onnx" and doc["quick"] is True
    keys = list(doc["rows"][0])
    assert all(list(row) == keys and not any(isinstance(v, (dict, list)) for v in row.values()) for row in doc["rows"])
    measured = {(r["runtime"], r["threads"]) for r in doc["rows"] if not r["note"]}
    assert {("onnxruntime", 1), ("onnxruntime", 2), ("ncnn fp32", 1), ("ncnn fp32", 2)} <= measured
    assert all(r["median_ms"] > 0 for r in doc["rows"] if not r["note"])
    ncnn = next(r for r in doc["rows"] if r["runtime"] == "ncnn fp32")
    assert 0 <= ncnn["max_abs_vs_onnxruntime"] <= 1e-3  # the conversion was verified before it was timed
    litert = [r for r in doc["rows"] if r["runtime"].startswith("litert")]
    assert litert, "LiteRT is measured, or its row says why not"
    if importlib.util.find_spec("onnx2tf") is None:
        assert "needs onnx2tf and TensorFlow" in litert[0]["note"]
