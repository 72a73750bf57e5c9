"""A child takes the first operator of its list that no part claimed and whose memory fits now: a lighter one
where the heaviest does not fit beside the others' holds, a wait (with a want) only where nothing left fits."""
from adaln_bench.harness.processes.claims import claim, claimed_by
from adaln_bench.harness.processes.memory_ledger import MemoryLedger
from adaln_bench.harness.processes.next_operator import OperatorQueue
from adaln_bench.harness.processes.protocol import OpWork

GIB = 1 << 30
SIZES = {"heavy": 8 * GIB, "middle": 5 * GIB, "light": 1 * GIB}


def _work(*ops):
    return [OpWork(op=op, candidates=["x"]) for op in ops]


def _queue(tmp_path, ledger, claimant="plain.0", sleep=None):
    claims = tmp_path / "claims"
    claims.mkdir(exist_ok=True)
    return OperatorQueue(_work("heavy", "middle", "light"), SIZES.__getitem__, ledger, str(claims), claimant,
                         sleep=sleep or (lambda s: None))


def test_the_heaviest_first_where_it_fits(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    queue = _queue(tmp_path, ledger)
    taken = queue.take()
    assert taken.work.op == "heavy" and list(ledger.held().values()) == [8 * GIB]
    queue.done(taken)
    assert ledger.held() == {}


def test_a_lighter_operator_where_the_heaviest_does_not_fit_beside_the_others(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    other = ledger.try_hold(4 * GIB)  # another child's operator: 4 + 8 > 10, 4 + 5 <= 10
    queue = _queue(tmp_path, ledger)
    first = queue.take()
    assert first.work.op == "middle"
    assert claimed_by(tmp_path / "claims", "plain.0") == {"middle"}
    second = queue.take()  # 4 + 5 + 1 <= 10; heavy still does not fit
    assert second.work.op == "light"
    queue.done(first)
    queue.done(second)
    ledger.release(other)
    third = queue.take()
    assert third.work.op == "heavy" and third.waited_s >= 0
    queue.done(third)
    assert queue.take() is None


def test_where_nothing_left_fits_it_waits_with_a_want_then_takes_it(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    other = ledger.try_hold(7 * GIB)
    seen = []

    def sleep(_s):  # while the child waits: its want is in the ledger; then the other child ends
        entries = ledger._locked
        with entries() as e:
            seen.append(sorted(v[1] for v in e.values() if len(v) == 3))
        ledger.release(other)

    queue = OperatorQueue(_work("heavy", "middle"), SIZES.__getitem__, ledger, None, "plain.0", sleep=sleep)
    taken = queue.take()
    assert taken.work.op == "heavy"
    assert seen == [[8 * GIB]]  # one wait, wanting the heaviest
    with ledger._locked() as e:  # the want is gone once it holds
        assert [len(v) for v in e.values()] == [2]


def test_operators_another_part_claimed_are_skipped_and_a_lost_claim_gives_the_memory_back(tmp_path):
    ledger = MemoryLedger(tmp_path, "gpu0", 10 * GIB)
    queue = _queue(tmp_path, ledger, claimant="plain.1")
    assert claim(str(tmp_path / "claims"), "heavy", "plain.0")
    taken = queue.take()
    assert taken.work.op == "middle"
    queue.done(taken)

    # A claim made between the check and the claim: the reservation goes back, the next operator is taken.
    ledger2 = MemoryLedger(tmp_path, "gpu1", 10 * GIB)
    racing = OperatorQueue(_work("a", "b"), lambda op: GIB, ledger2, str(tmp_path / "claims"), "plain.1")
    real_try = racing._claimed_elsewhere
    racing._claimed_elsewhere = lambda op: False if op == "a" else real_try(op)
    assert claim(str(tmp_path / "claims"), "a", "plain.0")
    taken = racing.take()
    assert taken.work.op == "b" and list(ledger2.held().values()) == [GIB]
