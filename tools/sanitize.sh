#!/usr/bin/env bash
# Builds edgeinf._C with AddressSanitizer and UndefinedBehaviorSanitizer in a scratch copy of
# the tree (the normal in-place build is left alone) and runs the kernel and binding tests
# against it. Any sanitizer report, a test failure or the time budget running out fails.
#
#   tools/sanitize.sh                      # tests/kernels and tests/engine
#   tools/sanitize.sh tests/kernels/test_quant.py -k softmax
#
# Environment: PYTHON (default python3, with the test dependencies and pybind11), CXX
# (default g++), JOBS (parallel compiles, default nproc), EDGEINF_SANITIZE_BUDGET (seconds
# for build and tests together, default 2400).
# -O1 keeps the instrumented tests fast enough; CPython leaks by design, so leak checking is
# off. The Python interpreter is not instrumented: libasan is preloaded into it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
CXX=${CXX:-g++}
BUDGET=${EDGEINF_SANITIZE_BUDGET:-2400}
START=$(date +%s)
remaining() { echo $((BUDGET - ($(date +%s) - START))); }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/edgeinf-sanitize.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tree"

# The tree as git sees it (tracked and new files), without build products.
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$ROOT" && tar --null -T - -cf -) | tar -C "$WORK/tree" -xf -

# Every compile and link gets the sanitizer flags last, so that -O1 wins over setup.py's -O3.
# UNOPTIMIZED: sources whose instrumented -O1 build takes GCC 12 more than half an hour (fully
# unrolled AVX2 templates), and the pybind11 bindings, whose instrumented templates took two
# thirds of the -O1 build's compile time. At -O0 the AVX2 templates build in seconds and the
# bindings in about half the time, both sanitizers on, so every access is still checked.
SAN_FLAGS="-O1 -g0 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
UNOPTIMIZED_FLAGS="-O0 -g0 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
UNOPTIMIZED='csrc/kernels/qs8_dwconv2d/avx2.cc|csrc/kernels/qs8_dwconv2d/avx512vnni.cc|csrc/bindings/*.cc'
cat >"$WORK/cxx" <<WRAP
#!/bin/sh
for arg in "\$@"; do
  case "\$arg" in $UNOPTIMIZED) exec $CXX "\$@" $UNOPTIMIZED_FLAGS ;; esac
done
exec $CXX "\$@" $SAN_FLAGS
WRAP
chmod +x "$WORK/cxx"

# setuptools compiles the sources of one extension one after another: pybind11's
# ParallelCompile spreads them over the cores (JOBS, default: all).
JOBS=${JOBS:-$(nproc)}
echo "== sanitize: building edgeinf._C (ASan + UBSan, -O1, $JOBS jobs) in $WORK/tree"
(cd "$WORK/tree" && CC="$WORK/cxx" CXX="$WORK/cxx" LDSHARED="$WORK/cxx -shared" \
  timeout "$(remaining)" "$PYTHON" -c "
import runpy, sys
from pybind11.setup_helpers import ParallelCompile
ParallelCompile(default=$JOBS).install()
sys.argv = ['setup.py', '-q', 'build_ext', '--inplace']
runpy.run_path('setup.py', run_name='__main__')
" >"$WORK/build.log" 2>&1) || {
  tail -40 "$WORK/build.log"
  echo "== sanitize: build FAILED (or out of time) after $(($(date +%s) - START)) s"
  exit 1
}
SO=$(ls "$WORK"/tree/edgeinf/_C*.so)
SYMBOLS=$(nm -D "$SO")  # read whole: `grep -q` on a pipe would stop nm early, and pipefail fail it
if ! grep -q __asan_report <<<"$SYMBOLS" || ! grep -q __ubsan_handle <<<"$SYMBOLS"; then
  echo "== sanitize: FAILED: $SO is not instrumented (was the compiler wrapper used?)"
  exit 1
fi
echo "== sanitize: built in $(($(date +%s) - START)) s"

# libasan must come first; libstdc++ too, or ASan's __cxa_throw interceptor finds no
# real function (the interpreter does not link libstdc++) and the first C++ exception aborts.
PRELOAD="$("$CXX" -print-file-name=libasan.so) $("$CXX" -print-file-name=libstdc++.so)"
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(tests/kernels tests/engine)
set +e
(cd "$WORK/tree" &&
  LD_PRELOAD="$PRELOAD" \
    ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1:detect_odr_violation=0" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    PYTHONPATH="$WORK/tree" PYTHONDONTWRITEBYTECODE=1 \
    timeout "$(remaining)" "$PYTHON" -m pytest -q -x -p no:cacheprovider "${TESTS[@]}") 2>&1 | tee "$WORK/test.log"
status=${PIPESTATUS[0]}
set -e
if grep -qE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$WORK/test.log"; then
  echo "== sanitize: FAILED: sanitizer report above"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "== sanitize: FAILED: tests exited with $status after $(($(date +%s) - START)) s"
  exit 1
fi
echo "== sanitize: ok in $(($(date +%s) - START)) s"
