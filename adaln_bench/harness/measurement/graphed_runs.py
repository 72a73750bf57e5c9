"""Probe runs replayed from CUDA graphs: the same kernels on the same bits, without the host's launches.

A candidate's probes make about 11,500 runs (forward and backward of some rows of a seeded batch), most of a few
rows; eager, each costs the host a millisecond or more of launches (Python, autograd, a framework's launchers)
for microseconds of GPU work, so the probes are bound by the host. A run of k rows of one batch is the same
sequence of kernels whatever the rows are: only the row index differs. So, on CUDA, the second run of k rows of
a batch captures that sequence in a CUDA graph that reads the rows from an index buffer, and every later run of
k rows of that batch refills the buffer and replays the graph.

What makes a replay stand for an eager run:
- the graph is captured from the candidate's own eager code, after an eager run of the same rows (its warm-up);
- that eager run and the graph's first replay must agree bit for bit in every output and row gradient, or runs of
  that size stay eager for the rest of the candidate's probes (a candidate whose launches vary from call to call);
- a capture that fails (a candidate that synchronizes, say) leaves every later run of the candidate eager, and the
  allocator as it was before the capture (cuda_capture.py, which also keeps the captures' memory to one graph's);
- a run of the whole batch in order (the probes' reference runs and the fingerprint) is always eager, and so is
  a run larger than MAX_GRAPH_ROWS rows or of a size seen once.

A replayed run returns copies of its outputs and row gradients (the probes keep some runs while others replay)
and no parameter gradients: the probes read those only from whole-batch runs. What ran how is counted
(`ProbeRuns`, in the report's `batch_invariance.runs`). `run --probe-graphs` turns the graphs on.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from adaln_bench.harness.measurement.cuda_capture import CudaCapture, Graphed
from adaln_bench.harness.measurement.runs import RunOutput, same_rows
from adaln_bench.harness.measurement.workload import Workload, row_index

# The largest run replayed: the sweep's batches (up to 2048 rows) and the small sub-batches. A larger run is one
# of a few per probe, and its graph would hold that many rows' intermediates.
MAX_GRAPH_ROWS = 2048


Capture = Callable[[Workload, int, int, torch.Tensor], "tuple[RunOutput, Graphed]"]


def _same(a: RunOutput, b: RunOutput) -> bool:
    """Outputs and row gradients bitwise equal (parameter gradients may be summed with atomics: not asked)."""
    every = slice(None)
    return same_rows(a.outs, every, b.outs, every) and same_rows(a.row_grads, every, b.row_grads, every)


class GraphedWorkload:
    """A `Runner` over a `Workload` that replays runs of few rows from CUDA graphs (module docstring)."""

    def __init__(self, workload: Workload, capture: Optional[Capture] = None, max_rows: int = MAX_GRAPH_ROWS):
        self.workload, self.max_rows = workload, max_rows
        self.capture = capture or CudaCapture()
        self._batch: Optional[tuple[int, int]] = None  # the batch the graphs read (the workload keeps one)
        self._graph: Optional[tuple[int, Graphed]] = None  # (rows, graph): one at a time, for its memory
        self._seen: dict[int, int] = {}  # runs of each size of this batch
        self._eager_sizes: set[int] = set()  # sizes whose first replay did not match the eager run
        self.off: Optional[str] = None  # why no run of the candidate is replayed any more
        self.replayed = self.eager = self.graphs = 0

    def __call__(self, seed: int, n: int, rows: Sequence[int]) -> RunOutput:
        if (seed, n) != self._batch:  # a new batch: the graphs read the old one's memory
            self._batch, self._graph, self._seen = (seed, n), None, {}
        k = len(rows)
        whole = rows == range(n)  # a list never equals a range: only the references' own runs
        if self.off or whole or k > self.max_rows or k in self._eager_sizes:
            return self._eager(seed, n, rows)
        self._seen[k] = self._seen.get(k, 0) + 1
        if self._graph is not None and self._graph[0] == k:
            return self._replay(self._graph[1], rows)
        if self._seen[k] < 2:
            return self._eager(seed, n, rows)
        return self._capture(seed, n, rows, k)

    def _eager(self, seed: int, n: int, rows: Sequence[int]) -> RunOutput:
        self.eager += 1
        return self.workload(seed, n, rows)

    def _replay(self, g: Graphed, rows: Sequence[int]) -> RunOutput:
        g.index.copy_(row_index(rows, g.index.device))
        g.replay()
        self.replayed += 1
        r = g.result
        return RunOutput(tuple(t.clone() for t in r.outs),
                         tuple(t.clone() for t in r.row_grads) if r.row_grads is not None else None, None)

    def _capture(self, seed: int, n: int, rows: Sequence[int], k: int) -> RunOutput:
        self._graph = None  # its memory back before the next graph takes its own
        index = row_index(rows, self.workload.device)  # a fresh tensor: the graph's buffer from now on
        try:
            eager, graphed = self.capture(self.workload, seed, n, index)
        except Exception as exc:  # noqa: BLE001 - the candidate cannot be captured: every later run eager
            self.off = f"capture of a {k}-row run failed: {type(exc).__name__}: {str(exc)[:200]}"
            if index.is_cuda:
                torch.cuda.synchronize(index.device)  # a broken capture must not leave work in flight
            return self._eager(seed, n, rows)
        self.eager += 1  # the warm-up is the eager run this call returns
        self.graphs += 1
        if not _same(eager, graphed.result):
            self._eager_sizes.add(k)
            return eager
        self._graph = (k, graphed)
        return eager

    def counts(self) -> dict:
        """What ran how, for the report (`ProbeRuns`)."""
        return {"replayed": self.replayed, "eager": self.eager, "graphs": self.graphs,
                "eager_sizes": sorted(self._eager_sizes) or None, "graphs_off": self.off}
