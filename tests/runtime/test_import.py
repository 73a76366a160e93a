"""`import edgeinf` stays light: no runtime, no OpenCV, no native module."""

import json
import subprocess
import sys


def test_import_edgeinf_imports_no_runtime():
    code = (
        "import sys, json, edgeinf; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('ai_edge_litert', 'tflite_runtime', 'ncnn', 'onnx', 'cv2', 'PIL', 'serial', 'edgeinf'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert not [m for m in loaded if not m.startswith("edgeinf")], loaded
    assert "edgeinf._C" not in loaded
    assert "edgeinf.model" not in loaded  # loaded on first use of edgeinf.load
