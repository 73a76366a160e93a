"""ESTIMATES of edgeinf vs XNNPACK on Cortex-A53/A72/A76 (Pi 3/4/5), from instructions counted under qemu.

    python benchmarks/bench_arm_estimate.py [--quick] [--json benchmarks/results/arm_estimate.json]

Not a measurement: tools/arm64/estimate.py (the method, its models and its limits are in its
docstring) runs the int8 kernel shapes of bench_int8, the preprocessing cases of
bench_preprocess and the int8 face models once each on the emulated Pi 3, 4 and 5
(tools/arm64/setup.sh), counts the executed instructions with a qemu plugin and turns them
into cycles per core. Needs qemu-user, gcc, the aarch64 cross compiler and llvm (llvm-mca).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "arm64"))

import estimate  # noqa: E402

if __name__ == "__main__":
    sys.exit(estimate.main())
