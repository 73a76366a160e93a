#!/bin/bash
# CI entry for the emulated Raspberry Pi run (called by .ci/run):
#     tools/arm64/ci.sh /path/to/venv/bin/python
# Installs the host packages it needs, builds the emulated aarch64 Python (tools/arm64/setup.sh,
# cached in ~/.cache/edgeinf-arm64), makes sure the x86 extension is built (the reference for the
# bit-exactness check), runs the host-side checks of tests/arm64/test_emulated.py and the
# estimate tools' tests, then cross-builds and runs the CI subset on the Pi 3, 4 and 5
# profiles (docs/arm64.md).
# The pytest runs go one per core (--jobs). Extra arguments go to run_tests.py (e.g.
# --subset full).
set -euo pipefail
PY=${1:-python3}
shift || true
cd "$(dirname "$0")/../.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
NEED=(qemu-user gcc g++-aarch64-linux-gnu binutils-aarch64-linux-gnu unzip llvm)  # llvm: llvm-mc, llvm-mca
MISSING=()
for pkg in "${NEED[@]}"; do dpkg -s "$pkg" > /dev/null 2>&1 || MISSING+=("$pkg"); done
if [ ${#MISSING[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${MISSING[@]}"
fi
# setup.sh adds the arm64 architecture to dpkg and downloads (never installs) arm64 packages
if [ -z "$SUDO" ]; then HOSTPY="$PY" tools/arm64/setup.sh; else sudo HOSTPY="$PY" HOME="$HOME" tools/arm64/setup.sh; fi
"$PY" setup.py -q build_ext --inplace
# host-side checks: objects free of Armv8.2+ instructions outside neondot files, SIGILL on the
# pi3/pi4 profiles, dispatch per profile (the guest suite itself runs below)
"$PY" -m pytest -q -p no:cacheprovider tests/arm64/test_emulated.py tests/arm64/test_bounds.py tests/arm64/test_estimate.py \
  -m "not slow" -k "not test_arm_checks_pass_on_each_profile"
exec "$PY" tools/arm64/run_tests.py --subset ci --jobs "$(nproc)" "$@"
