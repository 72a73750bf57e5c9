"""A CPU model of the draw (numpy): Philox4x32-10 written from its definition, PyTorch's layout (plan.py) and
curand's conversions. For tests and the GPU check, at small sizes.

rand is modelled exactly (curand's uniform is float(word) * 2^-32 + 2^-33 in float32, the product exact, then 1.0
mapped to 0.0 as PyTorch does), so it can be compared bit for bit. randn is modelled to about 1e-6: curand's
Box-Muller uses the GPU's logf and its hardware sine/cosine (__sincosf), which this model replaces with float64
math; it checks the layout (which word lands where), not the last bits.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from adaln_bench.draws.plan import Launch, plan_draw

M0, M1 = 0xD2511F53, 0xCD9E8D57  # Philox4x32 multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
MASK32 = 0xFFFFFFFF
TWO_POW_M32 = np.float32(2.0**-32)
HALF_STEP = np.float32(2.0**-33)
TWO_PI_STEP = np.float32(np.float32(2.3283064e-10) * np.float32(6.2831855))  # curand's 2^-32 * 2pi, in float

# words(subsequences, counters) -> uint32 array (4, n): the four words Philox gives each (subsequence, counter)
WordsFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def philox4x32_10(ctr: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32 with 10 rounds on counters ctr (uint32, shape (4, n)) under one 64-bit key (lo, hi)."""
    c = [np.asarray(x, dtype=np.uint64) for x in ctr]
    k0, k1 = np.uint64(key[0] & MASK32), np.uint64(key[1] & MASK32)
    m0, m1, mask = np.uint64(M0), np.uint64(M1), np.uint64(MASK32)
    for rnd in range(10):
        if rnd:
            k0, k1 = (k0 + np.uint64(W0)) & mask, (k1 + np.uint64(W1)) & mask
        p0 = m0 * c[0]
        p1 = m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & mask]
    return np.stack(c).astype(np.uint32)


def philox_words(seed: int) -> WordsFn:
    """curand's Philox stream for `seed`: counter = (counter step as 64 bits, subsequence as 64 bits)."""
    key = (seed & MASK32, (seed >> 32) & MASK32)

    def words(subseq: np.ndarray, counter: np.ndarray) -> np.ndarray:
        subseq = np.asarray(subseq, dtype=np.uint64)
        counter = np.asarray(counter, dtype=np.uint64)
        m = np.uint64(MASK32)
        ctr = np.stack([counter & m, counter >> np.uint64(32), subseq & m, subseq >> np.uint64(32)])
        return philox4x32_10(ctr, key)

    return words


def round_words(launch: Launch, r: int, words: WordsFn) -> np.ndarray:
    """uint32 words (4, G) of round r of one launch: word w of thread g (one curand*4 call each)."""
    threads = np.arange(launch.threads, dtype=np.uint64)
    counters = np.full(launch.threads, launch.offset // 4 + r, dtype=np.uint64)
    return words(threads, counters)


def launch_words(launch: Launch, words: WordsFn) -> np.ndarray:
    """uint32 words of one launch in flat order: element r*4G + w*G + g is word w of thread g's round r."""
    out = np.empty(launch.rounds * 4 * launch.threads, dtype=np.uint32)
    span = 4 * launch.threads
    for r in range(launch.rounds):  # round by round: memory stays at a few G-sized arrays
        out[r * span: (r + 1) * span] = round_words(launch, r, words).reshape(-1)
    return out[: launch.numel]


def uniform_from_words(w: np.ndarray) -> np.ndarray:
    """torch.rand's float32 values: curand_uniform's (0, 1] with 1.0 mapped to 0.0."""
    u = w.astype(np.float32) * TWO_POW_M32 + HALF_STEP  # the product is exact, so fused or not is the same
    return np.where(u == np.float32(1.0), np.float32(0.0), u).astype(np.float32)


def normal_from_words(w: np.ndarray) -> np.ndarray:
    """torch.randn's values to ~1e-6: Box-Muller on word pairs (0, 1) and (2, 3) of each curand_normal4 call.

    w must be in the launch's word order grouped per call: shape (..., 4)."""
    u = w[..., 0::2].astype(np.float32) * TWO_POW_M32 + HALF_STEP
    # v = fma(float(word), 2pi * 2^-32, pi * 2^-32) as nvcc contracts it: the float32 x float32 product is exact
    # in float64, so one rounding to float32 after the add models the fused operation
    v = (w[..., 1::2].astype(np.float32).astype(np.float64) * np.float64(TWO_PI_STEP)
         + np.float64(TWO_PI_STEP / np.float32(2))).astype(np.float32).astype(np.float64)
    s = np.sqrt(-2.0 * np.log(u.astype(np.float64)))
    out = np.empty(w.shape, dtype=np.float64)
    out[..., 0::2] = s * np.sin(v)
    out[..., 1::2] = s * np.cos(v)
    return out.astype(np.float32)


def launch_values(kind: str, launch: Launch, seed: int, words: Optional[WordsFn] = None) -> np.ndarray:
    """The float32 values one launch writes (kind "randn" or "rand"), in flat order."""
    if kind not in ("randn", "rand"):
        raise ValueError(f"kind must be randn or rand, got {kind!r}")
    words = words or philox_words(seed)
    if kind == "rand":
        return uniform_from_words(launch_words(launch, words))
    span = 4 * launch.threads
    out = np.empty(launch.rounds * span, dtype=np.float32)
    for r in range(launch.rounds):
        w = round_words(launch, r, words).T  # (G, 4): one curand_normal4 call per thread
        out[r * span: (r + 1) * span] = normal_from_words(w).T.reshape(-1)
    return out[: launch.numel]


def emulate(kind: str, numel: int, seed: int, offset: int, sms: int, threads_per_sm: int = 2048,
            words: Optional[WordsFn] = None) -> tuple[np.ndarray, int]:
    """The flat float32 draw (kind "randn" or "rand") and the generator's offset after it.

    words replaces Philox (tests of the layout use a fake that tags each word with where it came from)."""
    launches, after = plan_draw(numel, offset, sms, threads_per_sm)
    out = np.empty(numel, dtype=np.float32)
    for la in launches:
        out[la.start: la.start + la.numel] = launch_values(kind, la, seed, words)
    return out, after
