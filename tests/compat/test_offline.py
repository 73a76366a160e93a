"""The check imports no runtime, works where only tflite-runtime is installed, and its
layout data matches the schema module it was generated from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compat_env import legacy_python, need

ROOT = Path(__file__).resolve().parents[2]
# runtimes and CLIs in child processes: minutes under emulation, so not in the emulated subset
pytestmark = pytest.mark.slow


def _run(python: str, code: str, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, "-c", code, *map(str, args)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


CHECK_AND_LIST_MODULES = r"""
import json, sys
import edgeinf
reports = {p: edgeinf.check(p) for p in sys.argv[1:]}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("ai_edge_litert", "tflite_runtime", "ncnn", "onnxruntime", "tensorflow"))
print(json.dumps({"loaded": loaded, "verdicts": {p: {b: r.verdict(b) for b in r.backends} for p, r in reports.items()},
                  "targets": {p: {b: v.target for b, v in r.backends.items()} for p, r in reports.items()}}))
"""


def test_check_imports_no_runtime(model_path):
    paths = [model_path("face_detection_short_range"), model_path("realesr_animevideov3_x2")]
    out = _run(sys.executable, CHECK_AND_LIST_MODULES, *paths)
    assert out["loaded"] == []
    assert out["verdicts"][str(paths[0])] == {"tflite": "YES"}


def test_check_on_a_device_with_only_tflite_runtime(model_path):
    # .venv-legacy has tflite-runtime 2.14 and numpy<2, and no ai-edge-litert (so no schema module)
    python = legacy_python()
    if python is None:
        need("tflite-runtime 2.14 environment", "run .ci/run or set EDGEINF_LEGACY_PYTHON")
    path = model_path("face_detection_full_range_sparse")
    code = "import importlib.util; assert importlib.util.find_spec('ai_edge_litert') is None\n" + CHECK_AND_LIST_MODULES
    out = _run(python, code, path)
    assert out["loaded"] == []
    assert out["targets"][str(path)] == {
        "tflite": "tflite_runtime 2.14.0"
    }  # the installed runtime is the default target
    assert out["verdicts"][str(path)] == {"tflite": "YES"}


def test_layout_is_what_the_generator_makes_from_the_installed_schema(tmp_path):
    pytest.importorskip("ai_edge_litert")
    out = tmp_path / "layout.json"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_tflite_layout.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    committed = json.loads((ROOT / "edgeinf" / "formats" / "tflite_layout.json").read_text())
    fresh = json.loads(out.read_text())
    assert fresh == committed, "tflite_layout.json is stale: rerun tools/gen_tflite_layout.py"


def test_layout_slots_match_the_generated_accessors():
    # an independent reading of the generated module: each accessor's vtable offset
    from edgeinf.formats._flatbuf import load_layout
    from edgeinf.formats.tflite_schema import schema

    s = schema()
    layout = load_layout("tflite_layout")["tables"]
    import inspect
    import re

    checked = 0
    for tname in (
        "Model",
        "SubGraph",
        "Tensor",
        "Operator",
        "OperatorCode",
        "Buffer",
        "QuantizationParameters",
        "SparsityParameters",
        "SignatureDef",
        "Conv2DOptions",
    ):
        cls = getattr(s, tname)
        for fname, field in layout[tname].items():
            src = inspect.getsource(getattr(cls, field["method"]))
            assert int(re.search(r"Offset\((\d+)\)", src).group(1)) == field["slot"], f"{tname}.{fname}"
            checked += 1
    assert checked > 50


def test_schema_module_missing_gives_a_clear_error(monkeypatch):
    from edgeinf.errors import BackendUnavailableError
    from edgeinf.formats import tflite_schema

    monkeypatch.setattr(tflite_schema, "schema_path", lambda: None)
    tflite_schema.schema.cache_clear()
    try:
        with pytest.raises(BackendUnavailableError, match=r"needs the TFLite schema module shipped by ai-edge-litert"):
            tflite_schema.schema()
    finally:
        monkeypatch.undo()
        tflite_schema.schema.cache_clear()
