"""Whole int8 models, side by side: edgeinf's engine vs LiteRT with XNNPACK vs LiteRT built-in.

    python benchmarks/bench_engine.py [--runs 40] [--rounds 8] [--json benchmarks/results/engine.json]
    python benchmarks/bench_engine.py --profile [--threads 1]   # time per step, beside XNNPACK's per operator

The models are the manifest's face models quantized to int8 two ways: by TFLite's own
post-training calibrator (in the LiteRT wheel), calibrated on crops of the Grace Hopper photo
(float16 weights folded to float32 first), and by `edgeinf quantize` (the cached int8 face
models of `edgeinf.quantize.int8_path`). Each contender runs the same quantized photo. A
model the engine does not run whole falls back to LiteRT: its row says so.

- edgeinf: ``edgeinf.load(path, backend="edgeinf")`` (the engine; its kernels on the CPU's best path).
- LiteRT+XNNPACK: ai-edge-litert with its default XNNPACK delegate (``OpResolverType.AUTO``).
- LiteRT built-in: ai-edge-litert without delegates (its optimized kernels).

At 1 and 2 threads (``num_threads``). Method: 5 warm-up calls each, then the contenders are
timed in turn, a block of --runs calls each, --rounds rounds (A B C A B C ...), so drift on
a shared machine favours none; the median of all calls is reported. Outputs are checked
equal between the engine and LiteRT's reference kernels before timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "engine"))

import edgeinf  # noqa: E402
from edgeinf import zoo  # noqa: E402
from edgeinf.bench import document, write_document  # noqa: E402

THREADS = (1, 2)


def _photo() -> np.ndarray:
    import cv2

    return cv2.imread(str(zoo.path("grace_hopper")))[:, :, ::-1].copy()


def _crops(photo: np.ndarray) -> list[np.ndarray]:
    h, w = photo.shape[:2]
    boxes = [(0, 0, h, w), (h // 8, w // 4, h * 3 // 4, w * 3 // 4), (0, w // 6, h // 2, w * 5 // 6)]
    return [photo[a:c, b:d] for a, b, c, d in boxes]


def _as_input(crop: np.ndarray, size: int, signed: bool) -> np.ndarray:
    import cv2

    x = cv2.resize(crop, (size, size)).astype(np.float32) / 255.0
    return (x * 2 - 1 if signed else x)[None]


def int8_models(workdir: Path) -> dict[str, tuple[Path, np.ndarray]]:
    """label -> (int8 .tflite, float input of the photo) for each real model and quantizer."""
    from engine_models import calibrate_int8, fold_float16_weights

    photo = _photo()
    specs = {
        "face_landmark": (192, False),
        "face_detection_short_range": (128, True),
        "face_detection_full_range": (192, True),
    }
    models = {}
    for name in ("face_landmark", "face_detection_short_range"):
        size, signed = specs[name]
        source = fold_float16_weights(zoo.path(name).read_bytes())
        data = calibrate_int8(source, [_as_input(c, size, signed) for c in _crops(photo)])
        path = workdir / f"{name}_int8.tflite"
        path.write_bytes(data)
        models[f"{name} (TFLite calibrator)"] = (path, _as_input(photo, size, signed))
    try:
        from edgeinf.quantize import int8_path
    except ImportError:  # the quantize extra is not installed: the calibrator's models only
        return models
    for name, (size, signed) in specs.items():
        models[f"{name} (edgeinf quantize)"] = (int8_path(name), _as_input(photo, size, signed))
    return models


def _quantized(model, x: np.ndarray) -> np.ndarray:
    q = model.inputs[0].quantization
    return np.clip(np.round(x / q.scale) + q.zero_point, -128, 127).astype(np.int8)


def _contenders(path: Path, threads: int) -> dict:
    return {
        "edgeinf": edgeinf.load(path, backend="edgeinf", num_threads=threads),
        "litert_xnnpack": edgeinf.load(path, backend="tflite", num_threads=threads),
        "litert_builtin": edgeinf.load(path, backend="tflite", num_threads=threads, xnnpack=False),
    }


def _check_exact(path: Path, model, x: np.ndarray) -> bool:
    with edgeinf.load(path, backend="tflite", num_threads=1, reference=True) as reference:
        want = reference.run(x)
    got = model.run(x)
    return all(np.array_equal(got[k], want[k]) for k in want)


def bench(path: Path, x_float: np.ndarray, threads: int, runs: int, rounds: int) -> dict:
    models = _contenders(path, threads)
    x = _quantized(models["edgeinf"], x_float)
    exact = _check_exact(path, models["edgeinf"], x)
    for model in models.values():
        for _ in range(5):
            model.run(x)
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            for _ in range(runs):
                start = time.perf_counter()
                model.run(x)
                times[name].append(time.perf_counter() - start)
    row = {
        "threads": threads,
        "engine_bit_exact_with_reference": exact,
        "engine_fallback": models["edgeinf"].details.get("fallback"),
    }
    for name, model in models.items():
        details = model.details
        row[name] = {
            "median_ms": statistics.median(times[name]) * 1e3,
            "min_ms": min(times[name]) * 1e3,
            "calls": len(times[name]),
            "runtime": model.runtime,
            "path": details.get("isa") if name == "edgeinf" else (model.delegate or "built-in kernels"),
            "delegate_partitions": details.get("delegate_partitions"),
            "load_peak_rss_bytes": details.get("load_peak_rss_bytes"),
        }
    plan = models["edgeinf"].details.get("plan", {})
    row["edgeinf"]["plan"] = plan
    for other in ("litert_xnnpack", "litert_builtin"):
        row[f"edgeinf_speedup_vs_{other}"] = row[other]["median_ms"] / row["edgeinf"]["median_ms"]
    for model in models.values():
        model.close()
    return row


def _step_shape(step) -> tuple[str, int]:
    """A step's layer shape as text and its multiply-adds (0 for steps without weights)."""
    args = step.args
    if step.method.startswith(("conv2d", "depthwise")):
        _, h, w, c, oh, ow, sh, *_ = args["geometry"]
        o, kh, kw, i = args["weights"].shape
        macs = oh * ow * (o * kh * kw * i if step.method == "conv2d" else kh * kw * i)
        return f"{h}x{w}x{c} -> {oh}x{ow}x{o if step.method == 'conv2d' else i}, {kh}x{kw} /{sh}", macs
    for key in ("shape", "out_shape"):
        if key in args:
            return "x".join(str(d) for d in args[key]), 0
    return (f"{args['n']} values", 0) if "n" in args else ("", 0)


