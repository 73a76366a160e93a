"""pytest plugin for test runs on the emulated Pi (``-p edgeinf_emulation``; copied into the stage).

Under qemu, Python runs several times slower and vector code hundreds of times slower
than on a board, so time limits written for native runs do not apply: hypothesis'
per-example deadline is lifted and its default example count lowered (tests that set
their own ``max_examples`` keep it). The report header names the board profile and the
kernel path, and says that no timing from this run describes ARM performance.
"""

from __future__ import annotations

import os

EMULATED_EXAMPLES = int(os.environ.get("EDGEINF_EMULATION_EXAMPLES", "30"))


def pytest_configure(config):
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    settings.register_profile(
        "edgeinf-emulated",
        deadline=None,
        max_examples=EMULATED_EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("edgeinf-emulated")


def pytest_report_header(config):
    lines = []
    try:
        from edgeinf import board

        lines.append(f"board: {board.detect().summary()}")
    except Exception as exc:  # the header must never stop the run
        lines.append(f"board: unknown ({exc})")
    try:
        from edgeinf import isa

        lines.append(f"kernel path: {isa.active_isa()} (supported: {', '.join(isa.supported_isas())})")
    except Exception as exc:
        lines.append(f"kernel path: native module not importable ({exc})")
    lines.append("emulated (qemu-user): correctness only; no timing from this run describes ARM performance")
    return lines
