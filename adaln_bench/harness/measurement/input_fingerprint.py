"""A fingerprint of the seeded inputs (docs/spec.md#3-inputs) as a mode's child generates them.

Modes may run under different environments, hence different torch releases. Their outputs and the
train–infer consistency matrix compare only if every child drew bitwise the same inputs, and torch does
not promise that its seeded generators give the same stream across releases (docs/environments.md).
So each child hashes what it drew, and the report flags a mode whose inputs differ.
"""
from __future__ import annotations

import hashlib

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.fingerprint import host_bytes
from adaln_bench.ops.draws import draw_rows, draw_upstream
from adaln_bench.ops.spec import Operator
from adaln_bench.datamodel.schema import InputFingerprint
from adaln_bench.shape import Shape


def tensor_sha256(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes."""
    digest = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    digest.update(host_bytes(t))
    return digest.hexdigest()


def input_fingerprint(op: Operator, shape: Shape, params: dict[str, torch.Tensor],
                      device: torch.device) -> InputFingerprint:
    """Every input of the fingerprint run (seed 3, 257 rows), the upstream gradients and the sweep's first
    permutation. A tensor's hash is `<name>_sha256` (the projection's W and b: weight_sha256, bias_sha256)."""
    seed, rows = P.FINGERPRINT_SEED, P.FINGERPRINT_ROWS
    drawn = {**draw_rows(op, shape, seed, rows, device), **params}
    hashes = {f"{t.key}_sha256": tensor_sha256(drawn[t.name]) for t in op.tensors}
    # The upstream gradients have the outputs' shapes and dtypes (docs/spec.md#3-inputs).
    upstream = draw_upstream([o.shape(shape, rows) for o in op.outputs], [o.dtype for o in op.outputs], seed, device)
    up = (tensor_sha256(upstream[0]) if len(upstream) == 1 else
          hashlib.sha256("".join(tensor_sha256(u) for u in upstream).encode()).hexdigest())
    permutation = torch.randperm(rows, generator=torch.Generator().manual_seed(seed))
    return InputFingerprint(seed=seed, rows=rows, **hashes, upstream_sha256=up,
                            permutation_sha256=tensor_sha256(permutation), draw_geometry=geometry_record(device))


def geometry_record(device: torch.device):
    """The geometry this process's CUDA draws follow; None on a CPU (its draws depend on no GPU) or natively."""
    from adaln_bench.ops.draws import current_geometry
    from adaln_bench.datamodel.schema import DrawGeometryRecord

    geom = current_geometry()
    if geom is None or torch.device(device).type != "cuda":
        return None
    return DrawGeometryRecord(name=geom.name, sms=geom.sms)
