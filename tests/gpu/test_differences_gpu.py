"""The probes' queued comparisons and asynchronous row indexes on a GPU give what the synchronous ones gave."""
import pytest
import torch

from adaln_bench.harness.measurement.runs import Differences, same_rows
from adaln_bench.harness.measurement.workload import row_index

pytestmark = pytest.mark.gpu


def test_a_row_index_on_the_gpu_holds_the_rows_and_picks_them():
    device = torch.device("cuda")
    x = torch.randn(64, 8, device=device)
    for rows in (range(0, 64), range(5, 9), [63, 0, 17, 17, 2]):
        index = row_index(rows, device)
        assert index.device.type == "cuda" and index.tolist() == list(rows)
        assert torch.equal(x.index_select(0, index), x[list(rows)])


def test_queued_comparisons_on_the_gpu_answer_as_same_rows():
    device = torch.device("cuda")
    a = torch.randn(32, 16, device=device)
    b = a.clone()
    b[7, 3] = b[7, 3].nextafter(torch.tensor(10.0, device=device))  # one ulp in one row
    diffs = Differences()
    expected = []
    for i in range(32):
        diffs.add((a,), i, (b,), i)
        expected.append(not same_rows((a,), i, (b,), i))
    assert diffs.read() == expected and expected.count(True) == 1 and expected[7]
