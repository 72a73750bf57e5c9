"""A CUDA library's embedded GPU code: the fatbins of an ELF's .nv_fatbin section, and keeping one architecture.

Transformer Engine's core library (`libtransformer_engine.so`, 343 MB) holds one cubin per kernel file for
each of ten architectures; nvcc compressed them already, so xz gains little. The GPU machine is an H200
(sm_90), and the CUDA driver loads only the cubin that matches the device. `reduce_to_arches` keeps the
file's layout exactly: every ELF byte, every fatbin header and every entry header stays as it is, the
payloads of the kept architectures stay byte for byte, and only the payloads of the other architectures'
entries are overwritten with zeros. The zeros then compress to nothing.

Layout read here (little-endian, as nvcc writes it and as the .nv_fatbin of the real library shows):
- a fatbin: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 size of the entries that follow;
  fatbins follow each other in the section, with zero padding between them;
- an entry: u16 kind (1 PTX, 2 ELF cubin), u16 version, u32 header size, u64 payload size, ..., u32
  architecture at byte 28 (90 for sm_90 and sm_90a alike), ..., u64 flags at byte 40; the payload
  follows the entry's header and the next entry follows the payload.

Standard library only.
"""
from __future__ import annotations

import hashlib
import struct
from collections import Counter
from dataclasses import dataclass, field

FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, entries' size
ENTRY_HEAD = struct.Struct("<HHIQ")  # kind, version, header size, payload size
ENTRY_ARCH_OFFSET = 28
ENTRY_FLAGS_OFFSET = 40
ENTRY_MIN_HEADER = 48  # up to and including the flags
KIND_PTX, KIND_ELF = 1, 2
SECTION = ".nv_fatbin"

METHOD = ("payloads of .nv_fatbin entries whose architecture is not kept overwritten with zeros in place; "
          "every ELF byte, fatbin header and entry header unchanged; kept entries' payloads byte for byte "
          "(tools/slim/fatbin.py reduce_to_arches)")


@dataclass(frozen=True)
class Entry:
    fatbin: int  # index of the fatbin in the section
    offset: int  # of the entry header, in the file
    header_size: int
    payload_offset: int  # in the file
    payload_size: int
    kind: int
    arch: int
    flags: int

    @property
    def kind_name(self) -> str:
        return {KIND_PTX: "ptx", KIND_ELF: "cubin"}.get(self.kind, f"kind{self.kind}")


@dataclass
class Reduction:
    """What `reduce_to_arches` did, for the staging's manifest."""

    keep: list[int]
    section_offset: int
    section_size: int
    fatbins: int
    entries: int
    kinds: dict[str, int]
    arches: dict[str, int]  # "kind sm_NN" -> count, before the reduction
    variants: dict[str, int]  # "kind sm_NN flags 0x..." -> count: sm_90 and sm_90a differ only in the flags
    kept: int
    zeroed: int
    zeroed_bytes: int
    # SHA-256 over the kept payloads in file order: equal for the original and the reduced file.
    kept_payloads_sha256: str
    kept_payload_sha256: list[str] = field(default_factory=list)
    method: str = METHOD