def xnnpack_op_times(data: bytes, threads: int, runs: int) -> list[tuple[str, float]]:
    """(operator, median seconds) of each operator of the main graph cut as a model of its
    own (`edgeinf.engine.cut_model`) and run on LiteRT+XNNPACK: what XNNPACK spends on it,
    plus one invoke's overhead (printed as the smallest time)."""
    from ai_edge_litert.interpreter import Interpreter

    from edgeinf.engine import Segment, cut_model
    from edgeinf.formats.tflite import read_tflite

    sg = read_tflite(data).main
    produced = {t for op in sg.operators for t in op.outputs} | set(sg.inputs)
    rng = np.random.default_rng(0)
    times = []
    for i, op in enumerate(sg.operators):
        inputs = tuple(dict.fromkeys(t for t in op.inputs if t in produced))
        cut = cut_model(data, Segment(False, (i,), inputs, tuple(t for t in op.outputs if t >= 0)))
        interp = Interpreter(model_content=cut, num_threads=threads)
        interp.allocate_tensors()
        for d in interp.get_input_details():
            info = np.iinfo(d["dtype"]) if np.issubdtype(d["dtype"], np.integer) else None
            value = rng.integers(info.min, info.max, d["shape"]) if info else rng.standard_normal(d["shape"])
            interp.set_tensor(d["index"], value.astype(d["dtype"]))
        for _ in range(5):
            interp.invoke()
        calls = []
        for _ in range(runs):
            t0 = time.perf_counter()
            interp.invoke()
            calls.append(time.perf_counter() - t0)
        times.append((op.opcode.name, statistics.median(calls)))
    return times


