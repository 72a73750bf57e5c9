"""A child's cold-start pool: beside the child (submit returns at once, the check runs in a pool thread) where
the schedule planned it, else in the calling thread before submit returns."""
from __future__ import annotations

import threading

from adaln_bench.harness.processes.child_measure import ColdStartPool


def test_a_pool_of_one_beside_the_child_returns_before_its_check_ends():
    release, results, threads = threading.Event(), [], []

    def check():
        threads.append(threading.current_thread().name)
        assert release.wait(10)
        return "ok"

    pool = ColdStartPool(1, beside=True)
    pool.submit(check, results.append)
    assert results == []  # the caller goes on while the check waits
    pool.submit(lambda: "second", results.append)  # queued behind the first: one at a time
    release.set()
    pool.close()
    assert results == ["ok", "second"]
    assert threads and threads[0].startswith("adaln-bench-cold")


def test_a_pool_not_beside_runs_each_check_in_the_calling_thread():
    results, threads = [], []

    def check():
        threads.append(threading.current_thread())
        return "done"

    pool = ColdStartPool(3, beside=False)
    pool.submit(check, results.append)
    assert results == ["done"] and threads == [threading.current_thread()]
    pool.close()
