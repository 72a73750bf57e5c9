"""The fingerprint of a candidate: SHA-256 of its output and d_temb on one fixed batch.

Two (mode, candidate) pairs with the same fingerprint compute bitwise the same numbers: the train–infer
consistency matrix of `adaln-bench report` groups them by it (docs/spec.md#9-the-report).
"""
from __future__ import annotations

import ctypes
import hashlib

import torch

from adaln_bench.harness import plan as P
from adaln_bench.harness.probes import Runner
from adaln_bench.reports.schema import Fingerprint


def host_bytes(t: torch.Tensor) -> bytes:
    """A tensor's bytes, read straight from host memory: numpy is not a dependency."""
    host = t.detach().contiguous().cpu()
    return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())


def sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(host_bytes(t)).hexdigest()


def fingerprint(run: Runner) -> Fingerprint:
    out = run(P.FINGERPRINT_SEED, P.FINGERPRINT_ROWS, range(P.FINGERPRINT_ROWS))
    return Fingerprint(rows=P.FINGERPRINT_ROWS, seed=P.FINGERPRINT_SEED, output_sha256=sha256(out.out),
                       d_temb_sha256=None if out.d_temb is None else sha256(out.d_temb))
