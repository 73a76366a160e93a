"""Frame-to-tensor preprocessing: edgeinf's fused pass against OpenCV, Pillow and numpy.

One run, one thread, contenders interleaved (A B C A B C ...), same input frame, outputs
written into preallocated arrays. Cases:

- 1280x720 BGR -> 224x224 float32 NHWC RGB, normalized with per-channel mean/std
- 1280x720 BGR -> 192x192 int8 NHWC RGB (scale 1/128, zero point 0; mean = std = 127.5)
- 1280x720 NV12 -> 128x128 int8 NHWC RGB (same quantization)

Each contender gets wall-clock statistics and, because these machines are shared and often
oversubscribed, the median CPU time of the calling thread (time spent descheduled is not
counted); ratios are given for both.

The memory-bandwidth floor of a case is the bytes a pass must move (the source rows the
bilinear taps touch, plus the output) at this machine's copy bandwidth, which is measured
in the same run by copying a buffer as large as the frame (same cache level as the
contenders, which re-read the same frame). "Row read" only loads those source rows, in the
pass's order (a native probe, `read_rows_probe` of native_probes.py: no arithmetic, no writes),
timed with the contenders: a lower bound for any pass that reads them, with a resize's
access pattern (a new page every row or two) instead of a copy's.

Usage: PYTHONPATH=. python benchmarks/bench_preprocess.py [--runs 200] [--json out.json]
"""

from __future__ import annotations

import os

# one thread everywhere: no BLAS worker threads spinning on the other core (numpy loads
# OpenBLAS, which starts them at import even though no contender calls it)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import cv2  # noqa: E402
import native_probes  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import edgeinf  # noqa: E402
from edgeinf import isa, zoo  # noqa: E402
from edgeinf.bench import Evictor, document, write_document  # noqa: E402
from edgeinf.preprocess import Pipeline  # noqa: E402
from edgeinf.types import Layout, Quantization, TensorSpec  # noqa: E402

W, H = 1280, 720
MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
Q_SCALE = 1 / 128


def touched_rows(src: int, dst: int) -> np.ndarray:
    """Source rows a half-pixel bilinear resize from src to dst rows reads, in order."""
    pos = (np.arange(dst) + 0.5) * src / dst - 0.5
    y0 = np.clip(np.floor(pos).astype(np.int64), 0, src - 1)
    frac = pos - np.floor(pos)
    y1 = np.where((frac > 0) & (pos > 0) & (y0 < src - 1), y0 + 1, y0)
    return np.union1d(y0, y1)


def int8_lut() -> np.ndarray:
    """pixel -> int8 for mean = std = 127.5, scale 1/128, zero point 0 (same rounding as edgeinf)."""
    levels = np.arange(256, dtype=np.float32)
    q = (levels * np.float32(1 / (127.5 * Q_SCALE)) + np.float32(-127.5 / (127.5 * Q_SCALE))).astype(np.float32)
    return np.clip(np.rint(q), -128, 127).astype(np.int8)


class Case:
    """A frame, its contenders, and the source rows a bilinear pass must read: `planes` is
    a list of (2-D view of a plane's rows, indices of the rows read)."""

    def __init__(self, name, frame, out_shape, out_dtype, planes):
        self.name, self.frame, self.planes = name, frame, planes
        self.out_shape, self.out_dtype = out_shape, np.dtype(out_dtype)
        out_bytes = int(np.prod(out_shape)) * self.out_dtype.itemsize
        self.floor_bytes = sum(len(rows) * plane.shape[1] for plane, rows in planes) + out_bytes
        self.contenders: dict[str, callable] = {}
        self.outputs: dict[str, np.ndarray] = {}

    def add(self, name, fn, out):
        self.contenders[name] = fn
        self.outputs[name] = out

    def add_edgeinf(self, spec: TensorSpec, **options) -> None:
        """edgeinf's fused pass into ``spec``: the first contender, and the reference the
        others' outputs are compared with."""
        pipe = Pipeline.for_input(spec, **options)
        out = pipe.new_output()
        self.add("edgeinf", lambda: pipe(self.frame, out), out)

    def read_rows(self):
        """Only load the rows the pass reads, in its order, with no arithmetic and no writes
        (a native probe): a lower bound for any pass that reads them."""
        read_rows_probe = native_probes.load().read_rows_probe
        for plane, rows in self.planes:
            read_rows_probe(plane, rows)


