"""A fingerprint of the seeded inputs (docs/spec.md#3-inputs) as a mode's child generates them.

Modes may run under different environments, hence different torch releases. Their outputs and the
train–infer consistency matrix compare only if every child drew bitwise the same inputs, and torch does
not promise that its seeded generators give the same stream across releases (docs/environments.md).
So each child hashes what it drew, and the report flags a mode whose inputs differ.
"""
from __future__ import annotations

import hashlib

import torch

from adaln_bench.harness import plan as P
from adaln_bench.harness.fingerprint import host_bytes
from adaln_bench.harness.inputs import Params, make_temb, make_upstream
from adaln_bench.harness.shapes import Shape
from adaln_bench.reports.schema import InputFingerprint


def tensor_sha256(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes."""
    digest = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    digest.update(host_bytes(t))
    return digest.hexdigest()


def input_fingerprint(shape: Shape, params: Params, device: torch.device) -> InputFingerprint:
    """The inputs of the fingerprint run (seed 3, 257 rows), W, b, and the sweep's first permutation."""
    seed, rows = P.FINGERPRINT_SEED, P.FINGERPRINT_ROWS
    temb = make_temb(rows, shape, seed, device)
    # The upstream gradient has the output's shape and dtype: (rows, N) in bfloat16 (docs/spec.md#3-inputs).
    upstream = make_upstream((rows, shape.out_features), torch.bfloat16, seed, device)
    permutation = torch.randperm(rows, generator=torch.Generator().manual_seed(seed))
    return InputFingerprint(seed=seed, rows=rows, temb_sha256=tensor_sha256(temb),
                            weight_sha256=tensor_sha256(params.weight), bias_sha256=tensor_sha256(params.bias),
                            upstream_sha256=tensor_sha256(upstream), permutation_sha256=tensor_sha256(permutation))
