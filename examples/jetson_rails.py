"""Read a Jetson's INA3221 power rails and pick the face-detector variant the power budget allows.

On a Jetson: ``python examples/jetson_rails.py --budget-mw 10000 --fps 15``. The rails come
from sysfs below ``--root`` (``/`` on a board; a fake tree in tests), in both driver
layouts: JetPack 5+ (mainline ``ina3221`` hwmon: millivolts x milliamps) and JetPack 4
(``ina3221x`` IIO: ``in_power<n>_input`` in milliwatts). The board's input power is one
rail where the board has one (``VDD_IN``, ``POM_5V_IN``, ``VIN``), else the sum of rails.

Variants are tried from the most capable (full range) to the lightest: each is measured
here (median latency over a few runs), its added power at the wanted frame rate is
estimated as ``dynamic_mw x duty`` (duty = fps x latency), and the first variant that
keeps up with the frame rate within the budget is chosen.

Exit status: 0 a variant fits, 1 none fits (the lightest is printed with the frame rate
it can afford), 3 no rails found under ``--root``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

log = logging.getLogger("jetson_rails")

INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "VIN")  # a rail that is the board's total on its own
VARIANTS = ("face_detection_full_range", "face_detection_short_range")  # most capable first


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _unused(label: str) -> bool:
    # "NC" marks an unconnected channel; the seventh channel sums the shunts (counted twice).
    return "NC" in re.split(r"[^A-Za-z0-9]+", label.upper()) or "sum of shunt" in label.lower()


def read_rails_builtin(root: Path) -> dict[str, float]:
    """Rail name -> milliwatts from both INA3221 driver layouts below ``root``."""
    rails: dict[str, float] = {}
    for device in sorted((root / "sys/class/hwmon").glob("*")):
        if _read(device / "name") != "ina3221":
            continue
        for n in (1, 2, 3):
            label = _read(device / f"in{n}_label")
            mv, ma = _read(device / f"in{n}_input"), _read(device / f"curr{n}_input")
            if label is None or mv is None or ma is None or _unused(label):
                continue
            rails[label] = abs(int(mv) * int(ma)) / 1000.0
    for device in sorted((root / "sys/bus/i2c/drivers/ina3221x").glob("*/iio:device*")):
        for name_file in sorted(device.glob("rail_name_*")):
            n = name_file.name.rsplit("_", 1)[1]
            label, mw = _read(name_file), _read(device / f"in_power{n}_input")
            if label and mw is not None and not _unused(label):
                rails[label] = float(mw)
    return rails


def read_rails(root: Path) -> tuple[dict[str, float], str]:
    """Rails in milliwatts, through `edgeinf.power` when it is installed, else the reader above."""
    try:
        from edgeinf.power.sensors.base import Sysfs
        from edgeinf.power.sensors.jetson import jetson_rails
    except ImportError:
        return read_rails_builtin(root), "built-in reader"
    return {rail.name: rail.read().power_mw for rail in jetson_rails(Sysfs(root))}, "edgeinf.power"


def board_total_mw(rails: dict[str, float]) -> tuple[float, str]:
    """The board's input power and the rule used: `edgeinf.power`'s per-board rule when installed."""
    try:
        from edgeinf.power.sensors.jetson import choose_total
    except ImportError:
        choose_total = None
    rule = choose_total(list(rails)) if choose_total else None
    if rule is not None:
        return sum(rails[name] for name in rule.rails), " + ".join(rule.rails)
    for name in INPUT_RAILS:
        if name in rails:
            return rails[name], name
    return sum(rails.values()), " + ".join(sorted(rails))


def measure_variant(name: str, threads: int, runs: int) -> float:
    """Median seconds of one detector inference (random input, after warm-ups)."""
    import edgeinf
    from edgeinf import bench, zoo

    with edgeinf.load(zoo.path(name), num_threads=threads) as model:
        x = bench.random_inputs(model.inputs, seed=0)
        return bench.measure(lambda: model.run(x), warmup=3, runs=runs).median_us / 1e6


def choose(idle_mw: float, budget_mw: float, fps: float, dynamic_mw: float, latencies_s: dict[str, float]) -> dict:
    """The first variant (in the given order) that keeps ``fps`` within ``budget_mw``.

    Returns a dict with the choice, whether it fits, and each variant's estimate.
    """
    estimates = []
    for name, latency in latencies_s.items():
        duty = fps * latency
        power = idle_mw + dynamic_mw * min(duty, 1.0)
        estimates.append(
            {
                "variant": name,
                "latency_ms": latency * 1e3,
                "duty": duty,
                "estimated_mw": power,
                "fits": duty <= 1.0 and power <= budget_mw,
            }
        )
    fitting = [e for e in estimates if e["fits"]]
    if fitting:
        return {"variant": fitting[0]["variant"], "fits": True, "fps": fps, "estimates": estimates}
    lightest = min(estimates, key=lambda e: e["latency_ms"])
    headroom = max(budget_mw - idle_mw, 0.0)
    affordable = min(1.0, headroom / dynamic_mw if dynamic_mw > 0 else 1.0) / (lightest["latency_ms"] / 1e3)
    return {"variant": lightest["variant"], "fits": False, "fps": affordable, "estimates": estimates}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/", help="the directory standing for / (a fake sysfs tree in tests)")
    parser.add_argument("--budget-mw", type=float, required=True, help="board power budget in milliwatts")
    parser.add_argument("--fps", type=float, default=15.0, help="frames per second to keep up with")
    parser.add_argument(
        "--dynamic-mw", type=float, default=3000.0, help="power added while a detector runs flat out (mW)"
    )
    parser.add_argument("--variants", default=",".join(VARIANTS), help="manifest names, most capable first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per variant")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)

    rails, source = read_rails(Path(args.root))
    if not rails:
        print(f"no INA3221 rails under {args.root} (not a Jetson, or no permission)", file=sys.stderr)
        return 3
    idle_mw, rule = board_total_mw(rails)
    latencies = {name: measure_variant(name, args.threads, args.runs) for name in args.variants.split(",")}
    decision = choose(idle_mw, args.budget_mw, args.fps, args.dynamic_mw, latencies)
    report = {"rails_mw": rails, "reader": source, "total_mw": idle_mw, "total_rule": rule, **decision}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, mw in rails.items():
            print(f"rail {name:<20} {mw:9.1f} mW")
        print(f"board total {idle_mw:.1f} mW ({rule}; read by {source}); budget {args.budget_mw:.0f} mW")
        for e in decision["estimates"]:
            print(
                f"  {e['variant']:<28} {e['latency_ms']:7.2f} ms  duty {e['duty']:5.2f}  "
                f"~{e['estimated_mw']:8.1f} mW  {'fits' if e['fits'] else 'does not fit'}"
            )
        verdict = "run" if decision["fits"] else "over budget: run"
        print(f"{verdict} {decision['variant']} at {decision['fps']:.1f} fps")
    return 0 if decision["fits"] else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
