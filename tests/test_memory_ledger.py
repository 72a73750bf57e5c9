"""The GPU memory ledger: holds within the budget go at once, one past it fits once memory is released, an empty
ledger lets any one through, a dead process's entries are dropped, an aged want keeps its bytes free, and two
children whose operators do not fit together measure them one after the other."""
import json
import subprocess
import sys

from adaln_bench.harness.processes.memory_ledger import WANT_AGING_S, MemoryLedger, NoLedger, ledger_for

GIB = 1 << 30


def test_holds_within_the_budget_are_granted_and_released(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    a, b = ledger.try_hold(4 * GIB), ledger.try_hold(6 * GIB)
    assert a and b and sorted(ledger.held().values()) == [4 * GIB, 6 * GIB]
    assert ledger.try_hold(1) is None  # 4 + 6 + 1 byte > 10 GiB
    ledger.release(a)
    ledger.release(b)
    assert ledger.held() == {}


def test_a_hold_past_the_budget_fits_once_memory_is_released(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    first = ledger.try_hold(6 * GIB)
    assert ledger.try_hold(6 * GIB) is None
    ledger.release(first)
    assert ledger.try_hold(6 * GIB) is not None


def test_an_empty_ledger_lets_any_hold_through(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 1 * GIB)
    assert ledger.try_hold(50 * GIB) is not None
    assert list(ledger.held().values()) == [50 * GIB]


def test_a_dead_process_reservation_is_dropped(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=60)
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    ledger.path.write_text(json.dumps({f"{gone.pid}:dead": [gone.pid, 10 * GIB],
                                       f"{gone.pid}:want": [gone.pid, 10 * GIB, 0.0]}))
    assert ledger.try_hold(8 * GIB) is not None
    assert list(ledger.held().values()) == [8 * GIB]


def test_an_aged_want_keeps_its_bytes_from_others_but_not_from_itself(tmp_path):
    clock = [100.0]
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB, now=lambda: clock[0])
    ledger.try_hold(3 * GIB)  # someone's light operator
    heavy = ledger.want(8 * GIB)  # a child waiting for 8 GiB: 3 + 8 > 10
    assert len(ledger.held()) == 1  # a want is not held
    light = ledger.try_hold(2 * GIB)  # the want is fresh: a lighter one still goes in beside it
    assert light is not None
    ledger.release(light)
    clock[0] += WANT_AGING_S
    assert ledger.try_hold(2 * GIB) is None  # aged: 3 + 2 + 8 > 10, the 2 GiB would delay it
    assert ledger.try_hold(2 * GIB, want=heavy) is not None  # the waiting child's own hold is not kept out
    # Of two aged wants only the oldest is kept free, and never from the older one.
    older = ledger.want(1 * GIB, since=0.0)
    assert ledger.try_hold(1 * GIB, want=heavy) is not None  # 3 + 2 + 1 + 1 (older's) <= 10
    assert ledger.try_hold(4 * GIB, want=heavy) is None  # 3 + 2 + 1 + 4 + 1 (older's) > 10
    assert ledger.try_hold(4 * GIB, want=older) is not None  # 3 + 2 + 1 + 4 <= 10: heavy's newer want not kept
    ledger.release(heavy)
    ledger.release(older)
    assert ledger.try_hold(1) is None  # the holds fill the budget


def test_no_ledger_without_a_folder_key_or_budget(tmp_path):
    assert isinstance(ledger_for(None, "gpu0", GIB), NoLedger)
    assert isinstance(ledger_for(str(tmp_path), "gpu0", None), NoLedger)
    assert isinstance(ledger_for(str(tmp_path), "gpu0", GIB), MemoryLedger)
    assert NoLedger().try_hold(100 * GIB) is not None


def test_two_children_whose_operators_do_not_fit_together_take_turns(tmp_path, monkeypatch):
    # Two modes' children on one (fake) GPU, with a budget that holds one norm_modulate reservation: each child's
    # operator steps (build to latency) never overlap the other's; their start-up still may.
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.harness.measurement.step_clock import TRACE_VARIABLE
    from adaln_bench.harness.processes.memory_ledger import operator_reservation
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.ops.registry import get_operator
    from fake_gpu import two_modes_on_one_fake_gpu

    trace = tmp_path / "steps.jsonl"
    monkeypatch.setenv(TRACE_VARIABLE, str(trace))
    shape = PRESETS["tiny"]
    budget = operator_reservation(get_operator("norm_modulate"), shape, quick=True)
    options = RunConfig(device="cpu", shape=shape, quick=True, timeout_s=300, lease=True, cold_start=False,
                        memory_budget_bytes=budget)
    outcomes = two_modes_on_one_fake_gpu(options)
    assert {n: o.run.status for n, o in outcomes.items()} == {"plain": "ok", "cublaslt_ws1": "ok"}
    steps = [json.loads(line) for line in trace.read_text().splitlines()]
    spans = {}
    for s in steps:
        if s["phase"] in ("build", "probes", "accuracy", "latency"):
            start, end = spans.get(s["pid"], (s["start"], s["end"]))
            spans[s["pid"]] = (min(start, s["start"]), max(end, s["end"]))
    assert len(spans) == 2
    (a_start, a_end), (b_start, b_end) = sorted(spans.values())
    assert a_end <= b_start


def test_each_gpu_has_its_own_ledger(tmp_path):
    # --gpus 0,1: the same budget on each GPU, reserved apart (the key is the lease's, one per GPU).
    gpu0, gpu1 = MemoryLedger(tmp_path, "gpu0", 10 * GIB), MemoryLedger(tmp_path, "gpu1", 10 * GIB)
    assert gpu0.try_hold(8 * GIB) is not None and gpu1.try_hold(8 * GIB) is not None
    assert list(gpu0.held().values()) == [8 * GIB] and list(gpu1.held().values()) == [8 * GIB]


def test_an_aged_want_is_kept_free_also_when_nothing_is_held(tmp_path):
    # When the last hold ends, a lighter operator polled first must not take the memory an aged want waits for.
    clock = [100.0]
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB, now=lambda: clock[0])
    heavy = ledger.want(8 * GIB)
    assert ledger.try_hold(3 * GIB) is not None and ledger.held()  # a fresh want keeps nothing
    ledger.release(next(iter(ledger.held())))
    clock[0] += WANT_AGING_S
    assert ledger.try_hold(3 * GIB) is None  # 3 + 8 > 10: it would delay the heavy one
    assert ledger.try_hold(2 * GIB) is not None  # 2 + 8 <= 10: it does not
    assert ledger.try_hold(8 * GIB, want=heavy) is not None


