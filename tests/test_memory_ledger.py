"""The GPU memory ledger: reservations within the budget go at once, one past it waits for a release, an empty
ledger lets any one through, a dead process's reservation is dropped, and two children whose operators do not
fit together measure them one after the other."""
import json
import subprocess
import sys
import threading
import time

from adaln_bench.harness.processes.memory_ledger import MemoryLedger, NoLedger, ledger_for

GIB = 1 << 30


def test_reservations_within_the_budget_are_granted_at_once_and_released(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    with ledger.reserve(4 * GIB) as waited_a, ledger.reserve(6 * GIB) as waited_b:
        assert waited_a < 0.5 and waited_b < 0.5
        assert sorted(ledger.held().values()) == [4 * GIB, 6 * GIB]
    assert ledger.held() == {}


def test_a_reservation_past_the_budget_waits_for_a_release(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB, poll_s=0.01)
    waited = []

    def second() -> None:
        with ledger.reserve(6 * GIB) as w:
            waited.append(w)

    with ledger.reserve(6 * GIB):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.4)
        assert waited == []  # still waiting: 6 + 6 > 10
    thread.join(timeout=10)
    assert len(waited) == 1 and waited[0] >= 0.35


def test_an_empty_ledger_lets_any_reservation_through(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 1 * GIB)
    with ledger.reserve(50 * GIB) as waited:
        assert waited < 0.5
        assert list(ledger.held().values()) == [50 * GIB]


def test_a_dead_process_reservation_is_dropped(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=60)
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    ledger.path.write_text(json.dumps({f"{gone.pid}:dead": [gone.pid, 10 * GIB]}))
    with ledger.reserve(8 * GIB) as waited:
        assert waited < 0.5
        assert list(ledger.held().values()) == [8 * GIB]


def test_no_ledger_without_a_folder_key_or_budget(tmp_path):
    assert isinstance(ledger_for(None, "gpu0", GIB), NoLedger)
    assert isinstance(ledger_for(str(tmp_path), "gpu0", None), NoLedger)
    assert isinstance(ledger_for(str(tmp_path), "gpu0", GIB), MemoryLedger)
    with NoLedger().reserve(GIB) as waited:
        assert waited == 0.0


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
    gpu0, gpu1 = MemoryLedger(tmp_path, "gpu0", 10 * GIB, poll_s=0.01), MemoryLedger(tmp_path, "gpu1", 10 * GIB)
    with gpu0.reserve(8 * GIB), gpu1.reserve(8 * GIB) as waited:
        assert waited < 0.5
        assert list(gpu0.held().values()) == [8 * GIB] and list(gpu1.held().values()) == [8 * GIB]
