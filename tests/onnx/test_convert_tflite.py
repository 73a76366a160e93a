"""The TFLite path of `edgeinf convert`: onnx2tf's command line, its NHWC layout lined up
again for verification, and its failures. onnx2tf needs TensorFlow, which this suite does
not install: a stand-in `onnx2tf` module writes what onnx2tf writes (an NHWC .tflite named
<stem>_float32.tflite, built with edgeinf's own .tflite writer)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from edgeinf.cli import main

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import graph_model, save  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

STAND_IN = """
import os
import sys
from pathlib import Path

args = sys.argv[1:]
Path(os.environ["FAKE_ONNX2TF_LOG"]).write_text(" ".join(args))
if {fail!r}:
    print("ERROR: The trace log is below.\\nonnx2tf could not convert the node the_relu", file=sys.stderr)
    sys.exit(1)
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

stem = Path(args[args.index("-i") + 1]).stem
data = build_model(
    [TensorDef("x", (1, 8, 8, 3), "float32"), TensorDef("y", (1, 8, 8, 3), "float32")],
    [OpDef("{op}", [0], [1])],
    inputs=[0],
    outputs=[1],
)
Path(args[args.index("-o") + 1], stem + "_float32.tflite").write_bytes(data)
"""


@pytest.fixture
def fake_onnx2tf(tmp_path, monkeypatch):
    def install(op: str = "RELU", fail: bool = False) -> Path:
        root = tmp_path / "fake"
        for name in ("onnx2tf", "tensorflow"):
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / name / "__init__.py").write_text("")
        (root / "onnx2tf" / "__main__.py").write_text(textwrap.dedent(STAND_IN.format(op=op, fail=fail)))
        monkeypatch.delenv("EDGEINF_TF_PYTHON", raising=False)  # this interpreter runs the stand-in
        monkeypatch.syspath_prepend(str(root))  # find_spec sees the stand-ins
        monkeypatch.setenv("PYTHONPATH", f"{root}:{REPO}")  # and so does `python -m onnx2tf`
        monkeypatch.setenv("FAKE_ONNX2TF_LOG", str(tmp_path / "onnx2tf-args.txt"))
        return root

    return install


def relu_model(tmp_path):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="the_relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    return save(model, tmp_path / "relu.onnx")


def test_onnx2tf_result_is_checked_and_verified_in_nchw(tmp_path, fake_onnx2tf, capsys):
    fake_onnx2tf("RELU")
    out = tmp_path / "out"
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report["failures"]
    assert report["files"] == [str(out / "relu.tflite")] and report["check"]["runnable"]
    (output,) = report["verification"]["outputs"]
    assert output["alignment"] == "NHWC->NCHW" and output["max_abs"] == 0.0
    args = (tmp_path / "onnx2tf-args.txt").read_text().split()
    assert args[args.index("-ois") + 1] == "x:1,3,8,8" and "-n" in args
    assert report["converter"]["command"][0] == "onnx2tf"


def test_a_wrong_tflite_fails_verification(tmp_path, fake_onnx2tf, capsys):
    fake_onnx2tf("TANH")  # not what the ONNX model computes
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert code == 1 and "FAILED: output 'y': max abs error" in text


def test_onnx2tf_failure_is_reported_with_its_last_lines(tmp_path, fake_onnx2tf, capsys):
    fake_onnx2tf(fail=True)
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "onnx2tf failed to convert relu.onnx (exit code 1)" in err and "the_relu" in err


def test_without_onnx2tf_the_reason_is_given(tmp_path, monkeypatch, capsys):
    from edgeinf.convert import onnx2tf

    monkeypatch.setattr(onnx2tf, "missing", lambda: ["tensorflow"])
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(tmp_path / "out")])
    assert code == 2 and "needs onnx2tf and TensorFlow, and tensorflow is not installed" in capsys.readouterr().err
    assert sys.modules.get("tensorflow") is None


def test_a_tf_python_without_onnx2tf_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGEINF_TF_PYTHON", sys.executable)  # a Python, but without onnx2tf here
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "fake" not in p])
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and f"not in EDGEINF_TF_PYTHON={sys.executable}" in err and "onnx2tf" in err


def test_a_tf_python_that_does_not_run_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGEINF_TF_PYTHON", str(tmp_path / "no-such-python"))
    code = main(["convert", str(relu_model(tmp_path)), "--to", "tflite", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "is not a Python interpreter that runs" in err and "tools/install_tf.sh" in err


def test_onnx2tf_gets_a_copy_with_fixed_inputs_and_its_sample_images(tmp_path, fake_onnx2tf, capsys):
    # onnx2tf rewrites the file it is given, reads -1 dimensions as dynamic, and downloads
    # sample images unless its working folder has them: it must get none of that from the user.
    from edgeinf.convert import onnx2tf

    root = fake_onnx2tf("RELU")
    main_py = root / "onnx2tf" / "__main__.py"
    main_py.write_text(
        textwrap.dedent(
            """
            import os, sys
            from pathlib import Path
            import onnx
            args = sys.argv[1:]
            given = Path(args[args.index("-i") + 1])
            model = onnx.load(str(given))
            dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
            names = [n.name for n in model.graph.node]
            samples = Path(os.getcwd(), "SAMPLES").is_file()
            Path(os.environ["FAKE_ONNX2TF_LOG"]).write_text(repr((str(given), dims, names, samples)))
            given.write_bytes(b"simplified")  # as onnx2tf does
            sys.exit(1)
            """
        ).replace("SAMPLES", onnx2tf.SAMPLE_IMAGES)
    )
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="Relu@0")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, 8, 8])],  # PaddlePaddle's -1 batch
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3, 8, 8])],
    )
    path = save(model, tmp_path / "paddle.onnx")
    before = path.read_bytes()
    code = main(["convert", str(path), "--to", "tflite", "-o", str(tmp_path / "out"), "--input-shape", "1,3,8,8"])
    assert code == 1
    given, dims, names, samples = eval((tmp_path / "onnx2tf-args.txt").read_text())
    assert given != str(path) and path.read_bytes() == before
    assert dims == [1, 3, 8, 8] and names == ["Relu_0"] and samples
