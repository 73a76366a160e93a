"""Power scheduler benchmark: budget keeping and throughput against baselines, and overhead.

Part 1 runs the deterministic simulator (synthetic Pi-5-class plant, see
edgeinf/power/simulate.py) on each trace for each seed and reports, per controller,
the metrics docs/power.md states its guarantees in: the fraction of 1 s windows over
budget by > 5 %, the throughput relative to the best static configuration in hindsight
and to the clairvoyant per-window optimum, settling and overshoot after a budget step, drops,
p99 latency and energy per inference.

Part 2 measures the scheduler's own cost per control decision (32 configurations)
and the cost of reading sensors of each kind (fake sysfs files, the power model, a
spawned stub vcgencmd), as the share of one core at 4 and 10 decisions per second.

Part 3 (unless --no-real) profiles the two real face detectors and runs them under a
budget with the power model as sensor (the same scenario as tests/power/test_real_run.py).

Part 4 (unless --no-real) closes the thermal loop in real time: the simulator's plant
(30x faster, tau = 3 s) drives a fake sysfs tree (a thermal zone with a passive trip point
and an ina219 hwmon device) from a background thread, and the real scheduler reads it
through the real hwmon and thermal-zone readers (tests/power/test_thermal.py). When this
machine has a thermal zone, its reading is recorded beside it.

The simulated traces run on the held-out seeds (`simulate.HELD_OUT_SEEDS`), never on the
seeds controller settings were tuned on.

With ``--json`` the document keeps the report contract of tools/bench_report.py: its
``rows`` are the printed simulation table (one line per trace and controller, over the
seeds), plus one line for the decision cost and one for the real run; the detailed
figures stay beside them under ``simulation``, ``overhead`` and ``real``.

    PYTHONPATH=. python benchmarks/bench_power.py [--seeds 3] [--duration 3600] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from edgeinf.bench import document, measure, write_document
from edgeinf.power import simulate as sim
from edgeinf.power.profiles import Config
from edgeinf.power.scheduler import Scheduler
from edgeinf.power.sensors import ModelSensor, PiPmicSensor, PowerModel, PowerSample, Sysfs, hwmon_power_sensors

TRACES = ("steady", "bursty", "step_down", "wrong_profile", *sim.THERMAL_TRACES)
CONTROLLERS = ("scheduler", "hysteresis", "static-max", "static-min", "best-static (hindsight)")
STEP_S = 0.25  # one control period of the simulated traces

# The report's columns. Central figures are medians over the seeds; a ``_worst`` column is
# the worst seed (lowest ratio, most budget violation), as the targets must hold on every seed.
COLUMNS = (
    "trace",
    "controller",
    "seeds",
    "throughput_per_s",
    "vs_best_static_worst",
    "vs_clairvoyant_worst",
    "violation_fraction_worst",
    "energy_above_budget_fraction_worst",
    "settling_periods_worst",
    "overshoot_worst",
    "mean_power_w",
    "drop_fraction",
    "latency_p99_ms",
    "energy_per_inference_mj",
    "controller_us_per_step",
    "max_temp_c_worst",
    "throttled_fraction_worst",
)


def part_simulation(seeds: int, duration_s: float) -> dict:
    results = {}
    for kind in TRACES:
        per_controller: dict[str, list[dict]] = {name: [] for name in CONTROLLERS}
        bounds = []
        wall = []
        for seed in held_out_seeds(seeds):
            started = time.perf_counter()
            out = sim.compare(sim.make_trace(kind, seed=seed, duration_s=duration_s, step_s=STEP_S))
            wall.append(time.perf_counter() - started)
            for row in out["rows"]:
                per_controller[row["controller"]].append(row)
            bounds.append({"best_static": out["best_static"], "clairvoyant": out["clairvoyant"]})
        results[kind] = {"rows": per_controller, "bounds": bounds, "compare_wall_s": wall}
    return results


def held_out_seeds(count: int) -> list[int]:
    """The first ``count`` held-out seeds (more than the named ones continue upwards from them)."""
    named = list(sim.HELD_OUT_SEEDS)
    extra = range(max(named) + 1, max(named) + 1 + max(0, count - len(named)))
    seeds = (named + list(extra))[:count]
    assert not set(seeds) & set(sim.TUNING_SEEDS)
    return seeds


def report_row(**values) -> dict:
    """One line of the report: every column of `COLUMNS`, in order, None where it does not apply."""
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise ValueError(f"report row has columns {sorted(unknown)} that are not in COLUMNS {COLUMNS}")
    return {column: values.get(column) for column in COLUMNS}


def _seed_values(runs: list[dict], key: str) -> list[float]:
    """The seeds' values of one metric, leaving out those that do not apply (None, NaN)."""
    return [r[key] for r in runs if r[key] is not None and not (isinstance(r[key], float) and math.isnan(r[key]))]


