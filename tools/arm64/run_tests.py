#!/usr/bin/env python3
"""Run the test suite on the emulated Raspberry Pi 3, 4 and 5 (aarch64 CPython under qemu).

    python tools/arm64/run_tests.py                    # CI subset on pi3, pi4, pi5
    python tools/arm64/run_tests.py --subset full      # every test but `slow` on each profile
    python tools/arm64/run_tests.py --profiles pi5 -- -k board   # extra pytest arguments after --
    python tools/arm64/run_tests.py --profiles pi3 -- tests/kernels/test_quant.py   # paths replace the subset's
    python tools/arm64/run_tests.py --jobs 2           # two emulated boards at a time (CI)

Steps: fetch the manifest's models on the host (the emulated Python has no pip), cross-build
the extension with setup.py into build/arm64/, stage a copy of the package with the aarch64
.so, compute the host's kernel digests (x86 reference), then per profile run pytest with
``-m "not slow"`` (benchmarks are outside tests/ and never collected) in the emulated Python,
and on the Pi 5 `edgeinf check` and `edgeinf demo` when the CLI has them. With ``--jobs N``,
N pytest runs go at once (qemu-user emulates one guest thread per host thread, so each run
keeps about one core busy), the Pi 5's CI suite split into the shards of emulated.CI_SHARDS;
each run's output is printed whole when it ends. Needs the host's
own build in place (``python setup.py build_ext --inplace``) for the x86 digests.

Wall times printed here are how long the emulation took, nothing about ARM speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PytestRun:
    """One pytest invocation on one emulated board."""

    name: str
    profile: str
    args: tuple[str, ...]


def plan_runs(subset: str, profiles: list[str], stage: Path, pytest_args: list[str], jobs: int) -> list[PytestRun]:
    runs = []
    # test paths after -- replace the subset's, so one module can be run on its own
    named = any(a.split("::")[0].startswith("tests") for a in pytest_args)
    for profile in profiles:
        paths = [] if named else pytest_paths(subset, profile, stage)
        extra = [*(emulated.CI_PYTEST_ARGS[profile] if subset == "ci" else ()), *pytest_args]
        shards = emulated.CI_SHARDS.get(profile, ()) if subset == "ci" and jobs > 1 and not named else ()
        if not shards:
            runs.append(PytestRun(profile, profile, (*paths, *extra)))
            continue
        taken = [p for shard in shards for p in shard if (stage / p).exists()]
        for number, shard in enumerate(shards, 1):
            present = [p for p in shard if (stage / p).exists()]
            runs.append(PytestRun(f"{profile}.{number}", profile, (*present, *extra)))
        ignores = [f"--ignore={p}" for p in taken]
        runs.append(PytestRun(f"{profile}.{len(shards) + 1}", profile, (*paths, *ignores, *extra)))
    # the longest first, so the shorter ones fill in beside it
    return sorted(runs, key=lambda run: -emulated.CI_SECONDS.get(run.name, 0))


_print_lock = threading.Lock()


def run_pytest(emulator, run: PytestRun, stage: Path, digests: Path, capture: bool) -> bool:
    started = time.monotonic()
    args = ["-m", "pytest", *emulated.PYTEST_ARGS, *run.args]
    if capture:  # concurrent runs: separate temporary folders, output printed whole at the end
        basetemp = stage.parent / "pytest" / run.name
        basetemp.parent.mkdir(parents=True, exist_ok=True)  # pytest makes the folder, not its parents
        args.append(f"--basetemp={basetemp}")
    proc = emulator.run(
        args,
        profile=run.profile,
        cwd=stage,
        pythonpath=[stage],
        extra_env={"EDGEINF_X86_DIGESTS": str(digests)},
        capture=capture,
    )
    with _print_lock:
        if capture:
            sys.stdout.write(f"[arm64] ---- {run.name}: pytest {' '.join(run.args)}\n{proc.stdout}{proc.stderr}")
            sys.stdout.flush()
        log.info(
            "%s: pytest %s -> exit %d (%.0f s under qemu)",
            run.name,
            " ".join(run.args),
            proc.returncode,
            time.monotonic() - started,
        )
        if proc.returncode < 0:
            log.error("%s: pytest was killed by signal %d", run.name, -proc.returncode)
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
    parser.add_argument("--jobs", type=int, default=1, help="pytest runs at a time (one core each)")
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

    runs = plan_runs(args.subset, profiles, stage, args.pytest_args, max(1, args.jobs))
    capture = args.jobs > 1 and len(runs) > 1
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        passed = list(pool.map(lambda run: run_pytest(emulator, run, stage, digests, capture), runs))
    results: dict[str, bool] = {f"{run.name} pytest": ok for run, ok in zip(runs, passed)}
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
