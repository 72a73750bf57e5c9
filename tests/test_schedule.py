"""How much runs side by side on one GPU: memory and cores cap it, --serial and an unknown free memory make it one."""
from adaln_bench.harness.assembly import schedule as S
from adaln_bench.harness.assembly.schedule import GIB, plan, slots_of


def test_a_roomy_gpu_gets_the_most_children_and_the_largest_pool():
    # Sixteen cores: 4 x (1 + 3) processes beat 5 x (1 + 2) and 6 x (1 + 1), the most children allowed.
    got = plan(free_bytes=130 * GIB, cores_per_gpu=16, largest_step_bytes=10 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool, got.serial) == (4, S.MAX_COLD_START_POOL, False)
    assert "130.0 GiB free" in got.why
    # 0.8 x 130 GiB, less 4 x (1 + 3) contexts of 1 GiB: the steps' budget
    assert got.memory_budget_bytes == int(0.8 * 130 * GIB - 16 * S.CONTEXT_BYTES)


def test_memory_caps_the_children():
    # 0.8 x 40 GiB = 32 GiB; the largest step keeps 22 GiB: 10 contexts, so 2 children with a pool of 3 (8) or
    # 3 with a pool of 2 (9) or 5 with a pool of 1 (10): the most processes is 5 x 2.
    got = plan(free_bytes=40 * GIB, cores_per_gpu=16, largest_step_bytes=22 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (5, 1)
    assert got.memory_budget_bytes == int(32 * GIB - 10 * S.CONTEXT_BYTES)
    # 0.8 x 14 GiB = 11.2 GiB, the largest step keeps 9: two contexts fit, one child and one check.
    got = plan(free_bytes=14 * GIB, cores_per_gpu=16, largest_step_bytes=9 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (1, 1)


def test_nothing_fits_means_one_at_a_time_and_says_so():
    got = plan(free_bytes=8 * GIB, cores_per_gpu=16, largest_step_bytes=10 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool, got.serial) == (1, 1, False)
    assert got.why.startswith("one child per GPU, one cold-start check at a time")
    assert got.memory_budget_bytes is None  # one child: nothing to share, no ledger


def test_cores_cap_the_processes():
    # Four cores: a child and its pool are 1 + pool processes; the most processes within four is 2 x (1 + 1)
    # or 1 x (1 + 3), and more children win a tie.
    got = plan(free_bytes=130 * GIB, cores_per_gpu=4, largest_step_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (2, 1)
    got = plan(free_bytes=130 * GIB, cores_per_gpu=1, largest_step_bytes=1 * GIB)
    assert got.children_per_gpu * (1 + got.cold_start_pool) <= 2  # never below one child with one check


def test_serial_and_unknown_memory_run_one_child():
    assert plan(130 * GIB, 16, GIB, serial=True) == S.SERIAL
    assert S.SERIAL.serial and (S.SERIAL.children_per_gpu, S.SERIAL.cold_start_pool) == (1, 1)
    assert S.SERIAL.memory_budget_bytes is None
    unknown = plan(None, 16, GIB)
    assert (unknown.children_per_gpu, unknown.cold_start_pool, unknown.serial) == (1, 1, False)
    assert "unknown" in unknown.why and unknown.memory_budget_bytes is None


def test_the_h3_nightly_on_an_h200_runs_three_children_beside_the_largest_operator():
    # The whole family at h3: adaln_row_gather's probe batch decides the largest reservation, at its own measured
    # step_copies. On the 139.3 GiB an H200 had free, the room beside that reservation holds six children with
    # one check each (12 processes), more than three with two (9) or two with three (8).
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.ops.registry import all_operators, get_operator

    ops = [get_operator(name) for name in all_operators()]
    largest, check = S.largest_step_bytes(ops, PRESETS["h3"], quick=False), S.check_bytes(ops, PRESETS["h3"])
    row_gather = get_operator("adaln_row_gather")
    assert largest == S.operator_reservation(row_gather, PRESETS["h3"], quick=False)
    assert largest == int(row_gather.step_copies * row_gather.cost(PRESETS["h3"], 131072).step_bytes)
    got = plan(int(139.3 * GIB), 16, largest, check)
    assert (got.children_per_gpu, got.cold_start_pool) == (6, 1)
    assert got.memory_budget_bytes == int(0.8 * int(139.3 * GIB) - 6 * (2 * S.CONTEXT_BYTES + check))
    assert got.memory_budget_bytes >= largest
    assert not got.largest_alone
    # An 80 GB H100 (78.7 GiB free) cannot hold that reservation beside anything within 0.8 of its memory: it runs
    # alone, with six processes' contexts (6 GiB) beside it in the 6.2 GiB the free memory leaves; the other
    # operators reserve from what 0.8 of it leaves once 3 x (1 + 1) processes and 3 checks are counted.
    h100 = plan(int(78.7 * GIB), 16, largest, check)
    assert (h100.children_per_gpu, h100.cold_start_pool, h100.largest_alone) == (3, 1, True)
    assert h100.memory_budget_bytes == int(0.8 * int(78.7 * GIB) - 3 * (2 * S.CONTEXT_BYTES + check))
    assert h100.memory_budget_bytes < largest and "runs alone" in h100.why
    assert h100.as_record()["largest_alone"] is True
    # 76 GiB free leaves 3.5 GiB beside it: three contexts, one child with two checks.
    roomy = plan(76 * GIB, 16, largest, check)
    assert (roomy.children_per_gpu, roomy.cold_start_pool, roomy.largest_alone) == (1, 2, True)
    # Less than the reservation and a child's two contexts: one at a time, with no ledger.
    tight = plan(74 * GIB, 16, largest, check)
    assert (tight.children_per_gpu, tight.memory_budget_bytes, tight.largest_alone) == (1, None, False)


def test_checks_are_counted_up_front():
    got = plan(free_bytes=40 * GIB, cores_per_gpu=16, largest_step_bytes=10 * GIB, check_bytes=2 * GIB)
    # 32 GiB less 10: 22 GiB for children x ((1 + pool) contexts + pool checks): 5 x (2 + 2) = 20 at a pool of 1
    # (10 processes) beats 3 x (3 + 4) at 2 (9) and 2 x (4 + 6) at 3 (8).
    assert (got.children_per_gpu, got.cold_start_pool) == (5, 1)
    assert got.memory_budget_bytes == int(32 * GIB - 20 * GIB)


def test_slots_repeat_each_gpu_interleaved():
    four = S.Schedule(3, 2, False, "")
    assert slots_of([0, 1], four) == [0, 1, 0, 1, 0, 1]
    assert slots_of([None], four) == [None, None, None]


def test_estimates_come_from_the_largest_operator_step():
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.harness.processes.memory_ledger import STEP_COPIES, largest_step_tokens
    from adaln_bench.ops.registry import get_operator

    shape = PRESETS["h3"]
    small, big = get_operator("timestep_sinusoid"), get_operator("adaln_row_gather")
    both = S.largest_step_bytes([small, big], shape, quick=False)
    assert both == S.largest_step_bytes([big], shape, quick=False) > S.largest_step_bytes([small], shape, quick=False)
    tokens = largest_step_tokens(big, quick=False)
    assert both == int(big.step_copies * big.cost(shape, tokens).step_bytes)  # its own, measured, copies
    mlp = get_operator("timestep_mlp")  # the default copies
    assert mlp.step_copies is None
    assert S.largest_step_bytes([mlp], shape, quick=False) == int(
        STEP_COPIES * mlp.cost(shape, largest_step_tokens(mlp, quick=False)).step_bytes)


def test_a_serial_run_asks_the_gpu_nothing(monkeypatch):
    import adaln_bench.harness.processes.gpu_memory as memory

    monkeypatch.setattr(memory, "free_bytes_of", lambda gpus: (_ for _ in ()).throw(AssertionError("asked")))
    assert S.schedule_for_run([], None, False, [0], serial=True) == S.SERIAL


def test_the_tightest_gpu_decides(monkeypatch):
    import adaln_bench.harness.processes.gpu_memory as memory
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.ops.registry import get_operator

    monkeypatch.setattr(memory, "free_bytes_of", lambda gpus: [130 * GIB, 12 * GIB][: len(gpus)])
    op = get_operator("timestep_sinusoid")
    got = S.schedule_for_run([op], PRESETS["h3"], False, [0, 1], serial=False, cores=32)
    assert got.free_bytes == 12 * GIB
    monkeypatch.setattr(memory, "free_bytes_of", lambda gpus: [None] * len(gpus))
    assert S.schedule_for_run([op], PRESETS["h3"], False, [0], serial=False).children_per_gpu == 1


def test_the_slots_of_a_run():
    four = S.Schedule(2, 3, False, "")
    assert S.worker_slots("cuda", [0, 1], 7, four, serial=False) == [0, 1, 0, 1]
    assert S.worker_slots("cuda", [None], 7, S.SERIAL, serial=True) == [None]
    # A CPU run deals a mode's operators over two children, unless it is serial or has one operator.
    assert S.worker_slots("cpu", [None], 7, None, serial=False, cpus=16) == [None, None]
    assert S.worker_slots("cpu", [None], 7, None, serial=True, cpus=16) == [None]
    assert S.worker_slots("cpu", [None], 1, None, serial=False, cpus=16) == [None]
    assert S.worker_slots("cpu", [None], 7, None, serial=False, cpus=1) == [None]


def test_checks_run_beside_the_child_where_the_plan_counted_them():
    # The H100's h3 plan: the largest operator leaves room for 2 children with one check each; both the checks'
    # processes and memory are counted, so the children do not wait for them.
    got = plan(int(78.7 * GIB), 16, int(47.3 * GIB), int(4.4 * GIB))
    assert (got.children_per_gpu, got.cold_start_pool, got.checks_beside) == (2, 1, True)
    assert "beside its next candidates" in got.why and got.as_record()["cold_start_beside"] is True
    assert plan(130 * GIB, 16, 10 * GIB).checks_beside  # a pool of 3
    # One core: a pool of one is kept only so that a check can run at all; the child waits for it.
    one_core = plan(130 * GIB, 1, GIB)
    assert (one_core.children_per_gpu, one_core.cold_start_pool, one_core.checks_beside) == (1, 1, False)
    assert "the child waiting for each" in one_core.why
    # No plan, no room: every check one at a time, the child waiting.
    assert not S.SERIAL.checks_beside and not plan(None, 16, GIB).checks_beside
    assert not plan(8 * GIB, 16, 10 * GIB).checks_beside


def test_an_alone_plan_takes_fewer_processes_rather_than_falling_to_one_child():
    # 60 GiB alone on 78.7 GiB free: 6 x (1 + 1) contexts fit beside it, but 6 children with their checks would
    # leave the others' steps less than the next largest reservation (27.56 GiB, which would then run alone too).
    # The plan takes the most processes that leave that budget (5 x (1 + 1); 3 x (1 + 2) at a pool of two), not
    # one child at a time.
    got = plan(int(78.7 * GIB), 16, 60 * GIB, int(4.36 * GIB), next_step_bytes=int(27.56 * GIB))
    assert (got.children_per_gpu, got.cold_start_pool, got.largest_alone) == (5, 1, True)
    assert got.memory_budget_bytes >= int(27.56 * GIB)
    assert got.memory_budget_bytes == int(0.8 * int(78.7 * GIB) - 5 * (2 * S.CONTEXT_BYTES + int(4.36 * GIB)))
    # Without a next reservation to keep, any budget left will do: more processes.
    loose = plan(int(78.7 * GIB), 16, 60 * GIB, int(4.36 * GIB))
    assert loose.children_per_gpu * (1 + loose.cold_start_pool) > 10 and loose.memory_budget_bytes > 0


def test_the_second_largest_reservation_of_a_run():
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.ops.registry import get_operator

    ops = [get_operator(n) for n in ("adaln_row_gather", "gate_residual", "timestep_mlp")]
    h3 = PRESETS["h3"]
    assert S.second_step_bytes(ops, h3, quick=False) == S.operator_reservation(ops[1], h3, quick=False)
    assert S.second_step_bytes(ops[:1], h3, quick=False) == 0