def _median(runs: list[dict], key: str):
    values = _seed_values(runs, key)
    return statistics.median(values) if values else None


def _worst(runs: list[dict], key: str, worst=max):
    values = _seed_values(runs, key)
    return worst(values) if values else None


def simulation_rows(simulation: dict, steps_per_run: int) -> list[dict]:
    """The simulation table: one row per (trace, controller) over the seeds.

    Args:
        simulation: `part_simulation`'s result, ``{trace: {"rows": {controller: [metrics per seed]}}}``.
        steps_per_run: control periods in one simulated trace, to turn the controller's total time
            into its cost per decision.
    """
    rows = []
    for kind, data in simulation.items():
        for name, runs in data["rows"].items():
            controller_s = _median(runs, "controller_seconds")
            rows.append(
                report_row(
                    trace=kind,
                    controller=name,
                    seeds=len(runs),
                    throughput_per_s=_median(runs, "throughput_per_s"),
                    vs_best_static_worst=_worst(runs, "vs_best_static", min),
                    vs_clairvoyant_worst=_worst(runs, "vs_clairvoyant", min),
                    violation_fraction_worst=_worst(runs, "violation_fraction"),
                    energy_above_budget_fraction_worst=_worst(runs, "energy_above_budget_fraction"),
                    settling_periods_worst=_worst(runs, "settling_periods"),
                    overshoot_worst=_worst(runs, "overshoot"),
                    mean_power_w=_median(runs, "mean_power_w"),
                    drop_fraction=_median(runs, "drop_fraction"),
                    latency_p99_ms=_median(runs, "latency_p99_ms"),
                    energy_per_inference_mj=_median(runs, "energy_per_inference_mj"),
                    controller_us_per_step=None if controller_s is None else controller_s / steps_per_run * 1e6,
                    max_temp_c_worst=_worst(runs, "max_temp_c"),
                    throttled_fraction_worst=_worst(runs, "throttled_fraction"),
                )
            )
    return rows


def overhead_row(overhead: dict) -> dict:
    """The scheduler's decision cost measured alone (wall median), in the per-step column."""
    return report_row(
        trace="decision alone (32 configurations)",
        controller="scheduler",
        controller_us_per_step=overhead["wall"]["decision"]["median_us"],
    )


def real_row(real: dict) -> dict:
    """The real run's figures over both budget phases (power from the power model: an estimate)."""
    report = real["report"]
    budgets = " then ".join(f"{phase['budget_w']:g}" for phase in real["phases"])
    offered = report["served"] + report["dropped"]
    return report_row(
        trace=f"real: 2 face detectors at 30/s, budget {budgets} W, power model as sensor",
        controller="scheduler",
        throughput_per_s=report["served"] / report["duration_s"],
        violation_fraction_worst=report["violation_fraction"],
        mean_power_w=report["mean_power_w"],
        drop_fraction=report["dropped"] / offered if offered else 0.0,
        latency_p99_ms=report["latency_p99_ms"],
    )


def report_title(seeds: int, duration_s: float) -> str:
    return (
        f"Power-budget scheduler vs baselines on simulated traces ({seeds} seed{'s' if seeds != 1 else ''}"
        f" x {duration_s / 3600:g} h;"
        " medians over seeds, `_worst` = worst seed), its decision cost, a real run"
    )


