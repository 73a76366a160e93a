"""The scheduler's guarantees (docs/power.md), asserted on the deterministic simulator (behaviour, not speed)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeinf.power import simulate as sim

DURATION_S = 1800.0  # half an hour of trace per scenario; the benchmark runs full hours
SEED = 11


@pytest.fixture(scope="module")
def comparisons():
    cache = {}

    def get(kind, **kwargs):
        key = (kind, tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = sim.compare(sim.make_trace(kind, seed=SEED, duration_s=DURATION_S, **kwargs))
        return cache[key]

    return get


def _row(result, name):
    return next(r for r in result["rows"] if r["controller"] == name)


@pytest.mark.parametrize("kind", ["steady", "bursty", "step_down", "wrong_profile"])
def test_scheduler_meets_budget_and_throughput_targets(comparisons, kind):
    result = comparisons(kind)
    row = _row(result, "scheduler")
    assert row["violation_fraction"] <= 0.01, row
    assert row["vs_best_static"] >= 0.95, (row["vs_best_static"], result["best_static"])
    assert row["vs_clairvoyant"] >= 0.85, (row["vs_clairvoyant"], result["clairvoyant"])


def test_profile_30_percent_pessimistic_is_corrected_too(comparisons):
    row = _row(comparisons("wrong_profile", true_dynamic_factor=0.7), "scheduler")
    assert row["violation_fraction"] <= 0.01
    assert row["vs_best_static"] >= 0.95


def test_budget_step_settles_within_three_periods_with_small_overshoot(comparisons):
    result = comparisons("step_down")
    row = _row(result, "scheduler")
    assert row["settling_periods"] is not None and row["settling_periods"] <= 3, row
    assert row["overshoot"] <= 0.10, row
    # a non-adaptive configuration that was right before the step is not right after it
    assert _row(result, "static-max")["settling_periods"] > 3


def test_comparison_is_not_vacuous(comparisons):
    result = comparisons("steady")
    # the budget binds: running flat out breaks it, the most frugal setting wastes it
    assert _row(result, "static-max")["violation_fraction"] > 0.5
    assert _row(result, "static-min")["vs_best_static"] < 0.6
    # the bounds are consistent: nothing static beats the hindsight optimum within budget,
    # and the clairvoyant bound is at least the hindsight static one
    assert result["clairvoyant"]["throughput_per_s"] >= result["best_static"]["throughput_per_s"] * 0.999
    assert _row(result, "best-static (hindsight)")["violation_fraction"] == 0.0


@pytest.mark.parametrize("kind", sim.THERMAL_TRACES)
def test_thermal_traces_on_held_out_seeds_hold_both_limits_without_leaving_throughput(kind):
    # the seeds no controller setting was tuned on; a bound holds the same budget and temperature limit
    seed = sim.HELD_OUT_SEEDS[0]
    result = sim.compare(sim.make_trace(kind, seed=seed, duration_s=DURATION_S))
    row = _row(result, "scheduler")
    assert row["throttled_fraction"] == 0.0 and row["max_temp_c"] < 80.0, row  # never above the trip
    assert row["violation_fraction"] <= 0.01, row
    assert row["vs_best_static"] >= 0.95, (row, result["best_static"])
    assert row["vs_clairvoyant"] >= 0.85, (row, result["clairvoyant"])
    # not vacuous: running flat out reaches the trip
    assert _row(result, "static-max")["throttled_fraction"] > 0.01


def test_tuning_and_held_out_seeds_are_disjoint():
    assert not set(sim.TUNING_SEEDS) & set(sim.HELD_OUT_SEEDS)


def test_thermal_bounds_respect_the_limit():
    trace = sim.make_trace("hot", seed=sim.HELD_OUT_SEEDS[1], duration_s=600.0)
    best = sim.best_static(trace, limit_c=77.0)
    entry = sim.synthetic_profile().entry(best["config"])
    power, _ = sim.static_power_mw(trace, entry, sim.IDLE_MW, best["rate_per_s"])
    assert sim.thermal_response(trace, power).max() <= 77.0
    # and the limit binds: without it the best static runs hotter and serves more
    assert sim.best_static(trace)["throughput_per_s"] > best["throughput_per_s"] * 1.05
    assert sim.clairvoyant(trace, limit_c=77.0)["throughput_per_s"] >= best["throughput_per_s"] * 0.999


def test_thermal_response_matches_the_simulated_plant():
    trace = sim.make_trace("fan", seed=1, duration_s=900.0)
    fastest = max(sim.synthetic_profile().entries, key=lambda e: e.capacity_per_s).config
    result = sim.simulate(trace, lambda s, t, c: sim.StaticController(fastest, 300.0))
    assert result.throttled_steps == 0
    np.testing.assert_allclose(sim.thermal_response(trace, result.power_mw), result.temp_c, atol=1e-9)


def test_sensor_outage_falls_back_within_one_period_and_stays_within_budget():
    trace = sim.with_outage(sim.make_trace("steady", seed=SEED, duration_s=300.0), 100.0, 160.0)
    result = sim.simulate(trace, sim.scheduler_factory(3.2), name="scheduler")
    first = int(100.0 / trace.step_s)
    last = int(160.0 / trace.step_s)
    assert not result.fallback[first - 1]
    assert result.fallback[first:last].all()  # from the first period of the outage on
    assert not result.fallback[last + 1 :].any()  # and back once readings return
    assert result.power_mw[first:last].max() <= 3200.0
    assert result.configs[first] == min(sim.synthetic_profile().entries, key=lambda e: e.power_mw).config.label


def test_simulation_is_deterministic_per_seed():
    def run(seed):
        trace = sim.make_trace("bursty", seed=seed, duration_s=120.0)
        return sim.simulate(trace, sim.scheduler_factory(3.2), name="scheduler")

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a.power_mw, b.power_mw)
    assert a.configs == b.configs
    assert not np.array_equal(a.power_mw, c.power_mw)


def test_an_hour_of_trace_runs_on_the_virtual_clock():
    trace = sim.make_trace("steady", seed=SEED, duration_s=3600.0)
    result = sim.simulate(trace, sim.scheduler_factory(3.2), name="scheduler")
    assert trace.steps == 14_400 and len(result.configs) == 14_400
    assert sim.metrics(result)["violation_fraction"] <= 0.01


def test_clairvoyant_bound_on_a_hand_solvable_window():
    # one configuration of the synthetic set dominates when the budget is loose: the bound is
    # then min(demand, capacity of the fastest configuration)
    trace = sim.make_trace("steady", seed=1, duration_s=10.0)
    loose = sim.Trace(**{**trace.__dict__, "budget_w": np.full(trace.steps, 100.0)})
    fastest = max(e.capacity_per_s for e in sim.synthetic_profile().entries)
    bound = sim.clairvoyant(loose)["throughput_per_s"]
    per_window_demand = trace.arrivals.reshape(-1, 4).sum(axis=1)  # 1 s windows of 0.25 s steps
    expected = np.minimum(per_window_demand, fastest * 1.0).sum() / trace.duration_s
    assert bound == pytest.approx(expected, rel=1e-9)


def test_unknown_trace_kind():
    with pytest.raises(ValueError, match="unknown trace kind 'solar'"):
        sim.make_trace("solar")
