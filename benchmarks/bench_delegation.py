"""A float model and its int8 versions from two quantizers, on XNNPACK and on edgeinf's engine,
side by side with the XNNPACK partitions `edgeinf check` predicts and those LiteRT made.

    python benchmarks/bench_delegation.py [--runs 40] [--rounds 8] [--json benchmarks/results/delegation.json]

Models: face_landmark and face_detection_short_range from the manifest (float), quantized by
TFLite's own post-training calibrator and by `edgeinf quantize` (bench_engine.int8_models).
Contenders: LiteRT with its default XNNPACK delegate, and for the int8 models the engine
(``backend="edgeinf"``). Each row also has the check's prediction (partitions, the ops it
leaves on the CPU, its int8 warning) and what LiteRT did (``model.details["delegate_nodes"]``).

Method: 5 warm-up calls each, then the contenders of one model are timed in turn, a block
of --runs calls each, --rounds rounds, so drift on a shared machine favours none; medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_engine  # noqa: E402  (sets up the paths to edgeinf and tests/engine)

import edgeinf  # noqa: E402
from edgeinf import zoo  # noqa: E402
from edgeinf.bench import document, write_document  # noqa: E402

MODELS = {"face_landmark": (192, False), "face_detection_short_range": (128, True)}


def prediction(path: Path) -> dict:
    report = edgeinf.check(path, backend="tflite")
    verdict = report.backends["tflite"]
    cpu = Counter(n.op for n in report.nodes if n.subgraph == 0 and n.status["tflite"].status != "delegated")
    return {
        "verdict": verdict.verdict,
        "partitions": len(verdict.partitions),
        "partition_nodes": [list(p) for p in verdict.partitions],
        "cpu_ops": dict(cpu),
        "advice": list(verdict.advice),
    }


def time_contenders(models: dict, x_for: dict, runs: int, rounds: int) -> dict[str, float]:
    for name, model in models.items():
        for _ in range(5):
            model.run(x_for[name])
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            for _ in range(runs):
                start = time.perf_counter()
                model.run(x_for[name])
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def bench(label: str, path: Path, x_float, threads: int, runs: int, rounds: int) -> dict:
    xnnpack = edgeinf.load(path, backend="tflite", num_threads=threads)
    models, x_for = {"xnnpack": xnnpack}, {}
    quantized = xnnpack.inputs[0].quantization is not None
    if quantized:
        models["engine"] = edgeinf.load(path, backend="edgeinf", num_threads=threads)
    for name, model in models.items():
        x_for[name] = bench_engine._quantized(model, x_float) if quantized else x_float
    medians = time_contenders(models, x_for, runs, rounds)
    predicted = prediction(path)
    actual = xnnpack.details.get("delegate_nodes") or []
    row = {
        "model": label,
        "threads": threads,
        "xnnpack_ms": medians["xnnpack"],
        "engine_ms": medians.get("engine"),
        "predicted_partitions": predicted["partitions"],
        "litert_partitions": len(actual),
        "prediction_agrees": sorted(predicted["partition_nodes"]) == sorted(actual),
        "cpu_ops": ", ".join(f"{op} x{n}" for op, n in predicted["cpu_ops"].items()) or "-",
        "int8_warning": bool(predicted["advice"]),
        "engine_fallback": (models["engine"].details.get("fallback") or "") if quantized else "",
    }
    for model in models.values():
        model.close()
    return row, {"model": label, "predicted": predicted, "litert_delegate_nodes": actual}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="calls per block")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of blocks")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 thread, few calls")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rounds, args.threads = 3, 1, [1]
    photo = bench_engine._photo()
    rows, partitions = [], []
    with tempfile.TemporaryDirectory() as tmp:
        int8 = bench_engine.int8_models(Path(tmp))
        for name, (size, signed) in MODELS.items():
            variants = {f"{name} (float)": zoo.path(name)}
            variants.update({label: path for label, (path, _) in int8.items() if label.startswith(name + " (")})
            x_float = bench_engine._as_input(photo, size, signed)
            for label, path in variants.items():
                for threads in args.threads:
                    row, nodes = bench(label, path, x_float, threads, args.runs, args.rounds)
                    rows.append(row)
                    if threads == args.threads[0]:
                        partitions.append(nodes)
                    engine = f"{row['engine_ms']:7.2f} ms" if row["engine_ms"] is not None else "      -   "
                    print(
                        f"{label:48s} {threads} thr  xnnpack {row['xnnpack_ms']:7.2f} ms  engine {engine}  "
                        f"predicted {row['predicted_partitions']:2d} partition(s) (CPU: {row['cpu_ops']}), "
                        f"LiteRT {row['litert_partitions']}, agree={row['prediction_agrees']}"
                        + (
                            f"  (engine fell back to LiteRT: {row['engine_fallback']})"
                            if row["engine_fallback"]
                            else ""
                        )
                    )
    if args.json:
        doc = document(
            "delegation",
            "float vs int8 (two quantizers) on XNNPACK and the engine, with predicted XNNPACK partitions",
            quick=args.quick,
            rows=rows,
            partitions=partitions,
        )
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
