#!/usr/bin/env bash
# C++ checks of csrc/ and benchmarks/probes/: clang-format (the repo's .clang-format, no
# change allowed) and clang-tidy with a small set of checks that find real bugs in this
# code (misuse of memory functions, narrowing and widening mistakes, use after move,
# copies in loops), each file compiled as setup.py compiles it: avx2 files with their ISA
# flags on x86-64, neon files on aarch64 only (the other target's files are skipped).
# clang-tidy skips the pybind11 bindings (csrc/bindings/, benchmarks/probes/module.cc):
# parsing pybind11 costs about 25 s of CPU per file, which would double the check's time;
# the compiler's -Wall and tools/sanitize.sh cover them.
#
#   tools/check_cpp.sh              # both checks
#   tools/check_cpp.sh format       # clang-format only (fast)
#   tools/check_cpp.sh tidy         # clang-tidy only
#
# Environment: CLANG_FORMAT, CLANG_TIDY (default clang-format, clang-tidy; Debian 12's 14.x
# is what the repo is formatted with), JOBS (parallel clang-tidy runs, default nproc),
# EDGEINF_CHECK_CPP_BUDGET (seconds for clang-tidy, default 120).
# To format the whole tree: clang-format -i $(git ls-files 'csrc/*.cc' 'csrc/*.h' 'benchmarks/probes/*')
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy}
JOBS=${JOBS:-$(nproc)}
BUDGET=${EDGEINF_CHECK_CPP_BUDGET:-120}
WHAT=${1:-all}

mapfile -t FILES < <(git ls-files --cached --others --exclude-standard 'csrc/*.cc' 'csrc/*.h' 'benchmarks/probes/*.cc' \
  'benchmarks/probes/*.h')

status=0
if [[ $WHAT == all || $WHAT == format ]]; then
  echo "== clang-format ($("$CLANG_FORMAT" --version | grep -o '[0-9][0-9.]*' | head -1)): ${#FILES[@]} files"
  "$CLANG_FORMAT" --dry-run -Werror "${FILES[@]}" || status=1
fi

if [[ $WHAT == all || $WHAT == tidy ]]; then
  CHECKS=$(
    IFS=,
    checks=(
      -*
      bugprone-argument-comment
      bugprone-bool-pointer-implicit-conversion
      bugprone-dangling-handle
      bugprone-fold-init-type
      bugprone-inaccurate-erase
      bugprone-incorrect-roundings
      bugprone-integer-division
      bugprone-misplaced-operator-in-strlen-in-alloc
      bugprone-misplaced-widening-cast
      bugprone-move-forwarding-reference
      bugprone-multiple-statement-macro
      bugprone-sizeof-expression
      bugprone-string-constructor
      bugprone-suspicious-memset-usage
      bugprone-suspicious-string-compare
      bugprone-swapped-arguments
      bugprone-undefined-memory-manipulation
      bugprone-unused-return-value
      bugprone-use-after-move
      misc-redundant-expression
      performance-for-range-copy
      performance-inefficient-vector-operation
      performance-move-const-arg
      performance-unnecessary-copy-initialization
      readability-misleading-indentation
    )
    echo "${checks[*]}"
  )
  case $(uname -m) in
    x86_64 | amd64)
      BUILT=avx2 SKIP='neon|neondot'
      DEFINES="-DEDGEINF_BUILD_AVX2=1 -DEDGEINF_BUILD_AVX2VNNI=1 -DEDGEINF_BUILD_AVX512VNNI=1"
      ;;
    aarch64 | arm64) BUILT=neon SKIP='avx2|avx2vnni|avx512vnni' DEFINES="-DEDGEINF_BUILD_NEON=1 -DEDGEINF_BUILD_NEONDOT=1" ;;
    *) BUILT=none SKIP='avx2|avx2vnni|avx512vnni|neon|neondot' DEFINES="" ;;
  esac
  SOURCES=()
  for f in "${FILES[@]}"; do
    [[ $f == *.cc ]] || continue
    stem=$(basename "$f" .cc)
    [[ $stem =~ (^|__)($SKIP)$ ]] && continue
    [[ $f == csrc/bindings/* || $f == benchmarks/probes/module.cc ]] && continue
    SOURCES+=("$f")
  done
  echo "== clang-tidy ($("$CLANG_TIDY" --version | grep -o '[0-9][0-9.]*' | head -1)): ${#SOURCES[@]} files built for $(uname -m), $JOBS jobs"
  tidy_one() {
    local f=$1 stem isa_flags=""
    stem=$(basename "$f" .cc)
    case $stem in
      avx2 | *__avx2) isa_flags="-mavx2 -mfma -mf16c" ;;
      avx2vnni | *__avx2vnni) isa_flags="-mavx2 -mfma -mf16c -mavxvnni" ;;
      avx512vnni | *__avx512vnni) isa_flags="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vnni" ;;
      neondot | *__neondot) isa_flags="-march=armv8.2-a+dotprod" ;;
    esac
    "$CLANG_TIDY" --quiet --checks="$CHECKS" --warnings-as-errors='*' "$f" -- \
      -std=c++17 -xc++ -Icsrc -Ibenchmarks/probes $DEFINES $isa_flags 2>/dev/null
  }
  export -f tidy_one
  export CHECKS CLANG_TIDY DEFINES
  if ! timeout "$BUDGET" bash -c 'printf "%s\0" "$@" | xargs -0 -n1 -P'"$JOBS"' bash -c '"'"'tidy_one "$0"'"'"'' _ "${SOURCES[@]}"; then
    echo "clang-tidy found problems (above) or ran past its budget of ${BUDGET}s" >&2
    status=1
  fi
fi
exit $status
