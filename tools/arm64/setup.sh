#!/bin/bash
# An emulated Raspberry-Pi-like aarch64 CPython on an x86_64 Debian host, under qemu-user,
# without binfmt_misc and without chroot (adapted from ../shared/arm64/setup.sh).
#
#   tools/arm64/setup.sh            # -> $A/bin/python3 (default A=~/.cache/edgeinf-arm64)
#   PI=pi3 $A/bin/python3 -c 'import platform; print(platform.machine())'
#
# The sysroot comes from the host release's own arm64 packages (Debian 12 bookworm:
# CPython 3.11, the base of Raspberry Pi OS bookworm; Debian 13 trixie: CPython 3.13).
# Needs on the host: qemu-user, gcc, gcc-aarch64-linux-gnu, unzip, a Python with pip
# ($HOSTPY), and the Debian and PyPI registries. Re-running it is cheap: the sysroot is
# kept, the wheels are brought up to date.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
A=${A:-$HOME/.cache/edgeinf-arm64}
PY=${HOSTPY:-python3}
mkdir -p "$A"/{debs,root,bin,wheels,shim/lib/aarch64-linux-gnu,shim/lib/x86_64-linux-gnu,tools}

# 1. arm64 sysroot from the host release's Debian packages (dpkg -x; nothing is installed on
#    the host). The Python packages are named for the release's Python; their libraries are
#    taken from apt's own dependency lists, so renamed ones (trixie's *t64) need no edit here.
. /etc/os-release
case "${VERSION_CODENAME:-}" in
  bookworm) PYVER=${PYVER:-3.11} ;;
  trixie) PYVER=${PYVER:-3.13} ;;
  *) PYVER=${PYVER:-$(apt-cache policy 'python3:arm64' python3 2>/dev/null | sed -nE 's/ *Candidate: 3\.([0-9]+).*/3.\1/p' | head -1)} ;;
