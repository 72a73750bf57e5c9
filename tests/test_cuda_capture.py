"""What a failed capture leaves behind (harness/measurement/cuda_capture.py), on the CPU with stand-ins for torch's
graph, memory pool and allocator calls: the allocator is told the capture ended only when torch did not tell it,
and the pool gets back exactly the count of a graph that never ended. (The real thing: tests/gpu.)"""
from __future__ import annotations

import pytest
import torch

from adaln_bench.harness.measurement.cuda_capture import recovered_on_failure

DEVICE = torch.device("cuda", 0)


class Allocator:
    """torch's allocator as far as these calls go: captures under way per pool, and each pool's count."""

    def __init__(self):
        self.underway: set = set()
        self.counts: dict = {}
        self.calls: list = []

    def begin(self, pool_id):
        self.underway.add(pool_id)
        self.counts[pool_id] += 1

    def end(self, device_index, pool_id):
        self.calls.append(("end", device_index, pool_id))
        if pool_id not in self.underway:
            raise RuntimeError("endAllocatePool: not currently recording to mempool_id")
        self.underway.remove(pool_id)

    def release(self, device_index, pool_id):
        self.calls.append(("release", device_index, pool_id))
        self.counts[pool_id] -= 1


class Pool:
    def __init__(self, allocator: Allocator):
        self.id, self.allocator = (0, 7), allocator
        allocator.counts[self.id] = 1

    def use_count(self) -> int:
        return self.allocator.counts[self.id]


class Graph:
    """A graph whose capture can fail where torch's can: before it began, in the run, or in capture_end."""

    def __init__(self, allocator: Allocator, end_fails: bool = False):
        self.allocator, self.end_fails, self.ended = allocator, end_fails, False

    def capture_begin(self, pool):
        self.pool_id = pool
        self.allocator.begin(pool)

    def capture_end(self):
        if self.end_fails:  # cudaStreamEndCapture's error: torch raises before it ends the allocator's capture
            raise RuntimeError("operation failed due to a previous error during capture")
        self.allocator.end(0, self.pool_id)
        self.allocator.calls.clear()  # torch's own call, not the recovery's
        self.ended = True

    def pool(self):
        if not self.ended:
            raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
        return self.pool_id


@pytest.fixture
def allocator(monkeypatch):
    alloc = Allocator()
    monkeypatch.setattr(torch._C, "_cuda_endAllocateToPool", alloc.end, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_releasePool", alloc.release, raising=False)
    return alloc


def capture(graph: Graph, pool: Pool, run):
    with recovered_on_failure(graph, pool, DEVICE):
        graph.capture_begin(pool=pool.id)
        try:
            run()
        finally:
            graph.capture_end()


def broken_run():
    raise RuntimeError("a host read while the stream is captured")


def test_a_capture_whose_end_fails_is_ended_and_its_count_given_back(allocator):
    pool = Pool(allocator)
    with pytest.raises(RuntimeError, match="previous error during capture"):
        capture(Graph(allocator, end_fails=True), pool, broken_run)
    assert allocator.calls == [("end", 0, (0, 7)), ("release", 0, (0, 7))]
    assert not allocator.underway and pool.use_count() == 1


def test_a_capture_that_ended_is_left_to_the_graph(allocator):
    pool = Pool(allocator)
    graph = Graph(allocator)
    with pytest.raises(RuntimeError, match="host read"):
        capture(graph, pool, broken_run)
    assert allocator.calls == [] and pool.use_count() == 2  # the graph gives its count back when it goes


def test_a_failure_before_the_capture_began_touches_nothing(allocator):
    pool = Pool(allocator)

    class Refuses(Graph):
        def capture_begin(self, pool):
            raise RuntimeError("CUDA graphs must be captured on a non-default stream.")

    with pytest.raises(RuntimeError, match="non-default stream"):
        capture(Refuses(allocator), pool, lambda: None)
    assert allocator.calls == [("end", 0, (0, 7))]  # refused, as torch refuses: nothing was under way
    assert pool.use_count() == 1


def test_a_capture_that_succeeds_calls_nothing(allocator):
    pool = Pool(allocator)
    capture(Graph(allocator), pool, lambda: None)
    assert allocator.calls == [] and not allocator.underway


def test_without_a_shared_pool_nothing_is_put_right(allocator):
    with pytest.raises(RuntimeError):
        with recovered_on_failure(Graph(allocator, end_fails=True), None, DEVICE):
            raise RuntimeError("broken")
    assert allocator.calls == []

