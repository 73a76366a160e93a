"""The NCNN verdict agrees with ncnn itself (load_param, load_model, extract in a child process),
and the ONNX -> NCNN verdict agrees with converting the real models with pnnx and running them."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import edgeinf
from edgeinf.errors import ModelFileError

# runtimes and CLIs in child processes: minutes under emulation, so not in the emulated subset
pytestmark = pytest.mark.slow


def _ncnn_runs(worker, param, inputs) -> dict:
    return worker.ask({"kind": "ncnn", "path": str(param), "bin": str(param.with_suffix(".bin")), "inputs": inputs})


def _retype(param, old: str, new: str, count: int = 1) -> None:
    lines = param.read_text().splitlines()
    done = 0
    for i, line in enumerate(lines):
        if line.split()[:1] == [old] and done < count:
            lines[i] = new + line[len(old) :]
            done += 1
    assert done == count, f"{old} appears {done} times, wanted {count}"
    param.write_text("\n".join(lines) + "\n")


def test_real_model_agrees(esr, ncnn_worker):
    report = edgeinf.check(esr)
    reply = _ncnn_runs(ncnn_worker, esr, {"data": [3, 24, 20]})
    assert report.runnable("ncnn") and reply["ok"], reply
    assert report.verdict("ncnn") == "YES"


@pytest.mark.parametrize(
    "old, new, why",
    [
        ("PixelShuffle", "MyUpsampleOp", "has no layer MyUpsampleOp"),
        ("PixelShuffle", "pnnx.Expression", "pnnx left pnnx.Expression unlowered"),
        ("Interp", "ArgMax", "compiled out"),  # registered in ncnn's table, OFF in the pip build
    ],
)
def test_unknown_or_compiled_out_layers_agree(esr, ncnn_worker, old, new, why):
    _retype(esr, old, new)
    report = edgeinf.check(esr)
    reply = _ncnn_runs(ncnn_worker, esr, {"data": [3, 24, 20]})
    assert report.runnable("ncnn") is False and reply["ok"] is False, reply
    assert reply["stage"] == "load_param"
    (node, status), *_ = report.problems("ncnn")
    assert node.op == new and why in status.reason


def test_every_failure_is_reported_not_just_the_first(esr, ncnn_worker):
    _retype(esr, "Interp", "Interp2", count=2)
    _retype(esr, "PixelShuffle", "MyUpsampleOp")
    report = edgeinf.check(esr)
    assert [n.op for n, _ in report.problems("ncnn")] == ["MyUpsampleOp", "Interp2", "Interp2"]
    assert _ncnn_runs(ncnn_worker, esr, {"data": [3, 24, 20]})["ok"] is False


def test_short_bin_is_unreadable_and_ncnn_refuses_it(esr, ncnn_worker):
    b = esr.with_suffix(".bin")
    b.write_bytes(b.read_bytes()[:-100])
    with pytest.raises(ModelFileError, match=r"\.bin is 1247268 bytes, the params imply at least"):
        edgeinf.check(esr)
    reply = _ncnn_runs(ncnn_worker, esr, {"data": [3, 24, 20]})
    assert reply["ok"] is False and reply["stage"] == "load_model"


@pytest.mark.parametrize("name, shape", [("ppocr_cls_mobile", [1, 3, 48, 192]), ("ppocr_det_small", [1, 3, 96, 96])])
def test_onnx_to_ncnn_verdict_agrees_with_pnnx_and_ncnn(model_path, tmp_path, pnnx_binary, ncnn_worker, name, shape):
    src = model_path(name)
    onnx_report = edgeinf.check(src, backend="ncnn")
    model = tmp_path / "m.onnx"
    shutil.copy(src, model)
    proc = subprocess.run(
        [pnnx_binary, str(model), "inputshape=[" + ",".join(map(str, shape)) + "]"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    param = tmp_path / "m.ncnn.param"
    converted = proc.returncode == 0 and param.is_file()
    runs = converted and _ncnn_runs(ncnn_worker, param, {"in0": shape[1:]})["ok"]
    assert onnx_report.runnable("ncnn") == runs, (onnx_report.backends["ncnn"].blockers, proc.stderr[-500:])
    if converted:  # and the converted .param's own check agrees too
        assert edgeinf.check(param).runnable("ncnn") == runs


def _to_binary(text_param, names: dict[str, int]) -> bytes:
    """Write a text .param as ncnn's binary .param.bin (what ncnn2mem emits)."""
    import struct

    from edgeinf.formats.ncnn_param import read_ncnn_param

    p = read_ncnn_param(text_param)
    blobs = {b: i for i, b in enumerate(p.blobs)}
    out = [struct.pack("<iii", 7767517, p.layer_count, p.blob_count)]
    for layer in p.layers:
        index = names.get(layer.type, 200)
        out.append(struct.pack("<iii", index, len(layer.inputs), len(layer.outputs)))
        out += [struct.pack("<i", blobs[b]) for b in layer.inputs + layer.outputs]
        for pid, value in layer.params.items():
            if isinstance(value, tuple):
                out.append(struct.pack("<ii", -23300 - pid, len(value)))
                out += [struct.pack("<f" if isinstance(v, float) else "<i", v) for v in value]
            else:
                out.append(struct.pack("<i", pid) + struct.pack("<f" if isinstance(value, float) else "<i", value))
        out.append(struct.pack("<i", -233))
    return b"".join(out)


def test_binary_param_agrees(esr, ncnn_worker):
    from edgeinf.compat import tables

    registry = tables.ncnn_registry(tables.resolve("ncnn"))["layers"]
    names = {name: e["index"] for name, e in registry.items()}
    binary = esr.with_name("m.param.bin")
    binary.write_bytes(_to_binary(esr, names))
    report = edgeinf.check(binary)
    assert report.verdict("ncnn") == "YES"
    assert [n.op for n in report.nodes] == [line.split()[0] for line in esr.read_text().splitlines()[2:]]
    job = {
        "kind": "ncnn",
        "path": str(binary),
        "bin": str(esr.with_suffix(".bin")),
        "inputs": {"0": [3, 24, 20]},
        "binary": True,
    }
    assert ncnn_worker.ask(job)["ok"] is True
    _retype(esr, "PixelShuffle", "NoSuchLayer")
    binary.write_bytes(_to_binary(esr, names))  # unknown names become type index 200
    report = edgeinf.check(binary)
    assert report.verdict("ncnn") == "NO" and "type index 200" in report.problems("ncnn")[0][1].reason
    assert ncnn_worker.ask(job)["stage"] == "load_param"


def test_binary_param_blob_index_out_of_range_is_unreadable(esr):
    import struct

    data = (
        struct.pack("<iii", 7767517, 1, 1)
        + struct.pack("<iii", 16, 0, 1)
        + struct.pack("<i", 5)
        + struct.pack("<i", -233)
    )
    bad = esr.with_name("bad.param.bin")
    bad.write_bytes(data)
    with pytest.raises(ModelFileError, match=r"layer 0 blob index 5 out of range 0..0"):
        edgeinf.check(bad)
