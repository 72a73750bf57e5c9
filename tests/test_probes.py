"""The probes on fake candidates whose batch dependence is known, so every count can be derived by hand."""
import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.probes import RunOutput, probe_batch_invariance


class FakeRunner:
    """Row r of batch (seed, n) is [seed, r], plus 0.5 when the batch has at least `fwd_from` rows
    (a reduction split chosen by batch size); d_temb likewise with `grad_from`."""

    def __init__(self, fwd_from=None, grad_from=None, repeatable=True):
        self.fwd_from, self.grad_from, self.repeatable = fwd_from, grad_from, repeatable
        self.calls = 0

    def __call__(self, seed, n, rows):
        rows = list(rows)
        self.calls += 1
        base = torch.tensor([[float(seed), float(r)] for r in rows])
        bump = lambda threshold: 0.5 if threshold is not None and len(rows) >= threshold else 0.0
        out = base.clone()
        out[:, 1] += bump(self.fwd_from)
        grad = base.clone()
        grad[:, 1] += bump(self.grad_from)
        dw = torch.tensor([0.0 if self.repeatable else float(self.calls)])
        return RunOutput((out,), (grad,), (dw, torch.zeros(1)))


def test_invariant_candidate_passes_with_exact_structure():
    bi = probe_batch_invariance(FakeRunner(), P.FULL)
    assert bi.batch_invariant and bi.params_repeatable
    assert {n: (c.rows, c.fwd_differ, c.rowgrad_differ) for n, c in bi.all_rows.items()} == {
        "64": (192, 0, 0), "257": (771, 0, 0), "2048": (6144, 0, 0)}
    assert bi.full_vs_sub_batches.sub_batches == 2060
    assert bi.batch_size_sweep.comparisons == 2256 and bi.batch_size_sweep.differ == 0
    assert bi.batch_size_sweep.first_failures == []


def test_batch_size_split_is_caught_with_exact_counts():
    bi = probe_batch_invariance(FakeRunner(fwd_from=8, grad_from=1024), P.FULL)
    assert not bi.batch_invariant
    # Every full batch has >= 8 rows, every row alone has one: all differ in fwd; d_temb only at n = 2048.
    assert {n: (c.fwd_differ, c.rowgrad_differ) for n, c in bi.all_rows.items()} == {
        "64": (192, 0), "257": (771, 0), "2048": (6144, 6144)}
    subs = bi.full_vs_sub_batches
    # Sub-batches of 1 and 7 rows (512 each per seed) differ from the 4096-row batch; 1024 and 2048 do not.
    assert (subs.sub_batches, subs.fwd_differ, subs.rowgrad_differ) == (2060, 2048, 2048)
    sweep = bi.batch_size_sweep
    # Per probe row: 93 placements, of which those in batches of 1..7 rows (1 + 2 + 5*3 = 18) agree; the reversed batch differs.
    assert sweep.differ == 3 * 8 * (93 - 18 + 1)
    assert [(f.seed, f.batch, f.position, f.row) for f in sweep.first_failures] == [
        (3, 8, 0, 0), (3, 8, 3, 0), (3, 8, 7, 0),
        (3, 8, 0, 259), (3, 8, 3, 259), (3, 8, 7, 259),
        (3, 8, 0, 515), (3, 8, 3, 515)]


def test_unrepeatable_weight_gradient_fails_invariance():
    bi = probe_batch_invariance(FakeRunner(repeatable=False), P.QUICK)
    assert not bi.params_repeatable
    assert not bi.batch_invariant
    assert all(c.fwd_differ == 0 for c in bi.all_rows.values())


def test_quick_plan_structure():
    bi = probe_batch_invariance(FakeRunner(fwd_from=2), P.QUICK)
    assert list(bi.all_rows) == ["17", "64"]
    assert bi.full_vs_sub_batches.full_batch == 256
    assert bi.full_vs_sub_batches.sub_batch_sizes == [1, 7, 64]
    # Sub-batches of one row are the only ones smaller than 2 rows: 256 of them per seed.
    assert bi.full_vs_sub_batches.sub_batches == 2 * (256 + 37 + 4)
    assert bi.full_vs_sub_batches.fwd_differ == 2 * 256
    assert bi.batch_size_sweep.comparisons == P.sweep_comparisons(64, 3)


class PositionRunner(FakeRunner):
    """Rows anywhere but the first position of a batch come out different (an epilogue that depends on position)."""

    def __call__(self, seed, n, rows):
        result = super().__call__(seed, n, rows)
        result.outs[0][1:, 1] += 0.25
        return result


