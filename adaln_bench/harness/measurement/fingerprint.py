"""The fingerprint of a candidate: SHA-256 of its outputs and row gradients on one fixed batch.

Two (mode, candidate) pairs with the same fingerprint compute bitwise the same numbers: the train–infer
consistency matrix of `adaln-bench report` groups them by it (docs/spec.md#9-the-report). A row gradient's
hash is `d_<input>_sha256` (the projection's: `d_temb_sha256`).
"""
from __future__ import annotations

import ctypes
import hashlib
from typing import Sequence

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.runs import Runner
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.datamodel.schema import Fingerprint


def host_bytes(t: torch.Tensor) -> bytes:
    """A tensor's bytes, read straight from host memory: numpy is not a dependency."""
    host = t.detach().contiguous().cpu()
    return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())


def sha256(tensors: torch.Tensor | Sequence[torch.Tensor]) -> str:
    """Of one tensor's bytes, or of several tensors' bytes one after the other."""
    digest = hashlib.sha256()
    for t in (tensors,) if isinstance(tensors, torch.Tensor) else tensors:
        digest.update(host_bytes(t))
    return digest.hexdigest()


def fingerprint(run: Runner, subject: Subject) -> Fingerprint:
    out = run(P.FINGERPRINT_SEED, P.FINGERPRINT_ROWS, range(P.FINGERPRINT_ROWS))
    row_inputs = [t.name for t in subject.op.tensors if t.role == "row" and t.name in subject.op.grads]
    grads = dict(zip(subject.row_grads, out.row_grads or ()))
    hashes = {f"d_{name}_sha256": sha256(grads[name]) if name in grads else None for name in row_inputs}
    return Fingerprint(rows=P.FINGERPRINT_ROWS, seed=P.FINGERPRINT_SEED, output_sha256=sha256(out.outs), **hashes)
