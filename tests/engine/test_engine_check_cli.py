"""`edgeinf check --backend edgeinf MODEL`: per operator, the engine or LiteRT, and why."""

from __future__ import annotations

import json

import numpy as np
import pytest
from engine_models import Graph, random_q
from test_engine_partition import space_to_depth

from edgeinf import cli


def check(capsys, *args) -> tuple[int, str]:
    code = cli.main(["check", "--backend", "edgeinf", *map(str, args)])
    return code, capsys.readouterr().out


def test_the_int8_face_landmark_of_edgeinf_quantize_is_native(capsys):
    quantize = pytest.importorskip("edgeinf.quantize", reason="edgeinf quantize builds the int8 face models")
    path = quantize.int8_path("face_landmark")
    code, out = check(capsys, path, "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["verdict"], report["on_litert"], report["operators"]) == ("NATIVE", 0, 143)
    prelus = [n for n in report["nodes"] if n["op"] == "PRELU"]
    assert len(prelus) == 23 and all("DEQUANTIZE+PRELU+QUANTIZE" in n["how"] for n in prelus)
    code, text = check(capsys, path)
    assert "NATIVE: all 143 operators run on the int8 engine" in text.splitlines()[0]


def test_a_float_model_runs_whole_on_litert_with_each_reason(capsys):
    code, out = check(capsys, "face_detection_short_range", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "LITERT"
    assert "worth a segment" in report["not_split"]
    assert all(n["runtime"] == "tflite" and n["reason"] for n in report["nodes"])
    assert "FLOAT16" in report["nodes"][0]["reason"]


def test_a_split_model_names_the_operator_litert_runs(capsys, tmp_path):
    rng = np.random.default_rng(0)
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 3), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2))
    y = g.conv(space_to_depth(g, a), 8, 1, out_q=random_q(rng, 0.05, 0.2))
    path = tmp_path / "split.tflite"
    path.write_bytes(g.build([x], [y]))
    code, text = check(capsys, path)
    lines = text.splitlines()
    assert code == 0
    assert "SPLIT: 2 of 3 operators run on the int8 engine, 1 on LiteRT (3 segments)" in lines[0]
    assert lines[3].split()[:3] == ["1", "SPACE_TO_DEPTH", "tflite"]
    assert "is not an operator the engine runs" in lines[3]


def test_an_unreadable_model_exits_2(capsys, tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\0\0\0\0TFL3" + b"\xff" * 40)
    assert check(capsys, bad)[0] == 2
    param = tmp_path / "model.param"
    param.write_text("7767517\n0 0\n")
    code, out = check(capsys, param, "--json")
    assert code == 2 and json.loads(out)["error"]["kind"] == "unreadable"