def profile(models: dict, threads: int, runs: int) -> None:
    """Print the engine's median time per step of each model and, where a step is one
    operator, XNNPACK's time for that operator cut as its own model; then totals per operator."""
    from collections import defaultdict

    from edgeinf.engine import build_program, plan_model
    from edgeinf.formats.tflite import read_tflite

    for name, (path, _) in models.items():
        try:
            plan = plan_model(read_tflite(path))
        except edgeinf.EdgeInfError as exc:
            print(f"{name}: not on the engine ({exc})")
            continue
        times = build_program(plan, threads).profile(runs)
        theirs = xnnpack_op_times(path.read_bytes(), threads, runs)
        # The engine's steps of one operator kind run that kind's operators in graph order;
        # kinds the plan folds into others (PAD into a conv, float chains) are compared in total.
        queues: dict[str, list[float]] = defaultdict(list)
        for op, t in theirs:
            queues[op].append(t)
        kinds: dict[str, int] = defaultdict(int)
        for step in plan.steps:
            kinds[step.op] += 1
        one_to_one = {op for op, n in kinds.items() if n == len(queues.get(op, ()))}
        print(
            f"\n{name}: {len(times)} steps, {sum(times) * 1e3:.2f} ms (sum of per-step medians, {threads} thr); "
            f"XNNPACK {sum(t for _, t in theirs) * 1e3:.2f} ms over {len(theirs)} operators cut one by one "
            f"(fastest {min(t for _, t in theirs) * 1e6:.1f} us)"
        )
        by_op: dict[str, float] = defaultdict(float)
        for step, t in zip(plan.steps, times):
            shape, macs = _step_shape(step)
            rate = f"{macs / t / 1e9:6.1f} GMAC/s" if macs and t > 0 else ""
            beside = ""
            if step.op in one_to_one:
                x = queues[step.op].pop(0)
                beside = f"xnnpack {x * 1e6:7.1f} us ({x / t:4.2f}x)" if t > 0 else ""
            print(f"  {t * 1e6:8.1f} us  {step.op:18s} {shape:32s} {rate:14s} {beside}")
            by_op[step.op] += t
        their_by_op: dict[str, float] = defaultdict(float)
        for op, t in theirs:
            their_by_op[op] += t
        for op in sorted(set(by_op) | set(their_by_op), key=lambda k: -max(by_op[k], their_by_op[k])):
            print(f"  {by_op[op] * 1e3:7.3f} ms  {op:24s} xnnpack {their_by_op[op] * 1e3:7.3f} ms")


def flat_row(row: dict) -> dict:
    """One line of the report table (tools/bench_report.py) from a model's full figures."""
    engine, xnnpack, builtin = row["edgeinf"], row["litert_xnnpack"], row["litert_builtin"]
    return {
        "model": row["model"],
        "threads": row["threads"],
        "engine ms": engine["median_ms"],
        "xnnpack ms": xnnpack["median_ms"],
        "built-in ms": builtin["median_ms"],
        "engine vs xnnpack": row["edgeinf_speedup_vs_litert_xnnpack"],
        "engine vs built-in": row["edgeinf_speedup_vs_litert_builtin"],
        "xnnpack partitions": xnnpack["delegate_partitions"],
        "engine path": engine["path"],
        "bit-exact": row["engine_bit_exact_with_reference"],
        "fallback": row["engine_fallback"],
    }


def main(argv=None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="calls per block")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of blocks")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument(
        "--profile", action="store_true", help="print the engine's time per step, and XNNPACK's per operator, instead"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of --profile")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:
            profile(int8_models(Path(tmp)), args.threads, args.runs * args.rounds)
            return 0
        for name, (path, x) in int8_models(Path(tmp)).items():
            for threads in THREADS:
                row = {"model": name, **bench(path, x, threads, args.runs, args.rounds)}
                rows.append(row)
                print(
                    f"{name:46s} {threads} thr  edgeinf {row['edgeinf']['median_ms']:7.2f} ms  "
                    f"xnnpack {row['litert_xnnpack']['median_ms']:7.2f} ms "
                    f"({row['edgeinf_speedup_vs_litert_xnnpack']:.2f}x)  "
                    f"built-in {row['litert_builtin']['median_ms']:7.2f} ms "
                    f"({row['edgeinf_speedup_vs_litert_builtin']:.2f}x)  exact={row['engine_bit_exact_with_reference']}"
                    + (f"  (engine fell back to LiteRT: {row['engine_fallback']})" if row["engine_fallback"] else "")
                )
    if args.json:
        doc = document(
            "engine",
            "whole int8 models: edgeinf engine vs LiteRT+XNNPACK vs LiteRT built-in (median latency)",
            rows=[flat_row(row) for row in rows],
            runs=rows,  # each contender's figures in full: calls, min, peak RSS, the engine's plan
        )
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
