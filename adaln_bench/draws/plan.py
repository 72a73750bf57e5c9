"""How PyTorch's CUDA generator lays a seeded float32 randn/rand draw out over Philox streams (pure arithmetic).

Facts, read in PyTorch's source (aten/src/ATen/native/cuda/DistributionTemplates.h: calc_execution_policy,
distribution_elementwise_grid_stride_kernel, distribution_nullary_kernel; CUDAGeneratorImpl.cpp:
philox_cuda_state; TensorIterator.cpp: can_use_32bit_indexing, split, SplitUntil32Bit) at a recent 2.x snapshot;
tests/gpu/test_draws_gpu.py and tools/draws_check.py check them against the torch installed on a GPU:

* One launch: 256-thread blocks, ``blocks = min(ceil(numel / 256), sms * (threads_per_sm // 256))`` where
  threads_per_sm is the device's maxThreadsPerMultiProcessor (2048 on A100, H100, H200, B200). Call
  G = 256 * blocks the threads launched.
* Thread g (the global thread id) draws from Philox4x32-10 subsequence g, starting at the generator's offset;
  each loop round calls curand_normal4/curand_uniform4 once (four 32-bit words, one Philox counter step) and
  writes word w of round r to flat index r*4G + w*G + g (when that index is < numel).
* The generator hands the launch its current offset and advances it by
  ``increment = (floor((numel - 1) / (4G)) + 1) * 4`` (rounds per thread x 4, the most words one curand call
  uses; already a multiple of 4, which the generator rounds up to anyway).
* A tensor too large for 32-bit indexing (a float32 contiguous tensor of more than 536,870,912 elements: the
  last element's byte offset plus one must fit an int32) is first charged one increment for its whole numel,
  then split, depth first, into halves (the first floor(n/2) elements, then the rest) until each part fits,
  and each part is its own launch with its own increment, in that order.
"""
from __future__ import annotations

from dataclasses import dataclass

BLOCK_THREADS = 256
CURAND_WORDS_PER_CALL = 4  # curand4-based calls use 4 words: the offset step per round
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a draw: elements [start, start + numel) of the flat tensor."""

    start: int
    numel: int
    blocks: int
    offset: int  # the generator's Philox offset this launch starts from (32-bit words into each subsequence)
    increment: int  # what the launch advanced the generator's offset by

    @property
    def threads(self) -> int:
        return self.blocks * BLOCK_THREADS

    @property
    def rounds(self) -> int:
        return self.increment // CURAND_WORDS_PER_CALL


def max_blocks(sms: int, threads_per_sm: int = 2048) -> int:
    """The grid cap: blocks_per_sm = threads_per_sm // 256 resident blocks on each SM."""
    if sms < 1 or threads_per_sm < BLOCK_THREADS:
        raise ValueError(f"need sms >= 1 and threads_per_sm >= {BLOCK_THREADS}, got {sms}, {threads_per_sm}")
    return sms * (threads_per_sm // BLOCK_THREADS)


def launch_blocks(numel: int, sms: int, threads_per_sm: int = 2048) -> int:
    """Blocks of 256 threads one launch of numel elements uses."""
    if numel < 1:
        raise ValueError("numel must be >= 1")
    return min(-(-numel // BLOCK_THREADS), max_blocks(sms, threads_per_sm))


def offset_increment(numel: int, blocks: int) -> int:
    """How far one launch advances the generator's offset (a multiple of 4)."""
    g = blocks * BLOCK_THREADS
    inc = ((numel - 1) // (g * CURAND_WORDS_PER_CALL) + 1) * CURAND_WORDS_PER_CALL
    return -(-inc // 4) * 4  # the generator rounds up to a multiple of 4 (a no-op here)


def fits_32bit(numel: int, elem_bytes: int = 4) -> bool:
    """TensorIterator's can_use_32bit_indexing for a contiguous 1-D tensor."""
    return numel <= INT32_MAX and 1 + (numel - 1) * elem_bytes <= INT32_MAX


def split_32bit(numel: int, elem_bytes: int = 4) -> list[tuple[int, int]]:
    """(start, numel) of each part the draw is launched on, in launch order (one part when it fits)."""
    parts: list[tuple[int, int]] = []
    stack = [(0, numel)]
    while stack:
        start, n = stack.pop()
        if fits_32bit(n, elem_bytes):
            parts.append((start, n))
            continue
        first = n // 2
        stack.append((start + first, n - first))  # popped after the first half and everything it splits into
        stack.append((start, first))
    return parts


def plan_draw(numel: int, offset: int, sms: int, threads_per_sm: int = 2048,
              elem_bytes: int = 4) -> tuple[list[Launch], int]:
    """The launches of one draw of numel elements from a generator at `offset`, and the offset after it."""
    if numel < 0:
        raise ValueError("numel must be >= 0")
    if offset < 0 or offset % 4:
        raise ValueError(f"a Philox offset is a non-negative multiple of 4, got {offset}")
    if numel == 0:
        return [], offset  # PyTorch launches nothing and takes no offset
    parts = split_32bit(numel, elem_bytes)
    if len(parts) > 1:  # the whole tensor's increment is taken before it is split, then each part's
        offset += offset_increment(numel, launch_blocks(numel, sms, threads_per_sm))
    launches = []
    for start, n in parts:
        blocks = launch_blocks(n, sms, threads_per_sm)
        inc = offset_increment(n, blocks)
        launches.append(Launch(start, n, blocks, offset, inc))
        offset += inc
    return launches, offset


def element_source(index: int, launch: Launch) -> tuple[int, int, int]:
    """(subsequence, Philox counter step within it, word 0..3) that flat element `index` of the draw comes from.

    The counter step counts from the start of the subsequence: offset // 4 + round."""
    i = index - launch.start
    if not 0 <= i < launch.numel:
        raise IndexError(f"element {index} is not in launch [{launch.start}, {launch.start + launch.numel})")
    g = launch.threads
    r, rest = divmod(i, CURAND_WORDS_PER_CALL * g)
    w, thread = divmod(rest, g)
    return thread, launch.offset // 4 + r, w


def first_difference(numel: int, sms_a: int, sms_b: int, threads_per_sm: int = 2048) -> int | None:
    """The first flat index at which a generator's first draw of numel elements differs between two SM counts
    (None: the two draw the same tensor). Only for a draw of one launch (it fits 32-bit indexing)."""
    if not fits_32bit(numel):
        raise ValueError(f"{numel} elements are split into several launches; compare their plans instead")
    a = launch_blocks(numel, sms_a, threads_per_sm)
    b = launch_blocks(numel, sms_b, threads_per_sm)
    if a == b:
        return None
    return min(a, b) * BLOCK_THREADS  # below it both map element i to (thread i, round 0, word 0)
