"""The VPDPBUSD and AMX paths of the int8 GEMM and of the fully connected and convolutions on it.

``avx2vnni`` (AVX-VNNI), ``avx512vnni`` (AVX-512 VNNI) and ``avx512amx`` (AMX-INT8: TDPBUSD
on tiles, fewer than 12 rows on the VNNI tiles) run where the CPU has them and skip, with
the reason, elsewhere. ``avx2-emulated-vnni`` is the same GEMM with VPDPBUSD
emulated exactly by AVX2, so that everything but the one instruction (offset activations,
the bias correction, packing, tiles, row blocks, the epilogue, the dispatch) is tested on
any AVX2 CPU. Each is compared with the scalar path, TFLite's reference loop, bit for bit;
test_qs8_gemm_conv.py compares every path with LiteRT itself.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from qs8_oracle import assert_same, random_scale, random_zero_point

from edgeinf import _C, quant
from edgeinf.isa import built_isas, cpu_features, emulated_isas, supported_isas, use_isa

DOT_PATHS = ["avx2vnni", "avx512vnni", "avx512amx", "avx2-emulated-vnni"]


@pytest.fixture(params=DOT_PATHS)
def dot_path(request) -> str:
    path = request.param
    if path not in supported_isas() + emulated_isas():
        features = {
            k: v for k, v in cpu_features().items() if k in ("avx2", "fma", "avx_vnni", "avx512_vnni", "amx_int8")
        }
        pytest.skip(f"kernel path {path} is not usable on this CPU or build ({features})")
    return path


def _scalar_and(path, layer, x):
    """layer(x) on `path` and on the scalar reference."""
    with use_isa("scalar"):
        want = layer(x)
    with use_isa(path):
        got = layer(x)
    return got, want


def test_the_path_runs_its_own_gemm(dot_path):
    with use_isa(dot_path):
        assert _C._gemm_variant() == dot_path
    with use_isa("scalar"):
        assert _C._gemm_variant() == "scalar"


@pytest.mark.parametrize(
    "m, k, n",
    [(1, 1, 1), (1, 3, 17), (1, 1000, 40), (2, 5, 16), (3, 4, 15), (7, 33, 17), (9, 64, 40), (13, 127, 8),
     (50, 300, 33), (200, 1152, 24),
     (20, 67, 40), (33, 68, 50)],  # AMX: K of 17 quads in two chunks of 9, rows of one tile and a half
)  # fmt: skip
def test_fully_connected_equals_the_reference(dot_path, m, k, n):
    # Odd K (a partial last quad), tails of rows (below the tile height) and of columns
    # (below 16), several row blocks (200 x 1152), per-channel and per-tensor scales,
    # -128 weights and the zero points' edges.
    rng = np.random.default_rng(m * 100000 + k * 100 + n)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    ws = random_scale(rng, 1e-3, 0.05) if n % 2 else np.array([random_scale(rng, 1e-3, 0.05) for _ in range(n)])
    in_scale = random_scale(rng)
    out_scale = float(np.float32(in_scale * float(np.max(ws)) * 74.0 * 74.0 * np.sqrt(k) / 127.0))
    for zero_point in (-128, 127, random_zero_point(rng)):
        fc = quant.FullyConnected(w, bias, input_scale=in_scale, input_zero_point=zero_point, weight_scale=ws,
                                  output_scale=out_scale, output_zero_point=random_zero_point(rng))  # fmt: skip
        x = rng.integers(-128, 128, (m, k), dtype=np.int8)
        got, want = _scalar_and(dot_path, fc, x)
        assert_same(got, want, f"FC m={m} k={k} n={n} zero point {zero_point} on {dot_path}")


def test_extreme_products_do_not_saturate(dot_path):
    # Activations at -128 and 127 (0 and 255 once offset) times weights at -128 and 127:
    # the largest four-product sums VPDPBUSD adds; a saturating step would change them.
    rng = np.random.default_rng(5)
    k, n = 256, 32
    w = rng.choice(np.array([-128, 127], np.int8), (n, k))
    x = rng.choice(np.array([-128, 127], np.int8), (8, k))
    fc = quant.FullyConnected(w, None, input_scale=0.01, input_zero_point=0, weight_scale=0.01,
                              output_scale=0.5, output_zero_point=0)  # fmt: skip
    got, want = _scalar_and(dot_path, fc, x)
    assert len(np.unique(want)) > 10  # the outputs spread: the test sees the sums
    assert_same(got, want, f"extreme FC on {dot_path}")


CONVS = [  # (batch, h, w, in_c, out_c, kh, kw, stride, dilation, padding)
    (1, 16, 16, 24, 40, 1, 1, 1, 1, "valid"),  # narrow pointwise: the AVX2 direct kernel, on every path
    (1, 8, 10, 64, 96, 1, 1, 1, 1, "valid"),  # wider pointwise: the VPDPBUSD GEMM
    (1, 9, 11, 17, 19, 3, 3, 1, 1, "same"),  # odd channels, column tail
    (2, 12, 10, 8, 16, 3, 3, 2, 1, "same"),
    (1, 13, 13, 32, 33, 5, 5, 1, 2, "same"),  # dilation
    (1, 20, 20, 3, 16, 3, 3, 2, 1, "same"),  # few channels: the direct kernel, on AVX2
    (2, 11, 13, 3, 24, 3, 3, 1, 1, "same"),  # few channels: windows padded on every side, two images
    (1, 17, 15, 4, 8, 5, 5, 2, 1, "same"),
    (1, 9, 9, 2, 16, 3, 3, 1, 2, "valid"),  # few channels, dilated: windows copied value by value
    (1, 4, 3, 3, 16, 5, 5, 1, 1, "same"),  # an image smaller than the filter
    (1, 24, 24, 64, 24, 3, 3, 1, 1, "valid"),  # several row blocks of the GEMM
    # the indirect tiles (several taps, channels a multiple of 4):
    (1, 9, 11, 12, 20, 3, 3, 1, 1, "same"),  # an odd count of quads per tap, a partial panel
    (1, 7, 9, 16, 16, 3, 3, 1, 1, "same"),  # one panel of channels, a tail of pixels
    (2, 6, 7, 8, 72, 3, 2, 2, 1, "same"),  # batch, stride, a wide and a partial group of panels
    (1, 8, 8, 24, 40, 2, 2, 1, 1, "same"),  # padding only below and right
    (1, 3, 3, 32, 70, 3, 3, 3, 1, "valid"),  # one output pixel: the few-chain tile
    (1, 2, 3, 8, 24, 5, 5, 1, 1, "same"),  # an image smaller than the filter: most taps left out
    (1, 10, 10, 8, 16, 9, 9, 1, 1, "same"),  # more sets of taps inside than are kept apart
    # AMX: 17 quads per tap (chunks of one quad), runs of 16 and 5 pixels; 18 quads (two
    # chunks of 9) at a stride of 2
    (1, 9, 21, 68, 20, 3, 3, 1, 1, "same"),
    (1, 5, 40, 72, 36, 3, 3, 2, 1, "same"),
]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(str(v) for v in c))
def test_conv2d_equals_the_reference(dot_path, case):
    b, h, w, c, o, kh, kw, stride, dilation, padding = case
    rng = np.random.default_rng(h * 1000 + c * 10 + o)
    weights = rng.integers(-128, 128, (o, kh, kw, c), dtype=np.int8)
    bias = rng.integers(-(2**16), 2**16, o).astype(np.int32)
    ws = np.array([random_scale(rng, 1e-3, 0.05) for _ in range(o)], np.float32)
    in_scale, zero_point = random_scale(rng), random_zero_point(rng)
    out_scale = float(np.float32(in_scale * float(np.max(ws)) * 74.0 * 74.0 * np.sqrt(kh * kw * c) / 127.0))
    conv = quant.Conv2D(weights, bias, stride=stride, padding=padding, dilation=dilation, input_scale=in_scale,
                        input_zero_point=zero_point, weight_scale=ws, output_scale=out_scale,
                        output_zero_point=random_zero_point(rng), activation="relu6")  # fmt: skip
    x = rng.integers(-128, 128, (b, h, w, c), dtype=np.int8)
    got, want = _scalar_and(dot_path, conv, x)
    assert_same(got, want, f"conv {case} on {dot_path}")


@pytest.mark.parametrize("kernel", [1, 3])
def test_conv2d_fixed_point_epilogue_equals_the_reference(dot_path, kernel):
    # Biases of 2^22 leave too many unsaturated accumulators for the float form's fit, so
    # the tiles requantize with TFLite's fixed-point arithmetic; the output scale spreads
    # the results over the whole int8 range, both saturations included.
    rng = np.random.default_rng(kernel)
    c, o = 24, 40
    weights = rng.integers(-128, 128, (o, kernel, kernel, c), dtype=np.int8)
    bias = rng.integers(-(2**22), 2**22, o).astype(np.int32)
    ws = np.array([random_scale(rng, 1e-3, 0.05) for _ in range(o)], np.float32)
    in_scale = random_scale(rng)
    out_scale = float(np.float32(in_scale * float(np.min(ws)) * 2.0**21 / 127.0))
    conv = quant.Conv2D(weights, bias, padding="same", input_scale=in_scale, input_zero_point=random_zero_point(rng),
                        weight_scale=ws, output_scale=out_scale, output_zero_point=0)  # fmt: skip
    assert not conv._op._float_requantization
    x = rng.integers(-128, 128, (1, 12, 12, c), dtype=np.int8)
    got, want = _scalar_and(dot_path, conv, x)
    assert want.min() == -128 and want.max() == 127 and len(np.unique(want)) > 50
    assert_same(got, want, f"fixed-point conv {kernel}x{kernel} on {dot_path}")


# A 1x1 filter runs on the GEMM tiles, a 3x3 one on the indirect tiles.
@pytest.mark.parametrize("kernel, c, seed", [(1, 160, 12), (3, 32, 13)])
def test_conv2d_ties_of_the_guarded_float_form_equal_the_reference(dot_path, kernel, c, seed):
    # A multiplier of exactly 2^-13 (shift -12) leaves 2^21 unsaturated accumulators per
    # channel, beyond the float form's fit; the AVX-512 tiles then requantize in float
    # with a check per vector (avx512vnni.cc). Weights of +-64 and biases of 63 modulo 64
    # put 1 in 128 accumulators on an exact half-integer (x * M + d), where float rounding
    # would differ from TFLite's: those panels must take the fixed-point steps again.
    rng = np.random.default_rng(seed)
    o = 24
    weights = (rng.integers(-1, 2, (o, kernel, kernel, c)) * 64).astype(np.int8)
    bias = (63 + 64 * rng.integers(-(2**10), 2**10, o)).astype(np.int32)
    zero_point = random_zero_point(rng)
    conv = quant.Conv2D(weights, bias, padding="valid", input_scale=1.0, input_zero_point=zero_point,
                        weight_scale=2.0**-6, output_scale=2.0**7, output_zero_point=5)  # fmt: skip
    assert not conv._op._float_requantization
    x = rng.integers(-128, 128, (1, 40, 40, c), dtype=np.int8)
    xs, side = x[0].astype(np.int64) - zero_point, 40 - kernel + 1
    acc = (
        sum(
            xs[ky : ky + side, kx : kx + side].reshape(-1, c) @ weights[:, ky, kx, :].T.astype(np.int64)
            for ky in range(kernel)
            for kx in range(kernel)
        )
        + bias
    )
    ties = np.where(acc >= 0, acc + 1, acc - 1) % 2**13 == 2**12
    assert ties.sum() > 100
    got, want = _scalar_and(dot_path, conv, x)
    assert_same(got, want, f"guarded float form ties, {kernel}x{kernel}, on {dot_path}")


# Instructions beyond AVX2: zmm, ymm/xmm 16-31 and mask registers (AVX-512), masking and
# rounding operands, VPDPBUSD in either encoding, and AMX's tile instructions.
_BEYOND_AVX2 = re.compile(r"%zmm|%[xy]mm(?:1[6-9]|2\d|3[01])\b|%k[0-7]\b|\{%k|\{[rz]|vpdpbusd|%tmm|tilecfg|tilerelease")
# The VNNI GEMM micro-kernels, the AVX-512 depthwise kernel of the avx512vnni path
# (qs8_dwconv2d/avx512vnni.cc, namespace dwconv_zmm): zmm VPMADDWD, 32 channels per step, and
# the other kernels that path runs on AVX-512, each named for it (ADD's linear form, the
# two-line map), the AVX-512 epilogue's ops (ZmmDot) and the AMX GEMM (namespace amx).
_VNNI_KERNEL = re.compile(
    r"dot_(?:indirect_)?tile<.*(?:ZmmDot|avx_vnni_dpbusd)|edgeinf::qs8::dwconv_zmm::|edgeinf::qs8::qs8_dwconv2d__avx512vnni\("
    r"|^edgeinf::(?:qs8|engine)::\w+__avx512\(|(?:^|\s)edgeinf::qs8::(?:\(anonymous namespace\)::ZmmDot<|amx::)"
    r"|^edgeinf::qs8::qs8_\w+__avx512amx\("
)


def _functions_beyond_avx2(library: Path) -> dict[str, list[str]]:
    """Functions of `library` (by demangled name) holding an instruction beyond AVX2."""
    listing = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(library)], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    found: dict[str, list[str]] = {}
    function = ""
    for line in listing.splitlines():
        if line.endswith(">:"):
            function = line[line.index("<") + 1 : -2]
            continue
        parts = line.split("\t")
        if len(parts) >= 2 and ":" in parts[0]:
            instruction = parts[-1].split("<")[0].split("#")[0]
            if _BEYOND_AVX2.search(instruction):
                found.setdefault(function, []).append(instruction.strip())
    return found


@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("objdump") is None, reason="x86-64 with objdump")
def test_only_the_vnni_micro_kernels_hold_instructions_beyond_avx2():
    # The linker keeps one copy of each inline function or template: had a VNNI file
    # instantiated one that other files share, an AVX2-only CPU could run its AVX-512 copy.
    built = [p for p in ("avx2vnni", "avx512vnni") if p in built_isas()]
    if not built:
        pytest.skip("this build has no VNNI path (the compiler lacks -mavxvnni or -mavx512vnni)")
    found = _functions_beyond_avx2(Path(_C.__file__))
    outside = {f: lines[:2] for f, lines in found.items() if not _VNNI_KERNEL.search(f)}
    assert not outside, f"instructions beyond AVX2 outside the VNNI micro-kernels: {outside}"
    # and the VNNI files were compiled with their flags: their kernels use VPDPBUSD (in some
    # function of theirs: a less optimized build, as the sanitizers', keeps helpers out of line)
    dot = {"avx2vnni": "avx_vnni_dpbusd", "avx512vnni": "ZmmDot"}
    for path in built:
        kernels = [lines for f, lines in found.items() if dot[path] in f]
        assert any(any("vpdpbusd" in i for i in lines) for lines in kernels), path
    if "avx512vnni" in built:
        depthwise = [lines for f, lines in found.items() if "dwconv_zmm::" in f]
        assert depthwise and any(any("%zmm" in i for i in lines) for lines in depthwise)
    if "avx512amx" in built_isas():  # the AMX file was compiled with its flags: TDPBUSD on tiles
        tiles = [lines for f, lines in found.items() if "qs8::amx::" in f]
        assert any(any(i.startswith("tdpbusd") for i in lines) for lines in tiles)