def test_position_dependence_is_caught_including_the_reversed_batch():
    bi = probe_batch_invariance(PositionRunner(), P.FULL)
    assert {n: c.fwd_differ for n, c in bi.all_rows.items()} == {"64": 3 * 63, "257": 3 * 256, "2048": 3 * 2047}
    # Every sub-batch starts at its own position 0; only those starting at row 0 line up with the full batch:
    # per seed 511 of 512 (1 row), 511 of 512 (7 rows), 3 of 4 (1024 rows), 1 of 2 (2048 rows).
    assert bi.full_vs_sub_batches.fwd_differ == 2 * (511 + 511 + 3 + 1)
    # Per probe row: batch of 1 agrees, batch of 2 differs at position 1, larger ones at 2 of 3 positions;
    # in the reversed batch only row 2047 lands at position 0.
    assert bi.batch_size_sweep.differ == 3 * (8 * (1 + 30 * 2) + 7)
    assert [(f.batch, f.position, f.row) for f in bi.batch_size_sweep.first_failures[:3]] == [(2, 1, 0), (2, 1, 259), (2, 1, 515)]


class WeightGradTracker(FakeRunner):
    """A FakeRunner whose every run hands out a weight gradient it watches, so that a test can count how many
    are alive at each run: the probes' memory (adaln_projection's weight gradient is 520 MB a run)."""

    def __init__(self):
        super().__init__()
        self.handed: list = []
        self.most_alive = 0

    def __call__(self, seed, n, rows):
        import weakref

        self.most_alive = max(self.most_alive, sum(ref() is not None for ref in self.handed))
        got = super().__call__(seed, n, rows)
        dw = torch.zeros(4)
        self.handed.append(weakref.ref(dw))
        return RunOutput(got.outs, got.row_grads, (dw, got.param_grads[1]))


def test_runs_kept_for_later_comparisons_hold_no_weight_gradients():
    # The random-rows probe keeps every row it ran alone (dozens) and the sweep its probe rows alone: they compare
    # rows only, so none of them may keep its weight gradient alive; at most the run just made and the one
    # before it (a sub-batch replaced by the next) are alive when a run starts.
    runner = WeightGradTracker()
    bi = probe_batch_invariance(runner, P.QUICK)
    assert bi.batch_invariant and bi.params_repeatable  # the gradients were still compared where they count
    assert len(runner.handed) > 40 and runner.most_alive <= 2


class OutputTracker(FakeRunner):
    """A FakeRunner that watches the outputs of every run of more than one row, and notes, as each run starts,
    how many of them are still alive: what a probe holds at once beyond the run being made."""

    def __init__(self):
        super().__init__()
        self.watched: list = []
        self.starts: list[tuple[int, int]] = []  # (rows of the run starting, multi-row outputs alive then)

    def __call__(self, seed, n, rows):
        import weakref

        rows = list(rows)
        self.starts.append((len(rows), sum(ref() is not None for ref in self.watched)))
        got = super().__call__(seed, n, rows)
        if len(rows) > 1:
            self.watched.append(weakref.ref(got.outs[0]))
        return got


def test_the_sub_batch_probe_holds_one_full_batch_and_nothing_of_the_runs_before():
    # While a sub-batch runs, only its full batch is alive (not the sub-batch before it); while a seed's full batch
    # runs, nothing of the last seed's: at the full batch these are each half a step (adaln_row_gather at h3: 8 GiB).
    from adaln_bench.harness.measurement.probes import probe_sub_batches

    tracker = OutputTracker()
    probe_sub_batches(tracker, P.QUICK)
    full_starts = [alive for rows, alive in tracker.starts if rows == P.QUICK.full_batch]
    part_starts = [alive for rows, alive in tracker.starts if rows < P.QUICK.full_batch]
    assert len(full_starts) == len(P.QUICK.sub_batch_seeds) and set(full_starts) == {0}
    assert part_starts and max(part_starts) == 1


def test_the_random_rows_probe_holds_no_earlier_batch_while_it_runs_the_next():
    from adaln_bench.harness.measurement.random_rows import probe_random_rows

    tracker = OutputTracker()
    probe_random_rows(tracker, P.QUICK.random_rows)
    batches = [alive for rows, alive in tracker.starts if rows > 1]
    assert len(batches) > 3 and set(batches) == {0}