def print_simulation(rows: list[dict], simulation: dict, seeds: int, duration_s: float) -> None:
    print(
        f"\n== Simulation: {seeds} seed(s) x {duration_s / 3600:.2f} h per trace (synthetic plant; truth-based metrics)"
    )
    header = (
        f"{'trace':<14}{'controller':<25}{'thr/s':>8}{'vs best':>9}{'vs clair':>9}{'viol>5%':>9}{'settle':>7}"
        f"{'oversh':>8}{'drop':>7}{'p99 ms':>8}{'mJ/inf':>8}{'ctl us':>8}{'max °C':>8}{'thrott':>8}"
    )
    print(header)
    print("-" * len(header))

    def text(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for kind, data in simulation.items():
        for row in (r for r in rows if r["trace"] == kind):
            print(
                f"{kind:<14}{row['controller']:<25}{text(row['throughput_per_s'], '.1f'):>8}"
                f"{text(row['vs_best_static_worst'], '.3f'):>9}{text(row['vs_clairvoyant_worst'], '.3f'):>9}"
                f"{text(row['violation_fraction_worst'], '.4f'):>9}{text(row['settling_periods_worst'], '.0f'):>7}"
                f"{text(row['overshoot_worst'], '.3f'):>8}{text(row['drop_fraction'], '.3f'):>7}"
                f"{text(row['latency_p99_ms'], '.1f'):>8}{text(row['energy_per_inference_mj'], '.2f'):>8}"
                f"{text(row['controller_us_per_step'], '.1f'):>8}"
                f"{text(row['max_temp_c_worst'], '.2f'):>8}{text(row['throttled_fraction_worst'], '.4f'):>8}"
            )
        print(
            f"{'':<14}(ratios, violations, settling, overshoot: worst seed; the rest: median over seeds;"
            f" one compare of 5 controllers + bounds: {statistics.fmean(data['compare_wall_s']):.1f} s wall)"
        )


def part_overhead(quick: bool = False) -> dict:
    profile = sim.synthetic_profile()
    clock = [0.0]

    class CheapSensor:
        name = "cheap"

        def read(self):
            return PowerSample(clock[0], 3100.0 + (clock[0] * 1000) % 7, self.name)

    scheduler = Scheduler(3.2, 1.0, profile=profile, sensor=CheapSensor(), clock=lambda: clock[0])

    def one_decision():
        clock[0] += 0.25
        scheduler.record_arrivals(100)
        scheduler.record(0.004, 60)
        scheduler.step()

    calls = 200 if quick else 2000
    step = measure(one_decision, runs=calls, warmup=50)
    with tempfile.TemporaryDirectory() as root:
        device = Path(root, "sys/devices/platform/i2c/1-0040/hwmon/hwmon0")
        device.mkdir(parents=True)
        (device / "name").write_text("ina219\n")
        (device / "power1_input").write_text("2345000\n")
        (device / "in1_input").write_text("5012\n")
        (device / "curr1_input").write_text("468\n")
        Path(root, "sys/class/hwmon").mkdir(parents=True)
        Path(root, "sys/class/hwmon/hwmon0").symlink_to(device)
        hwmon = hwmon_power_sensors(Sysfs(root))[0]
        hwmon_read = measure(hwmon.read, runs=calls, warmup=50)
        stub = Path(root, "vcgencmd")
        stub.write_text(
            "#!/bin/sh\ncat "
            + str(Path(__file__).resolve().parents[1] / "tests/power/data/pmic_read_adc_pi5.txt")
            + "\n"
        )
        stub.chmod(0o755)
        pmic = PiPmicSensor(str(stub), min_interval_s=0.0)
        spawns = 10 if quick else 40
        pmic_read = measure(pmic.read, runs=spawns, warmup=3)
        cpu = {
            "decision": _cpu_us_per_call(one_decision, calls),
            "hwmon_read": _cpu_us_per_call(hwmon.read, calls),
            "power_model_read": _cpu_us_per_call(model_sensor_read_fresh(), calls),
            "vcgencmd_pmic_read": _cpu_us_per_call(pmic.read, spawns),
        }
    model_sensor = ModelSensor(PowerModel(), min_interval_s=0.0)
    model_read = measure(model_sensor.read, runs=calls, warmup=50)
    out = {
        "wall": {
            "decision": step.to_dict(),
            "hwmon_read": hwmon_read.to_dict(),
            "power_model_read": model_read.to_dict(),
            "vcgencmd_pmic_read": pmic_read.to_dict(),
        },
        "cpu_us_per_call": cpu,
    }
    for hz in (4, 10):
        out[f"core_share_at_{hz}hz"] = {
            "decision": cpu["decision"] * hz / 1e6,
            "decision_plus_hwmon": (cpu["decision"] + cpu["hwmon_read"]) * hz / 1e6,
            "decision_plus_vcgencmd": (cpu["decision"] + cpu["vcgencmd_pmic_read"]) * hz / 1e6,
        }
    return out


def model_sensor_read_fresh():
    sensor = ModelSensor(PowerModel(), min_interval_s=0.0)
    return sensor.read


def _cpu_us_per_call(fn, calls: int) -> float:
    """CPU time of this process and its children (a spawned vcgencmd) per call, in microseconds."""

    def cpu_s():
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    start = cpu_s()
    for _ in range(calls):
        fn()
    return (cpu_s() - start) / calls * 1e6


def print_overhead(out: dict) -> None:
    print("\n== Overhead per call (wall median and p99; CPU of this process and its children) and share of one core")
    for key in ("decision", "hwmon_read", "power_model_read", "vcgencmd_pmic_read"):
        stats = out["wall"][key]
        print(
            f"  {key:<22} wall median {stats['median_us']:9.1f} us  p99 {stats['p99_us']:9.1f} us   CPU {out['cpu_us_per_call'][key]:9.1f} us"
        )
    for hz in (4, 10):
        share = out[f"core_share_at_{hz}hz"]
        print(
            f"  at {hz:>2} decisions/s: scheduler {share['decision'] * 100:.3f} % of a core; with an hwmon read "
            f"{share['decision_plus_hwmon'] * 100:.3f} %; with a vcgencmd spawn {share['decision_plus_vcgencmd'] * 100:.2f} %"
        )


def part_real(duration_s: float) -> dict:
    from edgeinf import zoo
    from edgeinf.power import profile
    from edgeinf.power.runner import load_runner, run_loop

    short, full = "face_detection_short_range", "face_detection_full_range"
    models = {short: zoo.path(short), full: zoo.path(full)}
    model = PowerModel()
    prof = profile(models, threads=(1, 2), runs=30, quality={short: 0.9}, power_model=model)
    runners = {c: load_runner(models[c.variant], c.backend, c.threads) for c in prof.configs}
    phases = []
    try:
        scheduler = Scheduler(2.0, 1.0, profile=prof, sensor=ModelSensor(model))
        for budget in (2.0, 1.72):
            if phases:
                scheduler.set_budget(budget)
            before = scheduler.report()
            wall0, cpu0 = time.monotonic(), time.process_time()
            report = run_loop(scheduler, runners, duration_s, frame_rate_hz=30.0)
            wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
            phases.append(
                {
                    "budget_w": budget,
                    "independent_mean_w": model.power_mw(cpu / wall) / 1000.0,
                    "served": report.served - before.served,
                    "dropped": report.dropped - before.dropped,
                    "config_seconds": {
                        k: v - before.config_seconds.get(k, 0.0) for k, v in report.config_seconds.items()
                    },
                }
            )
    finally:
        for runner in runners.values():
            runner.close()
    return {
        "profile": [
            {"config": e.config.label, "latency_ms": e.latency_ms, "power_mw": e.power_mw} for e in prof.entries
        ],
        "phases": phases,
        "report": report.to_dict(),
    }


def print_real(out: dict) -> None:
    print("\n== Real run: two TFLite face detectors at 30 frames/s, power model as sensor (estimated)")
    for entry in out["profile"]:
        print(f"  profile {entry['config']:<42} {entry['latency_ms']:7.2f} ms  {entry['power_mw']:7.0f} mW")
    for phase in out["phases"]:
        used = ", ".join(
            f"{k.split('/')[0].replace('face_detection_', '')}/{k.split('/')[2]} {v:.1f}s"
            for k, v in phase["config_seconds"].items()
            if v > 0.05
        )
        print(
            f"  budget {phase['budget_w']:.2f} W: mean {phase['independent_mean_w']:.3f} W, served {phase['served']}, dropped {phase['dropped']}; {used}"
        )
    report = out["report"]
    print(
        f"  windows over budget by >5 %: {report['windows_over_budget']} of {report['windows']}; p99 latency {report['latency_p99_ms']:.1f} ms"
    )


def part_thermal_real(duration_s: float) -> dict:
    from edgeinf.power.sensors import Sysfs, thermal_zones
    from edgeinf.power.thermal import ThermalModel

    with tempfile.TemporaryDirectory() as root:
        plant = sim.SysfsPlant(root, sim.synthetic_profile(), ambient_c=40.0, tau_s=3.0)
        out = sim.run_on_sysfs_plant(
            plant,
            5.5,
            duration_s,
            thermal_model=ThermalModel(tau_s=1.5, block_s=0.25, window_s=10.0),
            thermal_horizon_s=0.5,
        )
    log = out.pop("log")
    out["periods"] = len(log)
    out["temp_c_every_half_second"] = [
        round(temp, 2) for t, temp, _, _ in log[:: max(1, len(log) // (2 * int(duration_s) or 1))]
    ]
    out["last_second_mean_temp_c"] = statistics.fmean(temp for t, temp, _, _ in log if t > duration_s - 1.0)
    out["last_second_mean_power_w"] = statistics.fmean(p for t, _, p, _ in log if t > duration_s - 1.0) / 1000.0
    out["this_machine_zones"] = []
    for zone in thermal_zones(Sysfs("/")):
        try:
            out["this_machine_zones"].append(
                {"type": zone.name, "temp_mc": zone.read().temp_mc, "trip_mc": zone.throttle_trip_mc()}
            )
        except Exception as exc:  # a zone that cannot be read is recorded, not fatal
            out["this_machine_zones"].append({"type": zone.name, "error": str(exc)})
    return out


def print_thermal_real(out: dict) -> None:
    report = out["report"]
    print("\n== Real-time thermal loop: simulated plant (tau 3 s) behind a fake sysfs tree, real readers")
    print(
        f"  trip {out['limit']['trip_mc'] / 1000:.1f} °C (from the zone), hold {out['limit']['hold_mc'] / 1000:.1f} °C;"
        f" peak {out['max_temp_c']:.2f} °C, {out['throttled_s']:.2f} s above the trip;"
        f" last second {out['last_second_mean_temp_c']:.2f} °C at {out['last_second_mean_power_w']:.2f} W;"
        f" thermal limit bound {report['thermal_backoff_periods']} of {out['periods']} periods"
    )
    print(f"  learnt model: {report['thermal_model']}")
    print(f"  this machine's thermal zones: {out['this_machine_zones'] or 'none'}")


def thermal_real_row(out: dict) -> dict:
    report = out["report"]
    return report_row(
        trace="real time: thermal plant (tau 3 s) behind a fake sysfs tree, real readers, 5.5 W",
        controller="scheduler",
        throughput_per_s=report["served"] / report["duration_s"] if report["duration_s"] else None,
        violation_fraction_worst=report["violation_fraction"],
        mean_power_w=report["mean_power_w"],
        max_temp_c_worst=out["max_temp_c"],
        throttled_fraction_worst=out["throttled_s"] / report["duration_s"] if report["duration_s"] else None,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of trace per run (default one hour)")
    parser.add_argument("--real-seconds", type=float, default=4.0, help="seconds per budget phase of the real run")
    parser.add_argument("--thermal-seconds", type=float, default=10.0, help="seconds of the real-time thermal loop")
    parser.add_argument("--no-real", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1 seed x 5 min, fewer overhead calls, 1 s real phases"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.duration, args.real_seconds = 1, 300.0, 1.0
    results = document(
        "power",
        report_title(args.seeds, args.duration),
        quick=args.quick,
        settings={"seeds": args.seeds, "duration_s": args.duration, "step_s": STEP_S},
        rows=[],
    )
    versions = results["versions"]
    print(
        f"edgeinf {versions['edgeinf']}  python {versions['python']}  numpy {versions['numpy']}"
        f"  {results['machine']['arch']}  {results['date']}"
    )
    results["simulation"] = part_simulation(args.seeds, args.duration)
    rows = simulation_rows(results["simulation"], steps_per_run=round(args.duration / STEP_S))
    print_simulation(rows, results["simulation"], args.seeds, args.duration)
    results["overhead"] = part_overhead(args.quick)
    print_overhead(results["overhead"])
    rows.append(overhead_row(results["overhead"]))
    if not args.no_real:
        results["real"] = part_real(args.real_seconds)
        print_real(results["real"])
        rows.append(real_row(results["real"]))
        results["thermal_real"] = part_thermal_real(args.thermal_seconds)
        print_thermal_real(results["thermal_real"])
        rows.append(thermal_real_row(results["thermal_real"]))
    results["rows"] = rows
    if args.json:
        write_document(results, args.json, default=lambda o: o.label if isinstance(o, Config) else str(o))
        print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
