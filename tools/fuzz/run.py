"""Run edgeinf's coverage-guided fuzzers, each for a fixed time.

Every `tools/fuzz/fuzz_<target>.py` is an atheris (libFuzzer) script; its seed corpus lives
in `tools/fuzz/corpus/<target>/`. Each target runs in its own process with the seeds
read-only (new inputs go to a scratch folder), so a run never rewrites the repository. A
crash, a leak of an unexpected exception, a timeout or an out-of-memory stops that target
and fails the run; the input that did it is copied to `--artifacts` to become a test.

    python tools/fuzz/run.py --seconds 60            # every target, 60 s each
    python tools/fuzz/run.py --seconds 10 tflite     # one target

Targets run side by side, one per core (`--jobs`): each fuzzer process is single-threaded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent


def targets() -> list[str]:
    return sorted(p.stem.removeprefix("fuzz_") for p in HERE.glob("fuzz_*.py"))


def run_target(name: str, seconds: int, artifacts: Path) -> bool:
    seeds = HERE / "corpus" / name
    with tempfile.TemporaryDirectory(prefix=f"edgeinf-fuzz-{name}-") as scratch:
        cmd = [
            sys.executable,
            str(HERE / f"fuzz_{name}.py"),
            scratch,
            *([str(seeds)] if seeds.is_dir() else []),
            f"-max_total_time={seconds}",
            "-timeout=20",
            "-rss_limit_mb=3072",
            f"-artifact_prefix={artifacts}/{name}-",
            "-print_final_stats=1",
        ]
        print(f"== fuzz {name}: {seconds} s", flush=True)
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = result.stdout.strip().splitlines()[-40:]
    ok = result.returncode == 0
    if not ok:
        # one print: targets running side by side must not interleave their reports
        print(
            "\n".join([*tail, f"== fuzz {name}: FAILED (exit {result.returncode}); inputs in {artifacts}"]), flush=True
        )
    else:
        stats = [line for line in tail if line.startswith(("#", "stat::number_of_executed_units"))]
        print(f"== fuzz {name}: ok ({stats[-1] if stats else 'done'})", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help=f"targets to run (default: all of {', '.join(targets())})")
    parser.add_argument("--seconds", type=int, default=60, help="time per target (default 60)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="targets at a time (default: cores)")
    parser.add_argument("--artifacts", type=Path, default=Path("fuzz-artifacts"), help="where failing inputs go")
    args = parser.parse_args(argv)
    names = args.targets or targets()
    unknown = sorted(set(names) - set(targets()))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; known: {targets()}")
    args.artifacts.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        passed = list(pool.map(lambda name: run_target(name, args.seconds, args.artifacts.resolve()), names))
    failed = [name for name, ok in zip(names, passed) if not ok]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
