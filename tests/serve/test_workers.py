"""The worker pool's rules, with a model stand-in (no web framework, no model file)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from edgeinf.serve.workers import DeadlineExceeded, Overloaded, Pool

WAIT_S = 120.0


class Held:
    """A model whose calls wait until released; ``entered`` counts calls that began."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.closed = False

    def run(self):
        self.entered.release()
        self.release.wait(WAIT_S)
        return "done"

    def close(self):
        self.closed = True


@contextmanager
def held_pool(capacity: int):
    """A pool whose first worker runs a `Held` model (replacements load new ones), deadline 10 s.
    On exit every held call is released, retired workers are joined and the pool is closed."""
    held = Held()
    pool = Pool("m/v", loader=Held, models=[held], capacity=capacity, deadline_s=10.0)
    try:
        yield held, pool
    finally:
        held.release.set()
        for worker in list(pool._workers):
            if worker.retired:
                worker.join(WAIT_S)
            elif worker.model is not None:
                worker.model.release.set()
        pool.close()


def test_a_late_call_keeps_its_worker_a_stuck_one_is_replaced():
    held, fresh = Held(), Held()
    fresh.release.set()
    pool = Pool("m/v", loader=lambda: fresh, models=[held], capacity=3, deadline_s=10.0)
    running = pool.submit(lambda model: model.run())
    assert held.entered.acquire(timeout=WAIT_S)
    queued = pool.submit(lambda model: model.run())
    pool.submit(lambda model: model.run())  # capacity 3: the third fits...
    with pytest.raises(Overloaded):  # ...a fourth does not
        pool.submit(lambda model: model.run())
    (worker,) = pool._workers

    pool.expire(queued)  # waited in the queue; the running call is young: nobody is stuck
    assert pool.replaced == 0 and queued.future.cancelled()
    pool.expire(running)  # its request waited before its call began: a late call, not a stuck one
    assert pool.replaced == 0 and not worker.retired
    worker.call_started -= 6.0  # the running call has now used over half of its own deadline
    pool.expire(running)
    assert pool.replaced == 1 and worker.retired
    assert pool.submit(lambda model: model.run()).future.result(WAIT_S) == "done"  # the new worker's model

    held.release.set()  # the stuck call returns: its worker exits and closes its model
    assert running.future.result(WAIT_S) == "done"
    worker.join(WAIT_S)
    assert held.closed and pool.live_workers == 1
    pool.close()
    assert fresh.closed


def test_any_call_over_a_whole_deadline_is_stuck_whichever_request_expires():
    with held_pool(capacity=4) as (held, pool):
        pool.submit(lambda model: model.run())
        assert held.entered.acquire(timeout=WAIT_S)
        (worker,) = pool._workers
        worker.call_started -= 11.0
        pool.expire(pool.submit(lambda model: model.run()))  # another request's deadline finds it
        assert pool.replaced == 1 and worker.retired


def test_a_reserved_place_counts_toward_the_capacity_until_used_or_given_back():
    with held_pool(capacity=1) as (held, pool):
        assert pool.reserve()  # a body being decoded holds the only place
        assert not pool.reserve()
        with pytest.raises(Overloaded):
            pool.submit(lambda model: model.run())
        pool.unreserve()  # the body was bad: its place is free again
        assert pool.reserve()
        job = pool.submit(lambda model: model.run(), reserved=True)  # the decoded body takes its own place
        assert pool.pending == 1 and not pool.reserve()
        held.release.set()
        assert job.future.result(WAIT_S) == "done"
        assert pool.pending == 0


def test_a_call_as_slow_as_its_recent_neighbours_is_not_stuck():
    with held_pool(capacity=2) as (held, pool):
        pool.recent_calls.extend([1.0, 4.0, 2.0])  # a loaded host: calls have taken up to 4 s
        running = pool.submit(lambda model: model.run())
        assert held.entered.acquire(timeout=WAIT_S)
        (worker,) = pool._workers
        worker.call_started -= 6.0  # over half its deadline, but under twice the slowest recent call
        pool.expire(running)
        assert pool.replaced == 0 and not worker.retired
        worker.call_started -= 3.0  # 9 s: twice as slow as any recent call
        pool.expire(running)
        assert pool.replaced == 1 and worker.retired
        held.release.set()
        assert running.future.result(WAIT_S) == "done"
        worker.join(WAIT_S)
        assert max(pool.recent_calls) == 4.0  # the stuck call's time is no excuse for the next one


def test_a_request_that_a_usual_call_would_answer_too_late_is_skipped():
    with held_pool(capacity=3) as (held, pool):
        pool.recent_calls.extend([5.0, 5.0, 6.0])  # calls take 5 s
        running = pool.submit(lambda model: model.run())
        assert held.entered.acquire(timeout=WAIT_S)
        hopeless = pool.submit(lambda model: model.run())
        hopeless.deadline = time.monotonic() + 1.0  # 1 s left: a 5 s call cannot make it
        hopeful = pool.submit(lambda model: model.run())  # 10 s left
        held.release.set()
        assert running.future.result(WAIT_S) == "done"
        with pytest.raises(DeadlineExceeded):
            hopeless.future.result(WAIT_S)
        assert hopeful.future.result(WAIT_S) == "done"