def bgr_case(rng, size: int, dtype) -> Case:
    """A camera-like BGR frame to a size x size NHWC tensor of ``dtype``."""
    frame = make_bgr(rng)
    return Case(
        f"bgr {W}x{H} -> {size}x{size} {np.dtype(dtype).name} NHWC",
        frame,
        (1, size, size, 3),
        dtype,
        [(frame.reshape(H, W * 3), touched_rows(H, size))],
    )


def opencv_rgb(frame: np.ndarray, size: int):
    """OpenCV's bilinear resize, then BGR -> RGB, into buffers made once: the first steps
    of the OpenCV contenders of the BGR cases. Returns the call, which returns the RGB image."""
    small, rgb = np.empty((size, size, 3), np.uint8), np.empty((size, size, 3), np.uint8)

    def run() -> np.ndarray:
        cv2.resize(frame, (size, size), dst=small, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(small, cv2.COLOR_BGR2RGB, dst=rgb)
        return rgb

    return run


def bgr_f32_case(rng) -> Case:
    size = 224
    case = bgr_case(rng, size, np.float32)
    frame = case.frame
    case.add_edgeinf(
        TensorSpec("x", (1, size, size, 3), np.dtype(np.float32), Layout.NHWC), color="bgr", mean=MEAN, std=STD
    )

    resize_rgb = opencv_rgb(frame, size)
    inv, bias = (1 / STD).astype(np.float32), (-MEAN / STD).astype(np.float32)
    o1 = np.empty(case.out_shape, np.float32)

    def cv_numpy():
        rgb = resize_rgb()
        np.multiply(rgb, inv, out=o1[0])
        np.add(o1[0], bias, out=o1[0])

    case.add("opencv resize+cvtColor+numpy", cv_numpy, o1)
    o2 = np.empty(case.out_shape, np.float32)
    # per-channel scale rows for cv2.multiply must be full size; precompute them
    inv_row = np.ascontiguousarray(np.broadcast_to(np.tile(inv, size), (size, size * 3)))
    bias_row = np.ascontiguousarray(np.broadcast_to(np.tile(bias, size), (size, size * 3)))

    def cv_only_fast():
        rgb = resize_rgb()
        dst = o2[0].reshape(size, size * 3)
        cv2.multiply(rgb.reshape(size, size * 3), inv_row, dst=dst, dtype=cv2.CV_32F)
        cv2.add(dst, bias_row, dst=dst)

    case.add("opencv resize+cvtColor+multiply+add", cv_only_fast, o2)

    params = cv2.dnn.Image2BlobParams()
    params.scalefactor = tuple(float(v) for v in inv) + (0.0,)
    params.size = (size, size)
    params.mean = tuple(float(v) for v in MEAN) + (0.0,)
    params.swapRB = True
    params.ddepth = cv2.CV_32F
    params.datalayout = cv2.DNN_LAYOUT_NHWC
    o3 = np.empty(case.out_shape, np.float32)

    def blob():
        o3[...] = cv2.dnn.blobFromImageWithParams(frame, params)

    case.add("cv2.dnn.blobFromImageWithParams NHWC", blob, o3)
    add_pillow_numpy(case, frame, size, lambda rgb8, out: np.add(np.multiply(rgb8, inv, out=out), bias, out=out))
    add_numpy(case, frame, size, lambda rgb8, out: np.add(np.multiply(rgb8, inv, out=out), bias, out=out))
    return case


def int8_spec(size: int) -> TensorSpec:
    """A size x size RGB int8 input quantized with scale 1/128, zero point 0."""
    return TensorSpec("x", (1, size, size, 3), np.dtype(np.int8), Layout.NHWC, Quantization((Q_SCALE,), (0,)))


def bgr_i8_case(rng) -> Case:
    size = 192
    case = bgr_case(rng, size, np.int8)
    frame = case.frame
    case.add_edgeinf(int8_spec(size), color="bgr", mean=127.5, std=127.5)
    lut = np.ascontiguousarray(np.repeat(int8_lut()[None, :, None], 3, axis=2))
    resize_rgb = opencv_rgb(frame, size)
    o1 = np.empty(case.out_shape, np.int8)

    def cv_lut():
        cv2.LUT(resize_rgb(), lut, dst=o1[0])

    case.add("opencv resize+cvtColor+LUT", cv_lut, o1)
    table = int8_lut()
    add_pillow_numpy(case, frame, size, lambda rgb8, out: np.take(table, rgb8, out=out))
    add_numpy(case, frame, size, lambda rgb8, out: np.take(table, rgb8, out=out))
    return case


def nv12_i8_case(rng) -> Case:
    # a smooth synthetic NV12 frame from a BGR frame through OpenCV's encoder
    bgr = make_bgr(rng)
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    y, u, v = i420[:H], i420[H:].reshape(-1)[: W * H // 4], i420[H:].reshape(-1)[W * H // 4 :]
    frame = np.empty((H * 3 // 2, W), np.uint8)
    frame[:H] = y
    uv = frame[H:].reshape(H // 2, W // 2, 2)
    uv[..., 0], uv[..., 1] = u.reshape(H // 2, W // 2), v.reshape(H // 2, W // 2)
    size = 128
    case = Case(
        "nv12 1280x720 -> 128x128 int8 NHWC",
        frame,
        (1, size, size, 3),
        np.int8,
        # chroma row t // 2 serves luma row t (4:2:0, docs/preprocess.md): 192 chroma rows
        [(frame[:H], touched_rows(H, size)), (frame[H:], np.unique(touched_rows(H, size) // 2))],
    )
    case.add_edgeinf(int8_spec(size), color="nv12", mean=127.5, std=127.5)
    lut = np.ascontiguousarray(np.repeat(int8_lut()[None, :, None], 3, axis=2))
    full, small = np.empty((H, W, 3), np.uint8), np.empty((size, size, 3), np.uint8)
    o1 = np.empty(case.out_shape, np.int8)

    def cv_full():
        cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV12, dst=full)
        cv2.resize(full, (size, size), dst=small, interpolation=cv2.INTER_LINEAR)
        cv2.LUT(small, lut, dst=o1[0])

    case.add("opencv cvtColor+resize+LUT", cv_full, o1)
    small_nv12 = np.empty((size * 3 // 2, size), np.uint8)
    small_y, small_uv = small_nv12[:size], small_nv12[size:].reshape(size // 2, size // 2, 2)
    uv_plane = frame[H:].reshape(H // 2, W // 2, 2)
    o2 = np.empty(case.out_shape, np.int8)

    def cv_planes():
        cv2.resize(frame[:H], (size, size), dst=small_y, interpolation=cv2.INTER_LINEAR)
        cv2.resize(uv_plane, (size // 2, size // 2), dst=small_uv, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(small_nv12, cv2.COLOR_YUV2RGB_NV12, dst=small)
        cv2.LUT(small, lut, dst=o2[0])

    case.add("opencv planes resized, then cvtColor+LUT", cv_planes, o2)
    table = int8_lut()
    o3 = np.empty(case.out_shape, np.int8)
    ys = np.clip(((np.arange(size) + 0.5) * H / size).astype(np.int64), 0, H - 1)
    xs = np.clip(((np.arange(size) + 0.5) * W / size).astype(np.int64), 0, W - 1)
    yuv = np.empty((size, size, 3), np.uint8)
    rgb = np.empty((size, size, 3), np.uint8)

    def pillow_numpy():
        # nearest samples of Y and of the 2x2 chroma block, then Pillow's YCbCr -> RGB
        yuv[..., 0] = frame[:H][np.ix_(ys, xs)]
        c = uv_plane[np.ix_(ys // 2, xs // 2)]
        yuv[..., 1], yuv[..., 2] = c[..., 0], c[..., 1]
        rgb[...] = np.asarray(Image.fromarray(yuv, "YCbCr").convert("RGB"))
        np.take(table, rgb, out=o3[0])

    case.add("pillow+numpy (nearest)", pillow_numpy, o3)
    return case


def make_bgr(rng) -> np.ndarray:
    """A camera-like 1280x720 frame: a real photo upscaled, plus sensor noise."""
    photo = cv2.imread(str(zoo.path("grace_hopper")))
    frame = cv2.resize(photo, (W, H), interpolation=cv2.INTER_CUBIC).astype(np.int16)
    frame += rng.integers(-3, 4, frame.shape, dtype=np.int16)
    return np.clip(frame, 0, 255).astype(np.uint8)


def add_pillow_numpy(case: Case, frame: np.ndarray, size: int, finish) -> None:
    rgb8 = np.empty((size, size, 3), np.uint8)
    out = np.empty(case.out_shape, case.out_dtype)
    src_rgb = np.empty_like(frame)

    def run():
        np.copyto(src_rgb, frame[..., ::-1])
        img = Image.fromarray(src_rgb).resize((size, size), Image.BILINEAR, reducing_gap=None)
        rgb8[...] = np.asarray(img)
        finish(rgb8, out[0])

    case.add("pillow+numpy", run, out)


def add_numpy(case: Case, frame: np.ndarray, size: int, finish) -> None:
    """Pure numpy bilinear (half-pixel centres) with precomputed taps."""
    h, w = frame.shape[:2]

    def taps(src, dst):
        pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
        i0 = np.floor(pos).astype(np.int64)
        i1 = np.minimum(i0 + 1, src - 1)
        return i0, i1, (pos - i0).astype(np.float32)

    y0, y1, fy = taps(h, size)
    x0, x1, fx = taps(w, size)
    fy, fx = fy[:, None, None], fx[None, :, None]
    rgb8 = np.empty((size, size, 3), np.uint8)
    out = np.empty(case.out_shape, case.out_dtype)

    def run():
        top, bot = frame[y0][:, :, ::-1].astype(np.float32), frame[y1][:, :, ::-1].astype(np.float32)
        rows = top + (bot - top) * fy
        a, b = rows[:, x0], rows[:, x1]
        np.rint(a + (b - a) * fx, out=a)
        rgb8[...] = a
        finish(rgb8, out[0])

    case.add("numpy", run, out)


def measure(case: Case, runs: int, copy_fn, block: int, evict: Evictor) -> dict:
    """Round-robin over the contenders, `block` calls each per turn.

    block 1 is "cold": the evictor runs before every timed call, untimed, so each contender
    starts from the same state (a new frame in DRAM, nothing of the pass in cache). Without
    it, each call found what the contender before it left, and that differed per contender:
    edgeinf followed the copy's 2.7 MB of writes, OpenCV followed edgeinf's reads of the same
    frame. A larger block is "warm": its first call is untimed, and the frame, tables and
    outputs stay in cache for the rest.
    """
    names = list(case.contenders)
    fns = [case.contenders[n] for n in names] + [case.read_rows, copy_fn]
    for fn in fns:
        for _ in range(10):
            fn()
    times = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(max(1, runs // block)):
        for i, fn in enumerate(fns):  # interleaved: drift hits every contender alike
            if block > 1:
                fn()
            for _ in range(block):
                if block == 1:
                    evict()
                c0 = time.thread_time_ns()
                t0 = time.perf_counter_ns()
                fn()
                times[i].append(time.perf_counter_ns() - t0)
                cpu[i].append(time.thread_time_ns() - c0)
    stats = {}
    for name, t, c in zip([*names, "row read", "copy"], times, cpu):
        a = np.array(t) / 1e3
        stats[name] = {
            "median_us": float(np.median(a)),
            "p95_us": float(np.percentile(a, 95)),
            "p99_us": float(np.percentile(a, 99)),
            "max_us": float(a.max()),
            "fps": float(1e6 / np.median(a)),
            # CPU time of this thread: on a shared, oversubscribed machine the wall clock
            # also counts time spent descheduled; this does not
            "cpu_median_us": float(np.median(np.array(c) / 1e3)),
        }
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    rng = np.random.default_rng(20261130)
    copy_src = np.ones(W * H * 3, np.uint8)
    copy_dst = np.empty_like(copy_src)

    def copy_fn():
        np.copyto(copy_dst, copy_src)

    evict = Evictor()

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = document(
        "preprocess",
        "1280x720 frame to tensor: edgeinf's fused pass vs OpenCV, Pillow, numpy, the bandwidth floor (1 thread)",
        cpu_isa=isa.active_isa(),
        cpu_features=isa.cpu_features(),
        threads=1,
        cases={},
        rows=[],
    )
    report["versions"].update(opencv=cv2.__version__, pillow=Image.__version__)
    print(
        f"edgeinf {edgeinf.__version__} ({isa.active_isa()}), numpy {np.__version__}, OpenCV {cv2.__version__}, "
        f"Pillow {Image.__version__}; 1 thread; {args.runs} interleaved runs per mode; {report['date']}"
    )
    for make in (bgr_f32_case, bgr_i8_case, nv12_i8_case):
        case = make(rng)
        for mode, block in (("cold", 1), ("warm", 20)):
            result = run_case(case, mode, block, args.runs, copy_fn, copy_src.nbytes, evict)
            report["cases"][f"{case.name} [{mode}]"] = result
            report["rows"] += table_rows(case.name, mode, result)
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report["rss_growth_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    print(f"\npeak RSS {report['peak_rss_mb']:.0f} MB")
    if args.json:
        write_document(report, args.json)
    return 0


def table_rows(name: str, mode: str, result: dict) -> list[dict]:
    """A case's rows of the benchmarks/README.md table: one per contender (the row read
    included), then the floor. "x edgeinf" is the contender's median time over edgeinf's."""
    stats, ours, floor = result["stats"], result["stats"]["edgeinf"]["median_us"], result["floor_us"]
    rows = [
        {"case": name, "mode": mode, "contender": contender, "median_us": st["median_us"], "p95_us": st["p95_us"],
         "cpu_median_us": st["cpu_median_us"], "x_edgeinf": st["median_us"] / ours, "x_floor": st["median_us"] / floor}
        for contender, st in stats.items()
        if contender != "copy"
    ]  # fmt: skip
    rows.append({
        "case": name, "mode": mode, "contender": "bandwidth floor", "median_us": floor, "p95_us": None,
        "cpu_median_us": result["cpu_floor_us"], "x_edgeinf": floor / ours, "x_floor": 1.0,
    })  # fmt: skip
    return rows


def run_case(case: Case, mode: str, block: int, runs: int, copy_fn, copy_bytes: int, evict: Evictor) -> dict:
    stats = measure(case, runs, copy_fn, block, evict)
    copy_bw = 2 * copy_bytes / (stats["copy"]["median_us"] * 1e-6)  # bytes read + written per second
    floor_us = case.floor_bytes / copy_bw * 1e6
    copy_bw_cpu = 2 * copy_bytes / (stats["copy"]["cpu_median_us"] * 1e-6)
    floor_cpu_us = case.floor_bytes / copy_bw_cpu * 1e6
    ours, ours_cpu = stats["edgeinf"]["median_us"], stats["edgeinf"]["cpu_median_us"]
    best_cv = min((v["median_us"], k) for k, v in stats.items() if k.startswith(("opencv", "cv2")))
    best_cv_cpu = min((v["cpu_median_us"], k) for k, v in stats.items() if k.startswith(("opencv", "cv2")))
    print(
        f"\n{case.name} [{mode}]   floor {floor_us:.1f} us ({case.floor_bytes / 1e6:.2f} MB at "
        f"{copy_bw / 1e9:.1f} GB/s copy bandwidth)"
    )
    print(
        f"  {'contender':44s} {'median':>9s} {'p95':>9s} {'p99':>9s} {'max':>9s}  {'x edgeinf':>9s}"
        f" {'cpu med':>9s} {'x edgeinf':>9s}  maxdiff"
    )
    ref = case.outputs["edgeinf"].astype(np.float64)
    for name in case.contenders:
        s = stats[name]
        diff = float(np.abs(case.outputs[name].astype(np.float64) - ref).max())
        s["max_abs_diff_vs_edgeinf"] = diff
        print(
            f"  {name:44s} {s['median_us']:9.1f} {s['p95_us']:9.1f} {s['p99_us']:9.1f} {s['max_us']:9.1f}  "
            f"{s['median_us'] / ours:9.2f} {s['cpu_median_us']:9.1f} {s['cpu_median_us'] / ours_cpu:9.2f}  {diff:.3g}"
        )
    print(
        f"  wall: best OpenCV ({best_cv[1]}) takes {best_cv[0] / ours:.2f}x edgeinf's time; edgeinf is "
        f"{ours / floor_us:.2f}x the bandwidth floor ({floor_us:.1f} us)\n"
        f"  cpu:  best OpenCV ({best_cv_cpu[1]}) takes {best_cv_cpu[0] / ours_cpu:.2f}x edgeinf's time; edgeinf is "
        f"{ours_cpu / floor_cpu_us:.2f}x the bandwidth floor ({floor_cpu_us:.1f} us at {copy_bw_cpu / 1e9:.1f} GB/s)"
    )
    row_read = stats["row read"]["median_us"]
    print(
        f"  row read (loading the {sum(len(r) for _, r in case.planes)} source rows the taps read, nothing else): "
        f"{row_read:.1f} us = {row_read / floor_us:.2f}x the floor; edgeinf takes {ours / row_read:.2f}x it"
    )
    return {
        "stats": stats,
        "floor_us": floor_us,
        "floor_bytes": case.floor_bytes,
        "copy_bandwidth_gbs": copy_bw / 1e9,
        "speedup_vs_best_opencv": best_cv[0] / ours,
        "best_opencv": best_cv[1],
        "edgeinf_over_floor": ours / floor_us,
        "cpu_floor_us": floor_cpu_us,
        "cpu_speedup_vs_best_opencv": best_cv_cpu[0] / ours_cpu,
        "cpu_best_opencv": best_cv_cpu[1],
        "cpu_edgeinf_over_floor": ours_cpu / floor_cpu_us,
        "row_read_us": row_read,
        "row_read_over_floor": row_read / floor_us,
        "edgeinf_over_row_read": ours / row_read,
    }


if __name__ == "__main__":
    raise SystemExit(main())
