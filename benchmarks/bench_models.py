"""The real models of the manifest on each backend variant that runs them: `edgeinf bench` as figures.

Each model is measured on every variant that runs its file kind (TFLite with XNNPACK,
TFLite's built-in kernels; NCNN fp16 and all-fp32), one thread, seeded random input,
10 warm-ups and 100 timed runs (``--quick``: 20). The contenders of one model are
measured one after the other, and the whole set is repeated ``--repeat`` times (default
3) in alternating order so that drift on the machine favours no variant; the figure is
the median of the repeats' medians, and the ratio is against the model's first variant.

Usage: python benchmarks/bench_models.py [--quick] [--repeat N] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeinf import bench, zoo  # noqa: E402

MODELS = {  # name: (variants, input shape for dynamic inputs)
    "face_detection_short_range": (("tflite", "tflite-builtin"), None),
    "face_detection_full_range": (("tflite", "tflite-builtin"), None),
    "face_landmark": (("tflite", "tflite-builtin"), None),
    "realesr_animevideov3_x2": (("ncnn", "ncnn-fp32"), (1, 3, 64, 64)),
}


def measure_model(name: str, variants, shape, runs: int, repeat: int) -> list[dict]:
    path = zoo.path(name)
    records: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(repeat):
        order = variants if r % 2 == 0 else tuple(reversed(variants))
        for variant in order:
            records[variant].append(bench.bench_model(path, variant=variant, runs=runs, warmup=10, shape=shape))
    rows = []
    base = None
    for variant in variants:
        recs = records[variant]
        median = statistics.median(r["latency_us"]["median_us"] for r in recs)
        base = base or median
        rows.append(
            {
                "model": name,
                "variant": variant,
                "input": "x".join(str(d) for d in recs[0]["input_shape"]),
                "runtime": recs[0]["runtime"],
                "delegate": recs[0]["delegate"] or "",
                "median_ms": median / 1e3,
                "p95_ms": statistics.median(r["latency_us"]["p95_us"] for r in recs) / 1e3,
                "range_of_medians_ms": f"{min(r['latency_us']['median_us'] for r in recs) / 1e3:.3f}-"
                f"{max(r['latency_us']['median_us'] for r in recs) / 1e3:.3f}",
                "vs_first_variant": median / base,
                "load_ms": statistics.median(r["load_ms"] for r in recs),
                "first_inference_ms": statistics.median(r["first_inference_ms"] for r in recs),
                "peak_rss_mib": max(r["memory"]["peak_rss_bytes"] for r in recs) / 2**20,
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 runs, one repeat (a smoke test, not a figure)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-' for stdout only)")
    args = parser.parse_args(argv)
    runs, repeat = (20, 1) if args.quick else (100, args.repeat)
    rows = []
    for name, (variants, shape) in MODELS.items():
        rows += measure_model(name, variants, shape, runs, repeat)
    doc = bench.document(
        "models", "Real models per backend variant (1 thread, `edgeinf bench` method)", quick=args.quick, rows=rows
    )
    bench.finish(doc, args.json, table(rows))
    return 0


def table(rows: list[dict]) -> list[str]:
    header = f"{'model':<28} {'variant':<15} {'median ms':>9} {'p95 ms':>8} {'ratio':>6} {'load ms':>8} {'peak MiB':>8}"
    return [header] + [
        f"{r['model']:<28} {r['variant']:<15} {r['median_ms']:>9.3f} {r['p95_ms']:>8.3f} "
        f"{r['vs_first_variant']:>6.2f} {r['load_ms']:>8.1f} {r['peak_rss_mib']:>8.1f}"
        for r in rows
    ]


if __name__ == "__main__":
    sys.exit(main())
