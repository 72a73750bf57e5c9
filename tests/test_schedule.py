"""How much runs side by side on one GPU: memory and cores cap it, --serial and an unknown free memory make it one."""
from adaln_bench.harness.assembly import schedule as S
from adaln_bench.harness.assembly.schedule import GIB, plan, slots_of


def test_a_roomy_gpu_gets_the_most_children_and_the_largest_pool():
    got = plan(free_bytes=130 * GIB, cores_per_gpu=16, child_bytes=10 * GIB, cold_start_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool, got.serial) == (S.MAX_CHILDREN_PER_GPU,
                                                                       S.MAX_COLD_START_POOL, False)
    assert "130.0 GiB free" in got.why


def test_memory_caps_the_children():
    # 0.8 x 40 GiB = 32 GiB; a child with a pool of 3 needs 13 GiB: 2 fit; with a pool of 1, 11 GiB: 2 fit.
    got = plan(free_bytes=40 * GIB, cores_per_gpu=16, child_bytes=10 * GIB, cold_start_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (2, 3)
    # 0.8 x 14 GiB = 11.2 GiB: one child, and only one cold-start check beside it fits.
    got = plan(free_bytes=14 * GIB, cores_per_gpu=16, child_bytes=10 * GIB, cold_start_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (1, 1)


def test_nothing_fits_means_one_at_a_time_and_says_so():
    got = plan(free_bytes=8 * GIB, cores_per_gpu=16, child_bytes=10 * GIB, cold_start_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool, got.serial) == (1, 1, False)
    assert got.why.startswith("one child per GPU, one cold-start check at a time")


def test_cores_cap_the_processes():
    # Four cores: a child and its pool are 1 + pool processes; the most processes within four is 2 x (1 + 1)
    # or 1 x (1 + 3), and more children win a tie.
    got = plan(free_bytes=130 * GIB, cores_per_gpu=4, child_bytes=1 * GIB, cold_start_bytes=1 * GIB)
    assert (got.children_per_gpu, got.cold_start_pool) == (2, 1)
    got = plan(free_bytes=130 * GIB, cores_per_gpu=1, child_bytes=1 * GIB, cold_start_bytes=1 * GIB)
    assert got.children_per_gpu * (1 + got.cold_start_pool) <= 2  # never below one child with one check


def test_serial_and_unknown_memory_run_one_child():
    assert plan(130 * GIB, 16, GIB, GIB, serial=True) == S.SERIAL
    assert S.SERIAL.serial and (S.SERIAL.children_per_gpu, S.SERIAL.cold_start_pool) == (1, 1)
    unknown = plan(None, 16, GIB, GIB)
    assert (unknown.children_per_gpu, unknown.cold_start_pool, unknown.serial) == (1, 1, False)
    assert "unknown" in unknown.why


def test_slots_repeat_each_gpu_interleaved():
    four = S.Schedule(3, 2, False, "")
    assert slots_of([0, 1], four) == [0, 1, 0, 1, 0, 1]
    assert slots_of([None], four) == [None, None, None]


def test_estimates_come_from_the_largest_operator_step():
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.ops.registry import get_operator

    shape = PRESETS["h3"]
    small, big = get_operator("timestep_sinusoid"), get_operator("adaln_row_gather")
    both = S.child_bytes([small, big], shape, quick=False)
    assert both == S.child_bytes([big], shape, quick=False) > S.child_bytes([small], shape, quick=False)
    tokens = S.largest_step_tokens(big, quick=False)
    assert both == S.CONTEXT_BYTES + S.STEP_COPIES * int(big.cost(shape, tokens).step_bytes)
    assert S.cold_start_bytes([big], shape) < both


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
