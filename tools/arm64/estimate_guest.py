"""The emulated side of tools/arm64/estimate.py: run each contender once per phase.

Runs in the emulated Pi Python (with the stage on PYTHONPATH) under qemu with the
instruction-count plugin (insn_count_plugin.c). Every measured call sits between two marks,
lseek(/dev/null, MARK | phase, 0), which the plugin turns into one block of per-address
counts; each call is made once before, untimed and uncounted, so one-time work (XNNPACK's
weight packing, the engine's planning, first-touch page faults) is not counted. The last
phase is an empty call: what the marks and the call of a lambda add to every phase.

    python3 estimate_guest.py SPEC.json OUT.json

SPEC: {"kernels": [names of bench_int8/bench_preprocess cases], "models": {label: path},
"isas": [edgeinf paths to run]}. OUT: the phases (id -> what ran) and the executable mappings
of the process, so the host can attribute addresses to libraries.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

STAGE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(STAGE / "benchmarks"))

MARK = 0x45444745 << 32  # the plugin's marker, "EDGE" in the high word
MARK_FD = os.open(os.devnull, os.O_RDONLY)  # /dev/null takes any offset: no error to raise
HARNESS = "harness"  # the contender of the empty call


def mark(phase: int) -> None:
    os.lseek(MARK_FD, MARK | phase, os.SEEK_SET)


def kernel_cases(names: list[str]) -> list[tuple[str, int, dict]]:
    """(name, multiply-adds, {contender: call}) for the wanted bench_int8 / bench_preprocess cases."""
    if all(n == "gemm64" or n.startswith("pre_") for n in names):
        return [_small_gemm() if n == "gemm64" else _preprocess_case(n) for n in names]
    import bench_int8

    bench_int8._ort_matmul_integer = lambda *a, **k: None  # ONNX Runtime is not estimated
    bench_int8._ort_qlinear_conv = lambda *a, **k: None
    rng = np.random.default_rng(2026)
    makers = {
        "gemm256": lambda: bench_int8.fc_case(rng, "GEMM 256x256x256", 256, 256, 256, with_ort=False),
        "fc1024": lambda: bench_int8.fc_case(rng, "FC 1024->1000, batch 1", 1, 1024, 1000, with_ort=False),
        "conv1x1_28": lambda: bench_int8.conv_case(rng, "conv 1x1 28x28 128->128", 28, 128, 128, 1, 1),
        "conv1x1_14": lambda: bench_int8.conv_case(rng, "conv 1x1 14x14 512->512", 14, 512, 512, 1, 1),
        "conv3x3_28": lambda: bench_int8.conv_case(rng, "conv 3x3 28x28 64->64", 28, 64, 64, 3, 1),
        "stem": lambda: bench_int8.conv_case(rng, "conv 3x3/2 224x224 3->32 (stem)", 224, 3, 32, 3, 2),
        "dw56": lambda: bench_int8.conv_case(rng, "depthwise 3x3 56x56x128", 56, 128, 128, 3, 1, depthwise=True),
        "dw28s2": lambda: bench_int8.conv_case(rng, "depthwise 3x3/2 28x28x256", 28, 256, 256, 3, 2, depthwise=True),
    }
    cases = []
    for name in names:
        if name == "gemm64":  # the tool's own test: edgeinf alone, no LiteRT to load under emulation
            cases.append(_small_gemm())
        elif name in makers:
            case = makers[name]()
            calls = {k: case.contenders[k][0] for k in ("edgeinf", "XNNPACK")}
            cases.append((name, case.name, case.macs, calls))
        elif name.startswith("pre_"):
            cases.append(_preprocess_case(name))
        else:
            raise SystemExit(f"unknown case {name!r}")
    return cases


def _small_gemm():
    from edgeinf import quant

    rng = np.random.default_rng(2026)
    x = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    fc = quant.FullyConnected(rng.integers(-127, 128, (64, 64), dtype=np.int8), np.zeros(64, np.int32),
                              input_scale=0.02, input_zero_point=-3, weight_scale=0.005, output_scale=0.05,
                              output_zero_point=5)  # fmt: skip
    out = np.empty((64, 64), np.int8)
    return "gemm64", "GEMM 64x64x64", 64**3, {"edgeinf": lambda: fc(x, out=out)}


def _preprocess_case(name: str):
    import bench_preprocess

    rng = np.random.default_rng(2026)
    maker = {"pre_bgr_f32": bench_preprocess.bgr_f32_case, "pre_bgr_i8": bench_preprocess.bgr_i8_case,
             "pre_nv12_i8": bench_preprocess.nv12_i8_case}[name]  # fmt: skip
    case = maker(rng)
    return name, case.name, 0, dict(case.contenders)


def model_cases(models: dict[str, str]) -> list[tuple[str, str, int, dict]]:
    import edgeinf

    cases = []
    for label, path in models.items():
        engine = edgeinf.load(path, backend="edgeinf", num_threads=1)
        litert = edgeinf.load(path, backend="tflite", num_threads=1)
        spec = engine.inputs[0]
        x = np.random.default_rng(2026).integers(-128, 128, spec.shape, dtype=np.int8)
        fallback = engine.details.get("fallback")
        calls = {"edgeinf": lambda m=engine, x=x: m.run(x), "XNNPACK": lambda m=litert, x=x: m.run(x)}
        cases.append((label, f"{label} (engine{', falls back: ' + str(fallback) if fallback else ''})", 0, calls))
    return cases


def executable_mappings() -> list[dict]:
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and "x" in parts[1]:
                start, end = (int(v, 16) for v in parts[0].split("-"))
                found.append({"start": start, "end": end, "offset": int(parts[2], 16), "path": parts[5]})
    return found


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    from edgeinf import kernels

    phases = []
    cases = kernel_cases(spec["kernels"]) + model_cases(spec["models"])
    cases.append(("(empty call)", "an empty call between the marks", 0, {HARNESS: lambda: None}))
    for key, title, macs, calls in cases:
        for contender, call in calls.items():
            isas = spec["isas"] if contender == "edgeinf" else [None]
            for isa in isas:
                with kernels.use_isa(isa) if isa else contextlib.nullcontext():
                    call()  # one-time work outside the count
                    phases.append({"id": len(phases) + 1, "case": key, "title": title, "macs": macs,
                                   "contender": contender, "isa": isa})  # fmt: skip
                    mark(len(phases))
                    call()
                    mark(0)
    out = {"phases": phases, "mappings": executable_mappings(), "active_isa": kernels.active_isa()}
    Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
