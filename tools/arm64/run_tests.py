#!/usr/bin/env python3
"""Run the test suite on the emulated Raspberry Pi 3, 4 and 5 (aarch64 CPython under qemu).

    python tools/arm64/run_tests.py                    # CI subset on pi3, pi4, pi5
    python tools/arm64/run_tests.py --subset full      # every test but `slow` on each profile
    python tools/arm64/run_tests.py --profiles pi5 -- -k board   # extra pytest arguments after --
    python tools/arm64/run_tests.py --profiles pi3 -- tests/kernels/test_quant.py   # paths replace the subset's

Steps: fetch the manifest's models on the host (the emulated Python has no pip), cross-build
the extension with setup.py into build/arm64/, stage a copy of the package with the aarch64
.so, compute the host's kernel digests (x86 reference), then per profile run pytest with
``-m "not slow"`` (benchmarks are outside tests/ and never collected) in the emulated Python,
and on the Pi 5 `edgeinf check` and `edgeinf demo` when the CLI has them. Needs the host's
own build in place (``python setup.py build_ext --inplace``) for the x86 digests.

Wall times printed here are how long the emulation took, nothing about ARM speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated  # noqa: E402

log = logging.getLogger("arm64")


def prefetch_models() -> dict[str, Path]:
    sys.path.insert(0, str(emulated.REPO))
    from edgeinf import zoo

    return zoo.fetch_all()


def pytest_paths(subset: str, profile: str, stage: Path) -> list[str]:
    if subset == "full":
        paths = ["tests"]
    elif subset == "arm":
        paths = ["tests/arm64", "tests/board"]
    else:
        paths = list(emulated.CI_PATHS[profile])
    return [p for p in paths if (stage / p).exists()]


def run_pytest(emulator, profile: str, stage: Path, paths: list[str], digests: Path, extra: list[str]) -> bool:
    started = time.monotonic()
    proc = emulator.run(
        ["-m", "pytest", *emulated.PYTEST_ARGS, *paths, *extra],
        profile=profile,
        cwd=stage,
        pythonpath=[stage],
        extra_env={"EDGEINF_X86_DIGESTS": str(digests)},
        capture=False,
    )
    log.info(
        "%s: pytest %s -> exit %d (%.0f s under qemu)",
        profile,
        " ".join(paths),
        proc.returncode,
        time.monotonic() - started,
    )
    if proc.returncode < 0:
        log.error("%s: pytest was killed by signal %d", profile, -proc.returncode)
    return proc.returncode == 0


def run_cli(emulator, profile: str, stage: Path, args: list[str]) -> bool:
    code = "import sys; from edgeinf.cli import main; sys.exit(main())"
    proc = emulator.run(["-c", code, *args], profile=profile, cwd=stage, pythonpath=[stage], capture=True)
    output = (proc.stdout + proc.stderr).strip()
    log.info("%s: edgeinf %s -> exit %d\n%s", profile, " ".join(args), proc.returncode, output[-3000:])
    return proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default=",".join(emulated.PROFILES), help="comma separated: pi3,pi4,pi5")
    parser.add_argument(
        "--subset",
        choices=("ci", "full", "arm"),
        default="ci",
        help="ci: the suite but the file fuzzers on pi5, kernel-running tests on pi3/pi4; "
        "full: the whole (non-slow) suite everywhere; "
        "arm: tests/arm64 and tests/board only",
    )
    parser.add_argument("--home", type=Path, default=emulated.DEFAULT_HOME, help="the emulated Python ($A of setup.sh)")
    parser.add_argument("--build", type=Path, default=emulated.DEFAULT_BUILD, help="cross-build folder")
    parser.add_argument("--no-cli", action="store_true", help="skip `edgeinf check`/`demo` on pi5")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[arm64] %(message)s")

    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    unknown = sorted(set(profiles) - set(emulated.PROFILES))
    if unknown:
        parser.error(f"unknown profile(s) {unknown}: expected {', '.join(emulated.PROFILES)}")
    emulator = emulated.Emulator(args.home)
    reason = emulator.missing()
    if reason:
        log.error("%s", reason)
        return 2

    stale = emulator.missing_requirements()
    if stale:
        log.error(
            "the emulated Python lacks %s (pyproject.toml changed): re-run tools/arm64/setup.sh", ", ".join(stale)
        )
        return 2
    models = prefetch_models()
    log.info("models cached on the host: %s", ", ".join(sorted(models)))
    so, _ = emulated.cross_build(emulator, out=args.build)
    log.info("cross-built %s", so)
    stage = emulated.stage(so, args.build / "stage")
    digests = args.build / "x86_digests.json"
    digests.write_text(json.dumps(emulated.host_digests(), indent=1))
    log.info("x86 kernel digests: %s", digests)

    results: dict[str, bool] = {}
    for profile in profiles:
        # test paths after -- replace the subset's, so one module can be run on its own
        named = any(a.split("::")[0].startswith("tests") for a in args.pytest_args)
        paths = [] if named else pytest_paths(args.subset, profile, stage)
        extra = list(emulated.CI_PYTEST_ARGS[profile]) if args.subset == "ci" else []
        results[f"{profile} pytest"] = run_pytest(emulator, profile, stage, paths, digests, extra + args.pytest_args)
    commands = emulated.cli_commands(stage)
    log.info("CLI on the emulated Pi 5: any time these commands print is qemu's, not a Raspberry Pi's")
    if "pi5" in profiles and not args.no_cli:
        if "check" in commands:
            model = str(models["face_detection_short_range"])
            results["pi5 edgeinf check"] = run_cli(emulator, "pi5", stage, ["check", model])
        else:
            log.warning("edgeinf check: not in this tree's CLI yet, not run")
        if "demo" in commands:
            results["pi5 edgeinf demo"] = run_cli(emulator, "pi5", stage, ["demo"])
        else:
            log.warning("edgeinf demo: not in this tree's CLI yet, not run")

    width = max(len(k) for k in results)
    for name, ok in results.items():
        log.info("%s  %s", name.ljust(width), "ok" if ok else "FAILED")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
