"""`edgeinf info` and `edgeinf demo` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgeinf import zoo

ROOT = Path(__file__).resolve().parents[2]


def edgeinf_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "edgeinf", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_info_json_describes_the_model(model_path):
    pytest.importorskip("ai_edge_litert")
    path = model_path("face_detection_short_range")
    proc = edgeinf_cli("info", path, "--json", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert (
        facts["sha256"] == zoo.sha256_of(path) == zoo.entry("face_detection_short_range")["files"][path.name]["sha256"]
    )
    assert facts["size_bytes"] == path.stat().st_size
    assert facts["operators"] == 164
    assert facts["backend"] == "tflite" and facts["delegate"] == "xnnpack" and facts["threads"] == 1
    assert facts["inputs"][0]["shape"] == [1, 128, 128, 3] and facts["inputs"][0]["layout"] == "NHWC"
    assert [o["name"] for o in facts["outputs"]] == ["regressors", "classificators"]
    assert facts["board"]
    # the load's peak resident memory: at least the model's bytes, and a real process's size
    assert path.stat().st_size < facts["load_peak_rss_bytes"] == facts["details"]["load_peak_rss_bytes"]
    text = edgeinf_cli("info", path, "--threads", "1").stdout
    assert "MiB, the process's peak while loading" in text


def test_info_on_the_ncnn_model(model_path):
    pytest.importorskip("ncnn")
    proc = edgeinf_cli("info", model_path("realesr_animevideov3_x2"), "--json")
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["backend"] == "ncnn" and facts["operators"] == 41
    assert facts["inputs"][0]["name"] == "data" and facts["inputs"][0]["layout"] == "NCHW"


def test_info_on_a_bad_file_exits_2_with_the_reason(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x10\x00\x00\x00TFL3" + b"\xff" * 40)
    proc = edgeinf_cli("info", bad)
    assert proc.returncode == 2
    assert proc.stderr.startswith("edgeinf: error: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_demo_detects_the_face_and_writes_an_annotated_image(tmp_path, model_path):
    pytest.importorskip("ai_edge_litert")
    PIL = pytest.importorskip("PIL.Image")
    model_path("grace_hopper")
    proc = edgeinf_cli("demo", "--out", tmp_path / "out.png", "--threads", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "faces    1 " in proc.stdout
    original = np.asarray(PIL.open(model_path("grace_hopper")).convert("RGB")).astype(int)
    annotated = np.asarray(PIL.open(tmp_path / "out.png").convert("RGB")).astype(int)
    changed = np.argwhere(np.abs(annotated - original).sum(-1) > 60)
    # The drawn box lies around the face, not elsewhere in the photo.
    (y0, x0), (y1, x1) = changed.min(0), changed.max(0)
    assert 150 < x0 < 190 and 130 < y0 < 170 and 340 < x1 < 385 and 320 < y1 < 360, (x0, y0, x1, y1)
