"""`import edgeinf` stays light: no runtime, no OpenCV, no native module."""

import json
import subprocess
import sys


def _in_a_fresh_python(code: str):
    """What ``code``, run in a new interpreter, prints as JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_import_edgeinf_imports_no_runtime():
    loaded = _in_a_fresh_python(
        "import sys, json, edgeinf; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('ai_edge_litert', 'tflite_runtime', 'ncnn', 'onnx', 'cv2', 'PIL', 'serial', 'edgeinf'))))"
    )
    assert not [m for m in loaded if not m.startswith("edgeinf")], loaded
    assert "edgeinf._C" not in loaded
    assert "edgeinf.model" not in loaded  # loaded on first use of edgeinf.load


def test_pipeline_and_sources_are_reached_from_the_top_level_lazily():
    before, same, sources, cv2_loaded = _in_a_fresh_python(
        "import sys, json, edgeinf; before = 'edgeinf.pipeline' in sys.modules; "
        "from edgeinf.pipeline import Pipeline; "
        "print(json.dumps([before, edgeinf.Pipeline is Pipeline, edgeinf.sources.__name__, 'cv2' in sys.modules]))"
    )
    assert before is False
    assert same is True
    assert sources == "edgeinf.sources"
    assert cv2_loaded is False  # OpenCV is imported when a source that needs it opens
