#!/usr/bin/env bash
# TensorFlow and onnx2tf for `edgeinf convert --to tflite`, in their own venv (.venv-tf):
# onnx2tf pins numpy 1.26, onnx 1.19, onnxruntime 1.23, tensorflow 2.19 and ai-edge-litert 2.1,
# which would break .venv's pins. edgeinf runs onnx2tf with that interpreter when
# EDGEINF_TF_PYTHON names it (export EDGEINF_TF_PYTHON="$PWD/.venv-tf/bin/python").
# Usage: bash tools/install_tf.sh [VENV_DIR]   (PYTHON=python3.11 picks the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${1:-.venv-tf}

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# onnx2tf 1.29.24 pins every dependency it needs (TensorFlow CPU on x86-64 and aarch64
# included); nothing else is installed here.
"$VENV/bin/python" -m pip install -q "onnx2tf==1.29.24"
"$VENV/bin/python" -c "import onnx2tf, tensorflow; print('onnx2tf', onnx2tf.__version__, 'tensorflow', tensorflow.__version__)"
