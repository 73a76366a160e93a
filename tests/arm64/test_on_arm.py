"""Checks that run on an aarch64 Python: a real Pi, or the emulated one the host drives.

On x86_64 these skip; tests/arm64/test_emulated.py and tools/arm64/run_tests.py run them
under qemu on the Pi 3, 4 and 5 profiles, where run-time dispatch must pick NEON on the
Cortex-A53/A72 and NEON with dot product on the A76, and a dot-product instruction
reaching an A53/A72 would kill the run with SIGILL.
"""

from __future__ import annotations

import json
import os
import platform

import numpy as np
import pytest

from edgeinf import board

pytestmark = pytest.mark.skipif(
    platform.machine() != "aarch64", reason=f"aarch64 only; this is {platform.machine()} (see test_emulated.py)"
)

native_isa = pytest.importorskip("edgeinf.isa", reason="native module not built")
import kernel_digests  # noqa: E402  (tests/arm64 is on sys.path: pytest inserts a test's folder)

# What tools/arm64/setup.sh's profiles emulate, and what dispatch must pick there.
PROFILE_CORE = {"pi3": "Cortex-A53", "pi4": "Cortex-A72", "pi5": "Cortex-A76"}
PROFILE_ISA = {"pi3": "neon", "pi4": "neon", "pi5": "neondot"}


def expected_isa(here: board.Board) -> str:
    return "neondot" if here.dotprod else "neon"


def test_aarch64_build_carries_neon_and_neondot_but_not_avx2():
    assert native_isa.built_isas() == ["scalar", "neon", "neondot"]


@pytest.mark.skipif(bool(os.environ.get("EDGEINF_ISA")), reason="EDGEINF_ISA forces the path")
def test_dispatch_picks_the_best_path_this_cpu_has():
    here = board.detect()
    assert native_isa.cpu_features()["neon"]
    assert native_isa.cpu_features()["dotprod"] == here.dotprod, (native_isa.cpu_features(), sorted(here.features))
    assert native_isa.active_isa() == expected_isa(here), here.summary()
    assert native_isa.supported_isas() == (["scalar", "neon", "neondot"] if here.dotprod else ["scalar", "neon"])


def test_native_core_is_the_one_the_board_names():
    """The kernels' core (MIDR_EL1, read natively) agrees with /proc/cpuinfo's, where the
    board has one kind of core that both know."""
    here = board.detect()
    features = native_isa.cpu_features()
    if len(here.cores) != 1 or features["arm_core"] is None:
        pytest.skip(f"cores {here.cores}, native {features['arm_core']}")
    assert features["arm_core"] == here.cores[0].lower(), here.summary()
    assert features["arm_out_of_order"] == (here.cores[0] not in ("Cortex-A53", "Cortex-A55", "Cortex-A35"))


@pytest.mark.skipif("PI" not in os.environ, reason="not on an emulated board profile (PI unset)")
def test_emulated_profile_is_the_board_it_claims():
    profile = os.environ["PI"]
    here = board.detect()
    assert here.emulated
    assert (here.key, here.family, here.cores) == (profile, "raspberry-pi", (PROFILE_CORE[profile],)), here.summary()
    assert native_isa.active_isa() == PROFILE_ISA[profile]
    # the plain NEON GEMM's schedule follows the core: pairs on the in-order A53
    features = native_isa.cpu_features()
    assert (features["arm_core"], features["arm_out_of_order"]) == (PROFILE_CORE[profile].lower(), profile != "pi3")


def test_dot_product_path_is_refused_where_the_cpu_lacks_it():
    if board.detect().dotprod:
        with native_isa.use_isa("neondot"):
            assert native_isa.active_isa() == "neondot"
    else:
        before = native_isa.active_isa()
        with pytest.raises(ValueError, match=r"'neondot' is not usable here \(best available: 'neon'\)"):
            native_isa.set_isa("neondot")
        assert native_isa.active_isa() == before


@pytest.mark.parametrize("name", sorted(kernel_digests.CASES))
def test_every_supported_path_matches_scalar_bit_for_bit(name):
    reference = kernel_digests.as_outputs(kernel_digests.run_case(name, "scalar"))
    for isa in native_isa.supported_isas()[1:]:
        got = kernel_digests.as_outputs(kernel_digests.run_case(name, isa))
        assert len(got) == len(reference)
        for index, (want, have) in enumerate(zip(reference, got)):
            where = kernel_digests.first_difference(want, have) if not np.array_equal(want, have) else ""
            assert not where, f"{name} output {index} on {isa}: {where}"


def test_results_equal_the_x86_results_bit_for_bit():
    reference_file = os.environ.get("EDGEINF_X86_DIGESTS")
    if not reference_file:
        pytest.skip("EDGEINF_X86_DIGESTS not set (tools/arm64/run_tests.py passes the host's digests)")
    with open(reference_file, encoding="utf-8") as f:
        x86 = json.load(f)
    assert x86["machine"] == "x86_64"
    here = kernel_digests.digests()
    assert sorted(here["cases"]) == sorted(x86["cases"]), "the two builds register different kernel cases"
    for name, per_isa in here["cases"].items():
        x86_scalar = x86["cases"][name]["scalar"]
        assert set(x86["cases"][name].values()) == {x86_scalar}, f"{name}: x86 paths disagree: {x86['cases'][name]}"
        for isa, digest in per_isa.items():
            assert digest == x86_scalar, f"{name}: {isa} on aarch64 differs from scalar on x86_64"
