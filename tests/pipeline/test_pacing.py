"""Paced admission: a frame goes in once it is predicted to pass every stage without queueing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edgeinf.pipeline import Pipeline
from edgeinf.pipeline.core import PACING_MIN_CALLS
from edgeinf.sources import Frame

WAIT_S = 30  # an upper bound on any wait: a broken pipeline fails the test instead of hanging it
HELD = PACING_MIN_CALLS  # the frame held in the slow stage, once every stage has a prediction


def frame(seq: int) -> Frame:
    return Frame(np.zeros((2, 2), np.uint8), "gray", seq, 0.0)


class StepClock:
    """A clock that moves only when a stage says its call took so long."""

    def __init__(self):
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class FastThenSlow:
    """Stage "fast" takes ``fast_s``, stage "slow" ``slow_s`` (on the step clock); frame `HELD`
    stays in "slow" until ``release`` is set. ``log`` lists the calls in the order they happened."""

    def __init__(self, fast_s: float, slow_s: float, *, pacing: bool):
        self.clock = StepClock()
        self.log: list[tuple[str, int]] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self.fast_started = {}
        self.pipe = Pipeline("paced", pacing=pacing, clock=self.clock)

        def fast(f):
            self.log.append(("fast", f.seq))
            self.fast_started.setdefault(f.seq, threading.Event()).set()
            self.clock.spend(fast_s)
            return f.seq

        def slow(f, seq):
            if seq == HELD:
                self.held.set()
                assert self.release.wait(WAIT_S), "the held frame was never released"
            self.clock.spend(slow_s)
            self.log.append(("slow done", seq))
            return seq

        self.pipe.add("fast", fast)
        self.pipe.add("slow", slow, inputs=["fast"])

    def warm_up_and_hold(self) -> None:
        """Frames one at a time until every stage has a prediction, then frame `HELD` into "slow"."""
        for seq in range(HELD):
            assert self.pipe.process(frame(seq)).ok
        self.held_future = self.pipe.submit(frame(HELD))
        assert self.held.wait(WAIT_S)

    def submit_next_in_background(self) -> threading.Thread:
        def submit():
            self.next_future = self.pipe.submit(frame(HELD + 1))

        thread = threading.Thread(target=submit)
        thread.start()
        return thread

    def started(self, seq: int) -> threading.Event:
        return self.fast_started.setdefault(seq, threading.Event())


def test_a_paced_frame_enters_once_the_slower_stage_is_through_with_the_frame_before():
    # "fast" 1 s, "slow" 3 s: a frame entering while the one before has just started "slow"
    # would wait 2 s in its queue; paced, it goes in when that frame leaves "slow" instead
    # (the settle wakes the admission before the predicted 2 s are up).
    stages = FastThenSlow(1.0, 3.0, pacing=True)
    with stages.pipe:
        stages.warm_up_and_hold()
        submitter = stages.submit_next_in_background()
        time.sleep(0.3)  # room for an unpaced admission to show itself: the next frame in "fast"
        stages.release.set()
        submitter.join(WAIT_S)
        assert stages.held_future.result(WAIT_S).ok and stages.next_future.result(WAIT_S).ok
    assert stages.log.index(("fast", HELD + 1)) > stages.log.index(("slow done", HELD)), stages.log


def test_without_pacing_a_frame_enters_as_soon_as_there_is_room():
    stages = FastThenSlow(1.0, 3.0, pacing=False)
    with stages.pipe:
        stages.warm_up_and_hold()
        submitter = stages.submit_next_in_background()
        entered = stages.started(HELD + 1).wait(WAIT_S)  # while the frame before is held in "slow"
        stages.release.set()
        submitter.join(WAIT_S)
        assert entered
        assert stages.next_future.result(WAIT_S).ok
    assert stages.log.index(("fast", HELD + 1)) < stages.log.index(("slow done", HELD)), stages.log


def test_a_hung_stage_holds_admission_no_longer_than_the_first_prediction():
    # The clock stands still while "slow" hangs, so the predicted wait (0.2 s) never ends on
    # it; admission still goes ahead once that long has passed, and the next frame's "fast"
    # runs while the frame before is still held.
    stages = FastThenSlow(0.1, 0.3, pacing=True)
    with stages.pipe:
        stages.warm_up_and_hold()
        submitter = stages.submit_next_in_background()
        entered = stages.started(HELD + 1).wait(WAIT_S)
        stages.release.set()
        submitter.join(WAIT_S)
        assert entered
        assert stages.held_future.result(WAIT_S).ok and stages.next_future.result(WAIT_S).ok


def test_pacing_predicts_from_the_median_of_each_stages_recent_calls():
    stages = FastThenSlow(1.0, 3.0, pacing=True)
    with stages.pipe:
        stages.warm_up_and_hold()
        slow = stages.pipe.stages["slow"]
        assert stages.pipe.stages["fast"].predicted_s() == 1.0 and slow.predicted_s() == 3.0
        # "slow" started the held frame at the clock's current time: it is free 3 s later, and a
        # frame reaches it 1 s after entering, so the earliest unqueued entry is 2 s from now.
        now = stages.clock()
        with stages.pipe._lock:
            assert stages.pipe._admission_time(now) == now + 2.0
        stages.release.set()
        assert stages.held_future.result(WAIT_S).ok


def test_a_pipeline_file_turns_pacing_on(tmp_path):
    from edgeinf.errors import InputError
    from edgeinf.pipeline.config import load_pipeline

    stage = '[[stage]]\nname = "stats"\nfactory = "stage_helpers:frame_stats"\n'
    for setting, paced in (("", False), ("pacing = true\n", True)):
        path = tmp_path / "paced.toml"
        path.write_text(f"[pipeline]\n{setting}{stage}")
        with load_pipeline(path) as pipe:
            assert pipe.pacing is paced
            assert pipe.process(frame(0)).ok
    path.write_text(f'[pipeline]\npacing = "no"\n{stage}')
    with pytest.raises(InputError, match="pacing"):
        load_pipeline(path)


def test_a_rate_limited_stage_does_not_hold_admission():
    # Limited to one call per 1000 s, "slow" lets the next frames pass without a call: its call
    # times predict nothing for them, so the next frame goes in while the held one is in "slow"
    # (paced on the 100 s / 300 s calls, it would wait 200 s).
    stages = FastThenSlow(100.0, 300.0, pacing=True)
    with stages.pipe:
        stages.warm_up_and_hold()
        stages.pipe.configure("slow", rate_hz=0.001)
        submitter = stages.submit_next_in_background()
        entered = stages.started(HELD + 1).wait(WAIT_S)
        stages.release.set()
        submitter.join(WAIT_S)
        assert entered
        assert stages.next_future.result(WAIT_S).stages["slow"].status == "skipped"
