#!/usr/bin/env python3
"""Cross-build edgeinf._C for aarch64 with setup.py and stage an importable copy of the package.

    python tools/arm64/cross_build.py [--build build/arm64]
    -> build/arm64/lib/edgeinf/_C.cpython-311-aarch64-linux-gnu.so, objects in build/arm64/obj,
       and build/arm64/stage/ (package + tests + the aarch64 .so) for PYTHONPATH on the Pi.

What it runs, for doing it by hand (A = the emulated Python of tools/arm64/setup.sh)::

    CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LDSHARED="aarch64-linux-gnu-g++ -shared" \\
    SETUPTOOLS_EXT_SUFFIX=.cpython-311-aarch64-linux-gnu.so \\
    python setup.py build_ext --build-lib build/arm64/lib --build-temp build/arm64/obj \\
        --include-dirs $A/root/usr/include/python3.11:$A/root/usr/include
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=emulated.DEFAULT_HOME, help="the emulated Python ($A of setup.sh)")
    parser.add_argument("--build", type=Path, default=emulated.DEFAULT_BUILD, help="output folder")
    args = parser.parse_args(argv)
    emulator = emulated.Emulator(args.home)
    try:
        so, objects = emulated.cross_build(emulator, out=args.build, log=True)
    except emulated.EmulationUnavailable as exc:
        print(f"cross_build: {exc}", file=sys.stderr)
        return 2
    stage = emulated.stage(so, args.build / "stage")
    print(f"{so}\n{stage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