def elf_section(data: bytes, name: str) -> tuple[int, int]:
    """(file offset, size) of the named section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("only 64-bit little-endian ELF files are read")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ValueError("ELF section headers out of the file")

    def header(index: int) -> tuple[int, int, int]:
        base = shoff + index * shentsize
        sh_name, = struct.unpack_from("<I", data, base)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, base + 0x18)
        return sh_name, sh_offset, sh_size

    _, str_offset, str_size = header(shstrndx)
    names = data[str_offset:str_offset + str_size]
    wanted = name.encode()
    for index in range(shnum):
        sh_name, offset, size = header(index)
        end = names.find(b"\0", sh_name)
        if names[sh_name:end] == wanted:
            if offset + size > len(data):
                raise ValueError(f"section {name} runs past the end of the file")
            return offset, size
    raise ValueError(f"no {name} section")


def fatbin_entries(data: bytes) -> tuple[list[Entry], int, int, int]:
    """Every entry of every fatbin in .nv_fatbin; also (section offset, size, number of fatbins)."""
    start, size = elf_section(data, SECTION)
    end = start + size
    entries: list[Entry] = []
    pos, fatbins = start, 0
    while pos < end:
        if data[pos] == 0:  # padding between fatbins
            pos += 1
            continue
        if pos + FATBIN_HEADER.size > end:
            raise ValueError(f"truncated fatbin header at {pos:#x}")
        magic, _, header_size, fat_size = FATBIN_HEADER.unpack_from(data, pos)
        if magic != FATBIN_MAGIC:
            raise ValueError(f"no fatbin magic at {pos:#x} ({magic:#x})")
        entry, fat_end = pos + header_size, pos + header_size + fat_size
        if header_size < FATBIN_HEADER.size or fat_end > end:
            raise ValueError(f"fatbin at {pos:#x} runs past its section")
        while entry < fat_end:
            kind, _, entry_header, payload = ENTRY_HEAD.unpack_from(data, entry)
            if entry_header < ENTRY_MIN_HEADER or entry + entry_header + payload > fat_end:
                raise ValueError(f"entry at {entry:#x} of the fatbin at {pos:#x} runs past it")
            arch, = struct.unpack_from("<I", data, entry + ENTRY_ARCH_OFFSET)
            flags, = struct.unpack_from("<Q", data, entry + ENTRY_FLAGS_OFFSET)
            entries.append(Entry(fatbins, entry, entry_header, entry + entry_header, payload, kind, arch, flags))
            entry += entry_header + payload
        fatbins += 1
        pos = fat_end
    return entries, start, size, fatbins


def _is_kept(entry: Entry, keep: tuple[int, ...]) -> bool:
    # PTX would be JIT-compiled for a device with no matching cubin; keep it, whatever its architecture.
    return entry.kind != KIND_ELF or entry.arch in keep


def reduce_to_arches(data: bytes, keep: tuple[int, ...] = (90,)) -> tuple[bytes, Reduction]:
    """The file with every cubin not for `keep` zeroed in place, and what was done."""
    entries, start, size, fatbins = fatbin_entries(data)
    if not any(e.kind == KIND_ELF and e.arch in keep for e in entries):
        raise ValueError(f"no cubin for {', '.join(f'sm_{a}' for a in keep)}: nothing would be left")
    out = bytearray(data)
    kept_digest = hashlib.sha256()
    kept_each: list[str] = []
    zeroed = zeroed_bytes = 0
    for e in entries:
        payload = slice(e.payload_offset, e.payload_offset + e.payload_size)
        if _is_kept(e, keep):
            kept_digest.update(data[payload])
            kept_each.append(hashlib.sha256(data[payload]).hexdigest())
        else:
            out[payload] = bytes(e.payload_size)
            zeroed += 1
            zeroed_bytes += e.payload_size
    reduction = Reduction(
        keep=list(keep), section_offset=start, section_size=size, fatbins=fatbins, entries=len(entries),
        kinds=dict(sorted(Counter(e.kind_name for e in entries).items())),
        arches=dict(sorted(Counter(f"{e.kind_name} sm_{e.arch}" for e in entries).items())),
        variants=dict(sorted(Counter(f"{e.kind_name} sm_{e.arch} flags {e.flags:#x}" for e in entries).items())),
        kept=len(entries) - zeroed, zeroed=zeroed, zeroed_bytes=zeroed_bytes,
        kept_payloads_sha256=kept_digest.hexdigest(), kept_payload_sha256=kept_each,
    )
    return bytes(out), reduction


def check_reduction(original: bytes, reduced: bytes, keep: tuple[int, ...]) -> None:
    """Raise ValueError unless `reduced` is `original` with exactly the not-kept payloads zeroed."""
    if len(original) != len(reduced):
        raise ValueError(f"sizes differ: {len(original)} and {len(reduced)} bytes")
    entries, _, _, _ = fatbin_entries(original)
    zeroed = sorted((e.payload_offset, e.payload_offset + e.payload_size) for e in entries if not _is_kept(e, keep))
    before = memoryview(original)
    after = memoryview(reduced)
    pos = 0
    for begin, end in zeroed:
        if before[pos:begin] != after[pos:begin]:
            raise ValueError(f"bytes differ between {pos:#x} and {begin:#x}, outside the zeroed payloads")
        if after[begin:end].tobytes().count(0) != end - begin:
            raise ValueError(f"payload at {begin:#x} is not all zeros")
        pos = end
    if before[pos:] != after[pos:]:
        raise ValueError(f"bytes differ after {pos:#x}")