esac
if [ ! -x "$A/root/usr/bin/python$PYVER" ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  RUNTIME=("python$PYVER-minimal:arm64" "libpython$PYVER-minimal:arm64" "libpython$PYVER-stdlib:arm64"
           "libpython$PYVER:arm64" "python$PYVER:arm64")
  DEBS=("${RUNTIME[@]}" "libpython$PYVER-dev:arm64" "python$PYVER-venv:arm64" python3-pip-whl
        python3-setuptools-whl libc6:arm64 libtinfo6:arm64 libstdc++6:arm64 libgcc-s1:arm64 libgomp1:arm64)
  for dep in $(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
                 --no-enhances "${RUNTIME[@]}" | awk '/^ *\|?(Pre)?Depends:/ {print $2}' | tr -d '<>' |
                 sed 's/:arm64$//' | sort -u); do
    case $(apt-cache show --no-all-versions "$dep:arm64" 2> /dev/null | sed -n 's/^Architecture: //p') in
      arm64) DEBS+=("$dep:arm64") ;;
      all) DEBS+=("$dep") ;;  # apt-get download refuses "name:arm64" for an arch-independent package
    esac
  done
  mapfile -t DEBS < <(printf '%s\n' "${DEBS[@]}" | sort -u)
  if ! (cd "$A/debs" && apt-get download -q "${DEBS[@]}" 2> "$A/debs/apt.err"); then
    cat "$A/debs/apt.err" >&2
    echo "tools/arm64/setup.sh: could not download the arm64 packages for Python $PYVER (set PYVER?)" >&2
    exit 1
  fi
  for d in "$A"/debs/*.deb; do dpkg -x "$d" "$A/root"; done
fi
# qemu -L only redirects paths that EXIST in the sysroot: shadow the host's x86 dist-packages
mkdir -p "$A/root/usr/lib/python3/dist-packages" "$A/root/usr/local/lib/python$PYVER/dist-packages"

# 2. per-board views of the sysroot with the board's /proc/cpuinfo and device-tree model
#    (qemu 7.2 shows the host's x86 /proc/cpuinfo to aarch64 guests; LiteRT 2.x's CPU
#    detection crashes on it, and edgeinf.board reads both files)
mkprof() { # name part variant revision features model bogomips
  local P="$A/prof/$1" i
  rm -rf "$P"; mkdir -p "$P/proc/device-tree"
  for d in etc lib usr; do ln -s "$A/root/$d" "$P/$d"; done
  : > "$P/proc/cpuinfo"
  for ((i = 0; i < $(nproc); i++)); do
    printf 'processor\t: %d\nBogoMIPS\t: %s\nFeatures\t: %s\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: %s\nCPU part\t: %s\nCPU revision\t: %s\n\n' \
      "$i" "$7" "$5" "$3" "$2" "$4" >> "$P/proc/cpuinfo"
  done
  printf 'Model\t\t: %s\n' "$6" >> "$P/proc/cpuinfo"
  printf '%s\0' "$6" > "$P/proc/device-tree/model"
}
mkprof pi3 0xd03 0x0 4 "fp asimd evtstrm crc32 cpuid" "Raspberry Pi 3 Model B Rev 1.2" 38.40
mkprof pi4 0xd08 0x0 3 "fp asimd evtstrm crc32 cpuid" "Raspberry Pi 4 Model B Rev 1.5" 108.00
mkprof pi5 0xd0b 0x4 1 "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp" \
       "Raspberry Pi 5 Model B Rev 1.0" 108.00

# 3. binfmt_misc substitute: an exec/posix_spawn shim, built for both sides
cp "$HERE/qemu_exec_shim.c" "$A/shim/"
aarch64-linux-gnu-gcc -O2 -shared -fPIC -o "$A/shim/lib/aarch64-linux-gnu/qemu_exec_shim.so" "$A/shim/qemu_exec_shim.c" -ldl
gcc                   -O2 -shared -fPIC -o "$A/shim/lib/x86_64-linux-gnu/qemu_exec_shim.so"  "$A/shim/qemu_exec_shim.c" -ldl

# 4. the interpreter wrapper (this is "python" on the emulated Pi)
cat > "$A/bin/python$PYVER" <<EOF
#!/bin/sh
# aarch64 CPython $PYVER under qemu-user.  PI=pi3|pi4|pi5 (default pi5); QEMU_CPU overrides the core.
PI=\${PI:-pi5}; export PI
case \$PI in pi3) cpu=cortex-a53 ;; pi4) cpu=cortex-a72 ;; pi5) cpu=cortex-a76 ;;
  *) echo "unknown PI=\$PI (expected pi3, pi4 or pi5)" >&2; exit 2 ;; esac
QEMU_CPU=\${QEMU_CPU:-\$cpu}
QEMU_LD_PREFIX=\${QEMU_LD_PREFIX:-$A/prof/\$PI}
export QEMU_CPU QEMU_LD_PREFIX
# \$LIB -> lib/aarch64-linux-gnu in the guest, lib/x86_64-linux-gnu in host programs the guest starts
case ":\${LD_PRELOAD:-}:" in *qemu_exec_shim*) ;; *)
  LD_PRELOAD='$A/shim/\$LIB/qemu_exec_shim.so'\${LD_PRELOAD:+:\$LD_PRELOAD}; export LD_PRELOAD ;; esac
# -0 "\$0": sys.executable is this wrapper, so child interpreters are emulated too
exec qemu-aarch64 -0 "\$0" "\$QEMU_LD_PREFIX/usr/bin/python$PYVER" "\$@"
EOF
chmod +x "$A/bin/python$PYVER"; ln -sf "python$PYVER" "$A/bin/python3"; ln -sf "python$PYVER" "$A/bin/python"

# 5. aarch64 wheels for what the tests import, resolved on the host for the Pi's tags
#    (glibc of the sysroot -> manylinux_2_17 .. 2_N; ai-edge-litert 2.x is tagged 2_27 only)
GLIBC_MINOR=$(ls "$A"/debs/libc6_*_arm64.deb | sed -E 's/.*libc6_2\.([0-9]+).*/\1/' | head -1)
PLAT="--platform manylinux2014_aarch64"
for v in $(seq 17 "$GLIBC_MINOR"); do PLAT+=" --platform manylinux_2_${v}_aarch64"; done
mapfile -t REQS < <($PY "$HERE/guest_requirements.py")
PIPARGS=($PLAT --only-binary=:all: --python-version "$PYVER" --implementation cp)
$PY -m pip download -q -d "$A/wheels" "${PIPARGS[@]}" "${REQS[@]}"
rm -rf "$A/site.new" "$A/site.old"
$PY -m pip install -q --no-warn-conflicts --target "$A/site.new" "${PIPARGS[@]}" --no-index --find-links "$A/wheels" "${REQS[@]}"
# what tools/test.sh installs beside the extras: pnnx's converter binary (--no-deps: its torch
# dependency is not needed to run the binary)
$PY -m pip download -q -d "$A/wheels" "${PIPARGS[@]}" --no-deps "pnnx==20261020"
$PY -m pip install -q --no-warn-conflicts --target "$A/site.new" "${PIPARGS[@]}" --no-index --find-links "$A/wheels" --no-deps "pnnx==20261020"
[ -d "$A/site" ] && mv "$A/site" "$A/site.old"  # swap, so a run using the old site is not broken midway
mv "$A/site.new" "$A/site"; rm -rf "$A/site.old"
# the site is the interpreter's own, as on a board: found without PYTHONPATH (tests that start a
# child with PYTHONPATH=<repo> rely on that)
echo "$A/site" > "$A/root/usr/local/lib/python$PYVER/dist-packages/edgeinf-arm64-site.pth"

