"""tflite-runtime 2.14 (the fallback package) in its own numpy<2 environment.

tflite-runtime 2.14 cannot import under numpy 2, so it lives in a second virtual
environment (.ci/run makes it at .venv-legacy; EDGEINF_LEGACY_PYTHON overrides). The
checks run there in a subprocess and report back as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r"""
import json, sys
import numpy as np
import edgeinf
from edgeinf import zoo
from edgeinf.face import FaceDetector
from PIL import Image
import tflite_runtime.interpreter as tfl

path = zoo.path("face_detection_short_range")
x = np.random.default_rng(7).uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
with edgeinf.load(path, num_threads=1) as model:
    ours = model.run(x)
    facts = {"runtime": model.runtime, "delegate": model.delegate, "numpy": np.__version__}
    raw = tfl.Interpreter(model_path=str(path), num_threads=1)
    raw.allocate_tensors()
    raw.set_tensor(raw.get_input_details()[0]["index"], x)
    raw.invoke()
    facts["bit_exact"] = all(
        np.array_equal(ours[d["name"]], raw.get_tensor(d["index"])) for d in raw.get_output_details()
    )
    photo = np.asarray(Image.open(zoo.path("grace_hopper")).convert("RGB"))
    facts["faces"] = [list(f.box) + [f.score] for f in FaceDetector(model).detect(photo)]
print(json.dumps(facts))
"""


def legacy_python() -> str | None:
    explicit = os.environ.get("EDGEINF_LEGACY_PYTHON")
    candidate = Path(explicit) if explicit else ROOT / ".venv-legacy" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(scope="module")
def legacy_facts(model_path):
    python = legacy_python()
    if python is None:
        if os.environ.get("CI"):
            pytest.fail("CI must provide the tflite-runtime environment (.venv-legacy): see .ci/run")
        pytest.skip("no tflite-runtime 2.14 environment: run .ci/run or set EDGEINF_LEGACY_PYTHON")
    model_path("face_detection_short_range"), model_path("grace_hopper")  # fetch with this env's pip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_auto_falls_back_to_tflite_runtime(legacy_facts):
    assert legacy_facts["runtime"] == "tflite_runtime 2.14.0"
    assert legacy_facts["numpy"].startswith("1.")


def test_run_equals_the_raw_tflite_runtime_interpreter(legacy_facts):
    assert legacy_facts["bit_exact"] is True


def test_face_found_on_tflite_runtime(legacy_facts):
    faces = legacy_facts["faces"]
    assert len(faces) == 1
    x0, y0, x1, y1, score = faces[0]
    assert score > 0.9
    assert 150 < x0 < 190 and 130 < y0 < 170 and 340 < x1 < 385 and 320 < y1 < 360
