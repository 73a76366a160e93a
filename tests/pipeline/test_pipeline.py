"""Pipeline graphs on threads: fan-out and join, deadlines, the circuit breaker, limits, metrics."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import edgeinf.metrics
from edgeinf.errors import InputError
from edgeinf.pipeline import CircuitBreaker, Pipeline, PipelineError
from edgeinf.sources import Frame

WAIT_S = 30  # an upper bound on any wait: a broken pipeline fails the test instead of hanging it


def frame(value: int, seq: int = 0) -> Frame:
    return Frame(np.full((4, 4), value, np.uint8), "gray", seq, 0.0)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fan_out_and_join_give_each_stage_its_inputs():
    with Pipeline("graph") as pipe:
        pipe.add("total", lambda f: int(f.data.sum()))
        pipe.add("items", lambda f: list(range(int(f.data[0, 0]))))
        pipe.add("squared", lambda f, item: item * item, inputs=["items"], for_each="items")
        pipe.add("joined", lambda f, total, squares: (total, sum(squares)), inputs=["total", "squared"])
        for value in (0, 1, 3, 5):
            result = pipe.process(frame(value))
            assert result.ok, result.stages
            assert result["squared"] == [i * i for i in range(value)]
            assert result["joined"] == (16 * value, sum(i * i for i in range(value)))
    summary = pipe.metrics.summary()
    assert summary["frames_completed"] == 4 and summary["stages"]["joined"]["ok"] == 4


def test_stages_run_concurrently_on_different_frames():
    # "second" waits for "first" to start on the next frame: only a pipelined graph gets past it.
    next_frame_started = threading.Event()

    def first(f):
        if f.seq == 1:
            next_frame_started.set()
        return f.seq

    def second(f, seq):
        if seq == 0 and not next_frame_started.wait(WAIT_S):
            raise AssertionError("frame 1 never reached the first stage while frame 0 was in the second")
        return seq

    with Pipeline("pipelined", max_in_flight=2) as pipe:
        pipe.add("first", first)
        pipe.add("second", second, inputs=["first"])
        futures = [pipe.submit(frame(0, seq)) for seq in range(2)]
        results = [f.result(WAIT_S) for f in futures]
    assert [r["second"] for r in results] == [0, 1]


def test_a_raising_stage_marks_the_frame_and_skips_what_depends_on_it():
    def flaky(f):
        if f.seq % 2:
            raise ValueError(f"bad frame {f.seq}")
        return f.seq

    with Pipeline("errors") as pipe:
        pipe.add("flaky", flaky, breaker=CircuitBreaker(failures=100))
        pipe.add("after", lambda f, v: v + 1, inputs=["flaky"])
        pipe.add("independent", lambda f: "fine")
        results = [pipe.process(frame(0, seq)) for seq in range(4)]
    assert [r.stages["flaky"].status for r in results] == ["ok", "error", "ok", "error"]
    assert results[1].stages["flaky"].error == "ValueError: bad frame 1"
    assert results[1].stages["after"].status == "skipped" and "flaky" in results[1].stages["after"].error
    assert [r["independent"] for r in results] == ["fine"] * 4
    with pytest.raises(PipelineError, match="stage 'after' has no value for frame 1: skipped"):
        results[1]["after"]


def test_breaker_opens_after_repeated_failures_and_retries_after_reset():
    clock = FakeClock()
    calls = []

    def failing(f):
        calls.append(f.seq)
        if f.data[0, 0] == 0:
            raise RuntimeError("sensor unplugged")
        return "back"

    with Pipeline("breaker") as pipe:
        pipe.add("stage", failing, breaker=CircuitBreaker(failures=2, reset_s=10.0, clock=clock))
        statuses = [pipe.process(frame(0, seq)).stages["stage"].status for seq in range(4)]
        assert statuses == ["error", "error", "open", "open"]
        assert calls == [0, 1]  # an open breaker does not call the stage
        clock.now = 10.0
        assert pipe.process(frame(0, 4)).stages["stage"].status == "error"  # the trial fails: open again
        assert pipe.process(frame(1, 5)).stages["stage"].status == "open"
        clock.now = 20.0
        assert pipe.process(frame(1, 6))["stage"] == "back"  # the trial succeeds: closed
        assert pipe.process(frame(0, 7)).stages["stage"].status == "error"
    assert calls == [0, 1, 4, 6, 7]
    assert pipe.stages["stage"].breaker.opened == 2


def test_breaker_half_open_lets_one_trial_through():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=1, reset_s=1.0, clock=clock)
    breaker.record(False)
    assert not breaker.allow()
    clock.now = 1.0
    assert breaker.allow() and not breaker.allow()  # one trial at a time
    breaker.record(True)
    assert breaker.state == "closed" and breaker.allow()
    with pytest.raises(ValueError, match="failures must be an integer >= 1"):
        CircuitBreaker(failures=0)


def test_a_hung_stage_times_out_and_a_new_worker_serves_the_next_frames():
    release = threading.Event()

    def sometimes_hangs(f):
        if f.seq == 0:
            release.wait(WAIT_S)  # a call that never returns in time
        return f.seq

    with Pipeline("hang") as pipe:
        pipe.add("stage", sometimes_hangs, timeout_s=0.05, breaker=CircuitBreaker(failures=5))
        pipe.add("after", lambda f, v: v, inputs=["stage"])
        first = pipe.process(frame(0, 0))
        later = [pipe.process(frame(0, seq)) for seq in (1, 2)]
        assert first.stages["stage"].status == "timeout" and "0.05 s" in first.stages["stage"].error
        assert first.stages["after"].status == "skipped"
        assert [r["after"] for r in later] == [1, 2]
        assert pipe.stages["stage"].stuck_workers == 1
        release.set()
    assert pipe.metrics.summary()["stages"]["stage"]["timeout"] == 1


def test_the_frame_deadline_answers_even_when_a_stage_has_none():
    release = threading.Event()
    with Pipeline("deadline", timeout_s=0.05) as pipe:
        pipe.add("fast", lambda f: "done")
        pipe.add("stuck", lambda f, v: release.wait(WAIT_S), inputs=["fast"])
        result = pipe.submit(frame(0)).result(WAIT_S)
        release.set()
    assert result["fast"] == "done"
    assert result.stages["stuck"].status == "timeout" and "frame's deadline" in result.stages["stuck"].error


def test_a_full_pipeline_refuses_instead_of_queueing_when_asked():
    release = threading.Event()
    with Pipeline("full", max_in_flight=1) as pipe:
        pipe.add("slow", lambda f: release.wait(WAIT_S))
        first = pipe.submit(frame(0))
        with pytest.raises(PipelineError, match="is full"):
            pipe.submit(frame(0), block=False)
        release.set()
        assert first.result(WAIT_S)["slow"] is True
    assert pipe.metrics.frames_rejected == 1


def test_rate_limit_and_variants_are_set_while_running():
    clock = FakeClock()
    with Pipeline("knobs", clock=clock) as pipe:
        pipe.add("model", {"full": lambda f: "full", "lite": lambda f: "lite"}, rate_hz=10.0)
        assert pipe.process(frame(0))["model"] == "full"
        clock.now = 0.05
        assert pipe.process(frame(0)).stages["model"].status == "skipped"  # within 1/10 s of the last call
        pipe.configure("model", variant="lite", rate_hz=None)
        assert pipe.process(frame(0))["model"] == "lite"
        with pytest.raises(InputError, match="has variants"):
            pipe.configure("model", variant="huge")


def test_bad_graphs_are_refused_with_the_reason():
    pipe = Pipeline("bad")
    pipe.add("a", lambda f: 1)
    with pytest.raises(InputError, match="unknown input"):
        pipe.add("b", lambda f, x: x, inputs=["nope"])
    with pytest.raises(InputError, match="already exists"):
        pipe.add("a", lambda f: 2)
    with pytest.raises(InputError, match="for_each must name one of"):
        pipe.add("c", lambda f, x: x, inputs=["a"], for_each="b")
    with pytest.raises(InputError, match="timeout_s must be a positive number"):
        pipe.add("d", lambda f: 1, timeout_s=0)
    with pytest.raises(InputError, match="needs a callable"):
        pipe.add("e", "not callable")
    pipe.close()
    with pytest.raises(PipelineError, match="closed"):
        pipe.submit(frame(0))


def test_asyncio_wrappers_await_results():
    async def main():
        with Pipeline("async") as pipe:
            pipe.add("double", lambda f: int(f.data[0, 0]) * 2)
            results = await asyncio.gather(*(pipe.asubmit(frame(v, v)) for v in range(3)))
        return [r["double"] for r in results]

    assert asyncio.run(main()) == [0, 2, 4]


def test_metrics_expose_stage_and_end_to_end_latency():
    with Pipeline("exposed") as pipe:
        pipe.add("only", lambda f: None)
        pipe.process(frame(0))
    text = edgeinf.metrics.render()
    assert 'edgeinf_pipeline_latency_seconds_count{pipeline="exposed",stage="only"} 1' in text
    assert 'edgeinf_pipeline_latency_seconds_count{pipeline="exposed",stage="end_to_end"} 1' in text
    assert 'edgeinf_pipeline_stage_calls_total{pipeline="exposed",stage="only",status="ok"} 1' in text


def test_a_power_scheduler_decision_sets_the_stage_variant_and_rate():
    from edgeinf.power.profiles import Config
    from edgeinf.power.scheduler import Decision

    clock = FakeClock()
    with Pipeline("scheduled", clock=clock) as pipe:
        pipe.add("faces", {"full/tflite/t1": lambda f: "full", "short/tflite/t1": lambda f: "short"})
        pipe.add("mesh", lambda f, faces: faces, inputs=["faces"], workers=1)
        decision = Decision(0.0, Config("short", "tflite", 1), 5.0, 1000.0, 900.0, False, "over budget")
        pipe.apply("faces", decision)
        assert pipe.process(frame(0))["faces"] == "short"
        clock.now = 0.1  # within 1/5 s
        assert pipe.process(frame(0)).stages["faces"].status == "skipped"
        pipe.apply("faces", Decision(0.0, Config("full"), float("inf"), 0.0, 0.0, False, "room"))
        assert pipe.process(frame(0))["faces"] == "full"
        pipe.configure("mesh", workers=3)
        assert len(pipe.stages["mesh"].live_workers) == 3
        assert [pipe.process(frame(0, seq))["mesh"] for seq in range(3)] == ["full"] * 3
        pipe.configure("mesh", workers=1)
        assert len(pipe.stages["mesh"].live_workers) == 1
        with pytest.raises(InputError, match="none is"):
            pipe.apply("faces", Decision(0.0, Config("tiny"), 1.0, 0.0, 0.0, False, ""))


def test_closing_answers_the_frames_still_inside():
    release = threading.Event()
    pipe = Pipeline("closing")
    pipe.add("slow", lambda f: release.wait(WAIT_S))
    future = pipe.submit(frame(0))
    pipe.close()
    result = future.result(WAIT_S)
    release.set()
    assert result.stages["slow"].status == "timeout" and "closed" in result.stages["slow"].error


def test_arun_iterates_a_source_from_asyncio(tmp_path):
    from PIL import Image

    import edgeinf.sources as sources

    for i in range(3):
        Image.fromarray(np.full((8, 8, 3), i * 10, np.uint8)).save(tmp_path / f"{i}.png")

    async def main():
        with Pipeline("arun") as pipe:
            pipe.add("level", lambda f: int(f.data[0, 0, 0]))
            return [r["level"] async for r in pipe.arun(sources.open(tmp_path))]

    assert asyncio.run(main()) == [0, 10, 20]


def test_a_stage_without_a_deadline_that_hangs_is_replaced_at_the_frame_deadline():
    release = threading.Event()

    def hangs_once(f):
        if f.seq == 0:
            release.wait(WAIT_S)
        return f.seq

    with Pipeline("frame_deadline", timeout_s=0.05) as pipe:
        pipe.add("stage", hangs_once, breaker=CircuitBreaker(failures=2))
        first = pipe.process(frame(0, 0))
        second = pipe.process(frame(0, 1))  # served by a new worker, not queued behind the hung one
        release.set()
    assert first.stages["stage"].status == "timeout" and second["stage"] == 1
    assert pipe.stages["stage"].breaker.consecutive_failures == 0  # the success after it reset the count


def test_a_half_open_trial_whose_frame_was_dropped_does_not_hold_the_breaker():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=1, reset_s=1.0, clock=clock)
    breaker.record(False)
    clock.now = 1.0
    assert breaker.allow()
    breaker.release()  # the frame of the trial was answered before the call ran
    assert breaker.allow()


def test_an_inline_stage_runs_on_its_inputs_thread_without_a_worker():
    with Pipeline("inline") as pipe:
        pipe.add("first", lambda f: (threading.current_thread().name, int(f.data[0, 0])))
        pipe.add(
            "picked", lambda f, first: (threading.current_thread().name, first[1] + 1), inputs=["first"], inline=True
        )
        pipe.add("failing", lambda f, first: 1 / (first[1] - 2), inputs=["first"], inline=True)
        for value in (1, 2):
            result = pipe.process(frame(value))
            assert result["picked"] == ("edgeinf-stage:first", value + 1)
        assert result.stages["failing"].status == "error" and "ZeroDivisionError" in result.stages["failing"].error
        assert [w.thread.name for s in pipe.stages.values() for w in s.live_workers] == ["edgeinf-stage:first"]
        assert pipe._slots._initial_value == 1  # the default room counts only stages with workers
    assert pipe.metrics.summary()["stages"]["picked"]["ok"] == 2


def test_an_inline_stage_without_inputs_runs_on_the_submitting_thread():
    with Pipeline("inline_only") as pipe:
        pipe.add("name", lambda f: threading.current_thread().name, inline=True)
        assert pipe.process(frame(0))["name"] == threading.current_thread().name


def test_an_inline_stage_takes_no_timeout_process_or_workers():
    from edgeinf.pipeline import ProcessStage

    pipe = Pipeline("inline_limits")
    with pytest.raises(InputError, match="inline"):
        pipe.add("slow", lambda f: f, inline=True, timeout_s=1.0)
    with pytest.raises(InputError, match="inline"):
        pipe.add("remote", ProcessStage("stage_helpers:frame_stats"), inline=True)
    pipe.add("glue", lambda f: f.seq, inline=True)
    with pytest.raises(InputError, match="inline"):
        pipe.configure("glue", workers=2)
    pipe.close()


def test_a_pipeline_file_makes_a_stage_inline(tmp_path):
    from edgeinf.pipeline.config import load_pipeline

    path = tmp_path / "inline.toml"
    path.write_text(
        '[[stage]]\nname = "stats"\nfactory = "stage_helpers:frame_stats"\n'
        '[[stage]]\nname = "seq"\nfactory = "stage_helpers:pick"\nargs = ["seq"]\ninputs = ["stats"]\ninline = true\n'
    )
    with load_pipeline(path) as pipe:
        assert pipe.stages["seq"].inline and not pipe.stages["stats"].inline
        assert pipe.process(frame(3, seq=7))["seq"] == 7


class CountingFactory:
    """Builds a callable per call, noting the thread that built it."""

    def __init__(self, barrier: threading.Barrier | None = None):
        self.built_on: list[int] = []
        self.barrier = barrier
        self.lock = threading.Lock()

    def __call__(self, offset: int, *, scale: int = 1):
        with self.lock:
            self.built_on.append(threading.get_ident())
        builder = threading.get_ident()
        barrier = self.barrier

        def fn(f):
            assert threading.get_ident() == builder  # a worker only ever calls its own
            if barrier is not None:
                barrier.wait(WAIT_S)  # both workers in a call at once, or the barrier breaks
            return int(f.data[0, 0]) * scale + offset

        return fn


def test_a_thread_stage_gives_each_worker_its_own_callable_and_runs_them_at_once():
    from edgeinf.pipeline import ThreadStage

    factory = CountingFactory(threading.Barrier(2))
    with Pipeline("own", max_in_flight=2) as pipe:
        pipe.add("value", ThreadStage(factory, 1, options={"scale": 10}), workers=2)
        futures = [pipe.submit(frame(v, seq=v)) for v in range(6)]
        results = [f.result(WAIT_S) for f in futures]
    assert [r["value"] for r in results] == [10 * v + 1 for v in range(6)]
    assert len(factory.built_on) == 2  # once per worker, not per frame
    assert len(set(factory.built_on)) == 2


def test_a_thread_stage_factory_that_fails_fails_the_frame_and_is_tried_again():
    from edgeinf.pipeline import ThreadStage

    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("model file missing")
        return lambda f: "ok"

    with Pipeline("flaky") as pipe:
        pipe.add("value", ThreadStage(flaky))
        first, second = pipe.process(frame(1)), pipe.process(frame(2))
    assert first.stages["value"].status == "error" and "model file missing" in first.stages["value"].error
    assert second["value"] == "ok"


def test_a_thread_stage_is_checked_and_not_called_directly():
    from edgeinf.pipeline import ThreadStage

    with pytest.raises(InputError, match="callable factory"):
        ThreadStage("edgeinf.pipeline.face:face_mesh_stage")
    with pytest.raises(PipelineError, match="not directly"):
        ThreadStage(CountingFactory())(frame(1))
    with pytest.raises(InputError, match="inline"):
        Pipeline("x").add("value", ThreadStage(CountingFactory()), inline=True)
    with Pipeline("not callable") as pipe:
        pipe.add("value", ThreadStage(lambda: 42))
        result = pipe.process(frame(1))
    assert result.stages["value"].status == "error" and "not callable" in result.stages["value"].error


def test_a_pipeline_file_with_workers_gives_each_worker_thread_its_own_callable(tmp_path):
    from edgeinf.pipeline.config import load_pipeline

    path = tmp_path / "workers.toml"
    path.write_text('[[stage]]\nname = "who"\nfactory = "stage_helpers:builder_thread"\nworkers = 2\n')
    with load_pipeline(path) as pipe:
        results = [f.result(WAIT_S) for f in [pipe.submit(frame(v, seq=v)) for v in range(8)]]
    answers = [r["who"] for r in results]
    assert all(a["built_on"] == a["called_on"] for a in answers)  # each worker calls what it built
    assert len({a["built_on"] for a in answers}) <= 2