def test_a_reservation_past_the_budget_waits_for_holds_and_checks(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    light = ledger.try_hold(1 * GIB)
    assert ledger.try_hold(12 * GIB) is None  # something is held
    ledger.release(light)
    check = ledger.try_check(4 * GIB)
    assert check is not None and ledger.held() == {}  # a check is counted up front, not held
    assert ledger.try_hold(12 * GIB) is None  # a cold-start check runs
    assert ledger.try_hold(3 * GIB) is not None  # a hold within the budget does not mind the check
    ledger.release(check)
    ledger.release(next(iter(ledger.held())))
    alone = ledger.try_hold(12 * GIB)
    assert alone is not None
    assert ledger.try_hold(1) is None  # nothing beside it
    assert ledger.try_check(4 * GIB) is not None  # this process's own check of it goes (it would wait for itself)


def _other_process(tmp_path, code: str) -> subprocess.Popen:
    """A process that makes one ledger entry in `tmp_path` (budget 10 GiB), says so, and keeps it until stdin
    closes."""
    script = ("import sys; from pathlib import Path\n"
              "from adaln_bench.harness.processes.memory_ledger import MemoryLedger\n"
              f"ledger = MemoryLedger(Path({str(tmp_path)!r}), 'gpu0', 10 << 30)\n"
              f"{code}\n"
              "print('ready', flush=True); sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _end(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=60)


def test_no_other_childs_check_starts_beside_a_reservation_past_the_budget(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    other = _other_process(tmp_path, "assert ledger.try_hold(12 << 30) is not None")
    try:
        assert ledger.try_check(4 * GIB) is None
    finally:
        _end(other)
    assert ledger.try_check(4 * GIB) is not None  # its process ended: the entry is dropped


def test_an_aged_want_past_the_budget_stops_other_childs_checks(tmp_path):
    clock = [1000.0]
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB, now=lambda: clock[0])
    # Another child's want of 12 GiB, made at 1000 s on this test's clock.
    other = _other_process(tmp_path, "ledger.want(12 << 30, since=1000.0)")
    try:
        assert ledger.try_check(1 * GIB) is not None  # fresh: checks still start
        clock[0] += WANT_AGING_S
        assert ledger.try_check(1 * GIB) is None  # aged: the checks drain so that it can run alone
    finally:
        _end(other)
    own = ledger.want(12 * GIB, since=0.0)
    assert ledger.try_check(1 * GIB) is not None  # never against its own child's checks
    ledger.release(own)


def test_live_tensor_groups_name_what_holds_memory():
    # What a child's log lists when memory outlives an operator: live tensors grouped by shape and dtype, largest
    # first (on the GPU its CUDA tensors; here, the CPU's).
    import torch

    from adaln_bench.harness.processes.child_measure import live_tensor_groups

    held = [torch.zeros(1031, 2053, dtype=torch.float64) for _ in range(2)]  # 2 x 16.9 MB
    groups = live_tensor_groups(keep=lambda t: t.device.type == "cpu" and t.numel() > 1_000_000, top=100)
    assert ((1031, 2053), "float64", 2, 2 * 1031 * 2053 * 8) in groups
    assert [g[3] for g in groups] == sorted((g[3] for g in groups), reverse=True)
    del held


def test_a_latency_only_child_reserves_for_the_timed_sizes_alone():
    # A --repeat process runs no probe and no accuracy: its reservation is that of the largest timed size, not of
    # the probes' full batch, so that running beside repetition 1 it does not hold adaln_row_gather's 72 GiB.
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.harness.processes.memory_ledger import operator_reservation, rows_reservation
    from adaln_bench.ops.registry import get_operator

    op, h3 = get_operator("adaln_row_gather"), PRESETS["h3"]
    timed = max(op.family.plan(False).accuracy_sizes)
    assert operator_reservation(op, h3, False, latency_only=True) == rows_reservation(op, h3, timed)
    assert operator_reservation(op, h3, False, latency_only=True) * 3 < operator_reservation(op, h3, False)
