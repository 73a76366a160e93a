"""How long `edgeinf.check` takes, beside the time the runtime takes to load the same model.

Contenders, per model:
  check (warm)   edgeinf.check(path) in this process, tables already loaded; no runtime imported
  check (cold)   a fresh `python -c "import edgeinf; edgeinf.check(path)"`, start-up included
  load (warm)    the runtime's Interpreter(model_path) + allocate_tensors() (TFLite, XNNPACK on) or
                 ncnn.Net load_param + load_model, timed inside a child process that has imported it
  load (cold)    a fresh `python -c "import runtime; load"`, start-up included

Models: the manifest's .tflite files and NCNN .param, plus a generated 25 MB float model
(80 3x3 convolutions of 96 channels, with ReLU and residual adds: 240 nodes). Single
thread. The whole comparison is repeated (--rounds, default 3) and the range of the
per-round medians is reported, so that one slow round on a shared machine shows as a range
rather than as the figure (the common method is in edgeinf.bench and benchmarks/README.md).

Usage:
    python benchmarks/bench_check.py [--runs 20] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgeinf  # noqa: E402
from edgeinf import zoo  # noqa: E402
from edgeinf.bench import document, machine_line, write_document  # noqa: E402

CHILD_LOAD = r"""
import json, sys, time
path, kind, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
if kind == "tflite":
    from ai_edge_litert.interpreter import Interpreter
    def load():
        it = Interpreter(model_path=path, num_threads=1)
        it.allocate_tensors()
else:
    import ncnn
    def load():
        net = ncnn.Net()
        net.opt.num_threads = 1
        assert net.load_param(path) == 0
        assert net.load_model(path[: -len(".param")] + ".bin") == 0
load()
for _ in range(runs):
    t = time.perf_counter(); load(); times.append(time.perf_counter() - t)
print(json.dumps(times))
"""

COLD_CHECK = "import edgeinf, sys; edgeinf.check(sys.argv[1])"
COLD_LOAD = {
    "tflite": "import sys; from ai_edge_litert.interpreter import Interpreter; it = Interpreter(model_path=sys.argv[1], num_threads=1); it.allocate_tensors()",
    "ncnn": "import sys, ncnn; n = ncnn.Net(); n.load_param(sys.argv[1]); n.load_model(sys.argv[1][:-6] + '.bin')",
}


def big_model(path: Path) -> Path:
    """A 25 MB float .tflite: 80 conv 3x3x96 (+ReLU, +residual ADD), 240 nodes."""
    from edgeinf.formats.tflite_schema import schema
    from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

    s = schema()
    rng = np.random.default_rng(0)
    c, hw = 96, 32
    tensors = [TensorDef("input", (1, hw, hw, c), "float32")]
    ops = []
    x = 0
    for i in range(80):
        w = len(tensors)
        tensors.append(
            TensorDef(f"w{i}", (c, 3, 3, c), "float32", data=rng.standard_normal((c, 3, 3, c), dtype=np.float32) * 0.01)
        )
        tensors.append(TensorDef(f"b{i}", (c,), "float32", data=np.zeros(c, np.float32)))
        tensors += [
            TensorDef(f"conv{i}", (1, hw, hw, c), "float32"),
            TensorDef(f"relu{i}", (1, hw, hw, c), "float32"),
            TensorDef(f"add{i}", (1, hw, hw, c), "float32"),
        ]
        opts = s.Conv2DOptionsT()
        opts.padding, opts.strideW, opts.strideH = s.Padding.SAME, 1, 1
        ops += [
            OpDef("CONV_2D", [x, w, w + 1], [w + 2], options=opts),
            OpDef("RELU", [w + 2], [w + 3]),
            OpDef("ADD", [x, w + 3], [w + 4], options=s.AddOptionsT()),
        ]
        x = w + 4
    path.write_bytes(build_model(tensors, ops, [0], [x]))
    return path


def time_check(path: Path, runs: int) -> list[float]:
    edgeinf.check(path)  # tables loaded once, as in a long-running program
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        edgeinf.check(path)
        out.append(time.perf_counter() - t)
    return out


def time_child(code_args: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, *code_args],
            check=True,
            capture_output=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        out.append(time.perf_counter() - t)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    assert "ai_edge_litert" not in sys.modules and "ncnn" not in sys.modules
    with tempfile.TemporaryDirectory() as tmp:
        models = [
            (n, zoo.path(n), "tflite")
            for n in ("face_detection_short_range", "face_detection_full_range_sparse", "face_landmark")
        ]
        models.append(("generated_25MB", big_model(Path(tmp) / "big.tflite"), "tflite"))
        models.append(("realesr_animevideov3_x2", zoo.path("realesr_animevideov3_x2"), "ncnn"))
        rows = []
        for name, path, kind in models:
            rounds = {"check_warm": [], "load_warm": [], "check_cold": [], "load_cold": []}
            for _ in range(args.rounds):
                rounds["check_warm"].append(statistics.median(time_check(path, args.runs)))
                child = subprocess.run(
                    [sys.executable, "-c", CHILD_LOAD, str(path), kind, str(args.runs)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                rounds["load_warm"].append(statistics.median(json.loads(child.stdout.strip().splitlines()[-1])))
                rounds["check_cold"].append(
                    statistics.median(time_child(["-c", COLD_CHECK, str(path)], args.cold_runs))
                )
                rounds["load_cold"].append(
                    statistics.median(time_child(["-c", COLD_LOAD[kind], str(path)], args.cold_runs))
                )
            report = edgeinf.check(path)
            rows.append(
                {
                    "model": name,
                    "bytes": path.stat().st_size + (path.with_suffix(".bin").stat().st_size if kind == "ncnn" else 0),
                    "nodes": len(report.nodes),
                    **{k: [min(v), statistics.median(v), max(v)] for k, v in rounds.items()},
                }
            )
    assert "ai_edge_litert" not in sys.modules and "ncnn" not in sys.modules  # the check imported no runtime
    print(
        f"edgeinf check vs runtime load, 1 thread, median of {args.runs} (cold: {args.cold_runs}) per round, {args.rounds} rounds"
    )
    print(
        f"{'model':<34} {'MB':>6} {'nodes':>5}  {'check warm ms':>15} {'load warm ms':>15} {'ratio':>6}  {'check cold ms':>15} {'load cold ms':>15} {'ratio':>6}"
    )

    def cell(r, key):
        lo, mid, hi = (v * 1e3 for v in r[key])
        return f"{mid:7.1f} ({lo:.0f}-{hi:.0f})"

    for r in rows:
        warm_ratio = r["check_warm"][1] / r["load_warm"][1]
        cold_ratio = r["check_cold"][1] / r["load_cold"][1]
        print(
            f"{r['model']:<34} {r['bytes'] / 1e6:6.1f} {r['nodes']:>5}  {cell(r, 'check_warm'):>15} {cell(r, 'load_warm'):>15} {warm_ratio:6.2f}  "
            f"{cell(r, 'check_cold'):>15} {cell(r, 'load_cold'):>15} {cold_ratio:6.2f}"
        )
    doc = document("check", __doc__.splitlines()[0], rows=rows)
    print(f"{machine_line(doc)}:", doc["versions"])
    if args.json:
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
