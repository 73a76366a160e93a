"""`edgeinf check`: exit codes for CI, JSON output, and hostile files (exit 2, never a crash)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgeinf.formats.tflite_writer import insert_custom_op, set_op_version, unpack

# runtimes and CLIs in child processes: minutes under emulation, so not in the emulated subset
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "edgeinf.compat.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc


def test_runs_exit_0_with_text(model_path):
    proc = run_cli(model_path("face_detection_short_range"))
    assert proc.returncode == 0, proc.stderr
    assert "tflite   YES" in proc.stdout and "tflite:CONV_2D v1" in proc.stdout


def test_does_not_run_exit_1_and_names_every_problem(model_path, tmp_path):
    path = tmp_path / "bumped.tflite"
    data = set_op_version(model_path("face_detection_short_range").read_bytes(), "CONV_2D", 8)
    path.write_bytes(insert_custom_op(data, "MyFancyOp"))
    proc = run_cli(path, "--target", "tflite-runtime==2.14", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "edgeinf.compat/1"
    b = doc["backends"]["tflite"]
    assert b["verdict"] == "NO" and b["runnable"] is False and b["target"] == "tflite_runtime 2.14.0"
    bad = [n for n in doc["nodes"] if n["status"]["tflite"]["status"] == "unsupported"]
    assert {n["key"] for n in bad} == {"tflite:CONV_2D", "tflite:CUSTOM:MyFancyOp"}
    assert len(bad) == 22 and doc["custom_ops"] == ["MyFancyOp"]
    # the same model on the newer runtime: only the custom op is a problem
    proc = run_cli(path, "--target", "ai-edge-litert", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert [n["key"] for n in doc["nodes"] if n["status"]["tflite"]["status"] == "unsupported"] == [
        "tflite:CUSTOM:MyFancyOp"
    ]


def test_backend_and_target_errors_exit_2(model_path):
    proc = run_cli(model_path("face_detection_short_range"), "--target", "tflite-runtime==1.0")
    assert proc.returncode == 2 and "no table for tflite_runtime 1.0; tables exist for: 2.14.0" in proc.stderr
    proc = run_cli(model_path("face_detection_short_range"), "--backend", "ncnn")
    assert proc.returncode == 2 and "a tflite model is checked for tflite, not 'ncnn'" in proc.stderr


def test_list_targets():
    proc = run_cli("x", "--list-targets")
    assert proc.returncode == 0
    assert set(proc.stdout.split("\n")) >= {"ai_edge_litert 2.3.0", "tflite_runtime 2.14.0", "ncnn 1.0.20261020"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, model_path):
    tmp = tmp_path_factory.mktemp("hostile")
    return _hostile(tmp, model_path("face_detection_short_range").read_bytes(), model_path("realesr_animevideov3_x2"))


def _hostile(tmp_path: Path, face: bytes, esr_param: Path) -> dict[str, Path]:
    rng = np.random.default_rng(99)
    files = {}

    def put(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        files[name] = p

    put("empty.tflite", b"")
    put("random.tflite", rng.bytes(5000))
    put("random_with_id.tflite", rng.bytes(4) + b"TFL3" + rng.bytes(5000))
    put("truncated.tflite", face[: len(face) // 2])
    flipped = bytearray(face)
    for pos in rng.integers(0, 4000, size=40):
        flipped[pos] ^= 0xFF
    put("flipped.tflite", bytes(flipped))
    model = unpack(face)
    model.subgraphs[0].operators[3].inputs[0] = 10_000
    from edgeinf.formats.tflite_writer import pack

    put("index_out_of_range.tflite", pack(model))
    put("bad_magic.param", b"7767518\n1 1\nInput in 0 1 data\n")
    put("huge_counts.param", b"7767517\n1 99999999\nInput in 0 1 data 0=1 1=2 2=3 -23300=999999999,1\n")
    put("garbage.onnx", rng.bytes(3000))
    put("unknown.bin", b"\x00" * 100)
    no_bin = tmp_path / "no_bin.param"
    no_bin.write_text(esr_param.read_text())
    files["no_bin.param"] = no_bin
    files["missing.tflite"] = tmp_path / "does_not_exist.tflite"
    (tmp_path / "a_directory").mkdir()
    files["directory"] = tmp_path / "a_directory"
    return files


@pytest.mark.parametrize(
    "name, message",
    [
        ("empty.tflite", "0 bytes is too short"),
        ("random.tflite", "expected a .tflite, an NCNN .param or an .onnx model|not a .tflite file"),
        ("random_with_id.tflite", "outside the file|file ends at byte"),
        ("truncated.tflite", "file ends at byte|outside the file"),
        ("flipped.tflite", ""),
        ("index_out_of_range.tflite", "tensor index 10000 out of range"),
        ("bad_magic.param", "expected 7767517|expected a .tflite"),
        ("huge_counts.param", "array param 0 declares 999999999 elements but has 1"),
        ("garbage.onnx", "not a readable ONNX protobuf|fails onnx's model checker|not an ONNX model"),
        ("unknown.bin", "expected a .tflite, an NCNN .param or an .onnx model"),
        ("no_bin.param", ".param without its .bin"),
        ("missing.tflite", "no such file"),
        ("directory", "is a directory"),
    ],
)
def test_hostile_files_exit_2(hostile, name, message):
    proc = run_cli(hostile[name], "--json")
    if name == "flipped.tflite" and proc.returncode in (0, 1):
        return  # bit flips that land in weights leave a valid model: a verdict is the right answer
    assert proc.returncode == 2, (proc.returncode, proc.stdout[:500], proc.stderr[-500:])
    doc = json.loads(proc.stdout)
    assert doc["error"]["kind"] == "unreadable"
    if message:
        import re

        assert re.search(message, doc["error"]["message"]), doc["error"]["message"]