# 5b. the tflite-runtime 2.14 environment (it needs numpy<2, so a site of its own, as .venv-legacy
#     on the host) and its interpreter, which drops the main site from PYTHONPATH
LEGACY=("numpy<2" "tflite-runtime==2.14.0" "flatbuffers>=23.5" "pillow>=9")
$PY -m pip download -q -d "$A/wheels-legacy" "${PIPARGS[@]}" "${LEGACY[@]}"
rm -rf "$A/site-legacy.new"
$PY -m pip install -q --no-warn-conflicts --target "$A/site-legacy.new" "${PIPARGS[@]}" --no-index --find-links "$A/wheels-legacy" "${LEGACY[@]}"
rm -rf "$A/site-legacy"; mv "$A/site-legacy.new" "$A/site-legacy"
cat > "$A/bin/python3-legacy" <<LEGACY_EOF
#!/bin/sh
# aarch64 CPython $PYVER with tflite-runtime 2.14 and numpy<2 (EDGEINF_LEGACY_PYTHON on the emulated Pi)
P=""
IFS=:; for d in \${PYTHONPATH:-}; do [ "\$d" = "$A/site" ] || P="\${P:+\$P:}\$d"; done; unset IFS
# -S: no site module, so the main site's .pth (numpy 2) is not read either
PYTHONPATH="\${P:+\$P:}$A/site-legacy" exec "$A/bin/python$PYVER" -S "\$@"
LEGACY_EOF
chmod +x "$A/bin/python3-legacy"
# pybind11's headers for cross-building (arch-independent)
$PY -m pip download -q --no-deps --only-binary=:all: -d "$A/tools" pybind11
rm -rf "$A/tools/pybind11"; unzip -qo "$(ls "$A"/tools/pybind11-*.whl | sort -V | tail -1)" -d "$A/tools/pybind11"

# 6. smoke test on each board
for pi in pi3 pi4 pi5; do
  PI=$pi PYTHONPATH="$A/site" "$A/bin/python3" -c \
    'import os, platform, numpy, ai_edge_litert, ncnn; print("OK", os.environ["PI"], platform.machine(), numpy.__version__)'
done
PI=pi4 PYTHONPATH="$A/site" "$A/bin/python3-legacy" -c \
  'import numpy, tflite_runtime.interpreter; print("OK legacy", numpy.__version__)'
