"""The probes' comparisons queued on the device and read at once give same_rows's answers, in order."""
import math

import pytest
import torch

from adaln_bench.harness.measurement.runs import Differences, same_rows
from adaln_bench.harness.measurement.workload import row_index


def _cases():
    a = torch.tensor([[1.0, 2.0], [3.0, math.nan], [0.0, 5.0]])
    b = a.clone()
    b[2, 0] = -0.0  # equal to 0.0 as torch.equal sees it
    c = a.clone()
    c[0, 1] = 2.0000002
    g = torch.arange(6.0).reshape(3, 2)
    return [
        ((a,), 0, (b,), 0),                    # same row
        ((a,), 1, (b,), 1),                    # NaN: differs, as torch.equal says
        ((a,), 2, (b,), 2),                    # 0.0 against -0.0: equal
        ((a,), 0, (c,), 0),                    # one element off by an ulp or so
        ((a, g), slice(0, 2), (b, g), slice(0, 2)),
        ((a, g), slice(0, 1), (b, g), slice(0, 2)),  # other shapes: differ
        ((a, g), 0, (b, g.double()), 0),              # other dtypes: differ
        (None, 0, None, 0),                    # neither has row gradients: equal
        ((g,), 0, None, 0),                    # one has them: differ
    ]


def test_the_answers_are_same_rows_negated_in_the_order_asked():
    diffs = Differences()
    for a, ia, b, ib in _cases():
        diffs.add(a, ia, b, ib)
    diffs.constant(True)
    got = diffs.read()
    assert got == [False, True, False, True, True, True, True, False, True, True]
    # Where torch.equal can answer (the same shapes and dtypes), it answers the same.
    for (a, ia, b, ib), differ in zip(_cases(), got):
        if a is None or b is None or all(x[ia].shape == y[ib].shape and x[ia].dtype == y[ib].dtype
                                         for x, y in zip(a, b)):
            assert differ is (not same_rows(a, ia, b, ib))


def test_nothing_asked_reads_nothing():
    assert Differences().read() == []


@pytest.mark.parametrize("rows", [range(0, 5), range(3, 9), [4, 0, 2], [7]])
def test_a_row_index_holds_the_rows(rows):
    index = row_index(rows, torch.device("cpu"))
    assert index.dtype == torch.long and index.tolist() == list(rows)
