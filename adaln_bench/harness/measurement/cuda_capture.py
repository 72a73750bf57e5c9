"""Captures in CUDA graphs with bounded memory, and no harm done when one fails: the probes' runs (graphed_runs.py)
and, for the part on failures, the latency's calls (device_time.py).

torch leaves three things to the caller. A nightly with the graphs on showed each of them on an 80 GB H100
(results/h100/evidence/nightly/e29fab5/):
- **Each capture gets its own private memory pool** unless it is given one. A pool dropped with its graph goes
  back to the device only when the cache is emptied, so a candidate's hundred captures held tens of GiB.
  Here every capture of one `CudaCapture` shares one pool (a `torch.cuda.MemPool`) on one side stream: the caching
  allocator reuses a block only on the stream that allocated it. A capture then reuses what the dropped graph held.
- **The cache cannot be emptied while a capture is under way.** A capture that needs new memory on a nearly full
  GPU fails even when the cache holds plenty. So the cache is emptied first when less than HEADROOM is free.
- **A failed capture can leave the allocator stuck.** When a candidate breaks a capture (with a synchronizing
  call, say), cudaStreamEndCapture returns an error. torch raises it before telling the allocator that the
  capture ended. From then on the allocator believes a capture is under way, and `empty_cache` frees nothing for
  the rest of the process: one child held 55.6 GiB to its end. So the allocator is told here, and the pool gets
  back the count that the unfinished graph will never return.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import torch

from adaln_bench.harness.measurement.runs import RunOutput

# Free device memory below which the cache is emptied before a capture (a capture cannot empty it itself).
HEADROOM = 2 << 30


@dataclass
class Graphed:
    """One captured run: the index buffer it reads and the tensors each replay overwrites."""

    replay: Callable[[], None]
    index: torch.Tensor
    result: RunOutput


class CudaCapture:
    """Captures runs of one workload's candidate, one graph alive at a time (graphed_runs.py drops the last one
    before it asks for the next), in one memory pool on one side stream, both made at the first capture."""

    def __init__(self) -> None:
        self._stream: Optional[torch.cuda.Stream] = None
        self._pool = None  # torch.cuda.MemPool, where torch has one; else a private pool per capture

    def __call__(self, workload, seed: int, n: int, index: torch.Tensor):
        """An eager run of the rows in `index` on the side stream (the warm-up torch asks for before a capture),
        then the same run captured on that stream; returns the eager run and the graph, replayed once. (Not
        `torch.cuda.graph`: its garbage collection and emptied cache at every capture would cost more than a
        hundred captures save.)"""
        device = index.device
        if self._stream is None:
            with torch.cuda.device(device):
                self._stream = torch.cuda.Stream()
                self._pool = shared_pool()
        if torch.cuda.mem_get_info(device)[0] < HEADROOM:
            torch.cuda.empty_cache()
        main, side = torch.cuda.current_stream(device), self._stream
        side.wait_stream(main)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side):
            eager = workload.run_indexed(seed, n, index)
            side.synchronize()
            with recovered_on_failure(graph, self._pool, device):
                graph.capture_begin(pool=pool_id(self._pool))
                try:
                    static: RunOutput = workload.run_indexed(seed, n, index)
                finally:
                    graph.capture_end()
        main.wait_stream(side)
        graph.replay()
        return eager, Graphed(graph.replay, index, static)


def shared_pool():
    """A memory pool for captures made one after another (torch.cuda.MemPool), or None where torch has none."""
    return torch.cuda.MemPool() if hasattr(torch.cuda, "MemPool") else None


def pool_id(pool):
    """What a capture takes as its pool: the shared pool's id, or None (a private pool) without one."""
    return pool.id if pool is not None else None


@contextlib.contextmanager
def recovered_on_failure(graph: "torch.cuda.CUDAGraph", pool, device: torch.device) -> Iterator[None]:
    """Around a capture of `graph` into `pool`: if it raises before the capture ended, the allocator is told that
    the capture is over, and the pool is given back the count the graph took (its destructor releases the pool only
    after a capture that ended)."""
    counted = pool.use_count() if pool is not None else 0
    try:
        yield
    except BaseException:
        if pool is not None and not _ended(graph):
            index = device.index if device.index is not None else torch.cuda.current_device()
            try:
                torch._C._cuda_endAllocateToPool(index, pool.id)
            except RuntimeError:
                pass  # "not currently recording": the capture never began, or torch ended it before its error
            if pool.use_count() > counted:
                torch._C._cuda_releasePool(index, pool.id)
        raise


def _ended(graph) -> bool:
    try:
        graph.pool()  # torch refuses this unless the capture ended
    except RuntimeError:
        return False
    return True
