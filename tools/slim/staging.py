"""The Megatron / Transformer Engine staging: its manifest, one deterministic tarball, installing it.

`tools/stage_megatron.py pack` lays the staging out as a tree, writes `manifest.json` (every file's
SHA-256, size and origin, plus the provenance: package versions, the torch the extension was built
against, the core libraries' original and reduced hashes and how they were reduced, the Megatron-LM
commit) and packs it into one tar.xz whose bytes depend only on the files. `install` runs on the GPU
machine: it unpacks, checks every file against the manifest and checks the running torch against the one
the extension was built for. Standard library only: this runs on the GPU machine too.
"""
from __future__ import annotations

import json
import lzma
import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import Optional

from slim.record import file_sha256_hex

MANIFEST = "manifest.json"
TARBALL = "megatron-stage.tar.xz"
TOP = "megatron-stage"  # the one folder inside the tarball
FORMAT = 1
# Where each part lies in the staged tree (and in the install).
LAYOUT = {
    "site": "site",  # Transformer Engine: its Python package, the reduced core libraries, the built extension
    "megatron_core": "mcore",  # the megatron-core release wheel, unpacked
    "megatron_lm": "megatron-lm",  # Megatron-LM's megatron/ tree at one commit: --megatron-src
}
XZ_PRESET = 9 | lzma.PRESET_EXTREME


sha256_file = file_sha256_hex  # the manifest hashes files as the RECORD checks do


def tree_files(root: Path) -> list[str]:
    """Every file under `root`, as sorted POSIX paths relative to it; a link or special file is refused."""
    found = []
    for path in root.rglob("*"):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise ValueError(f"{path}: only plain files and folders are staged")
        if path.is_file():
            found.append(path.relative_to(root).as_posix())
    return sorted(found)


def origin_of(rel: str, origins: dict[str, str]) -> Optional[str]:
    """The origin of the longest key of `origins` that is `rel` itself or a folder above it."""
    best = None
    for key in origins:
        if rel == key or rel.startswith(key.rstrip("/") + "/"):
            if best is None or len(key) > len(best):
                best = key
    return origins[best] if best is not None else None


def build_manifest(root: Path, origins: dict[str, str], provenance: dict) -> dict:
    """The manifest of the tree at `root`: `provenance` plus every file's hash, size and origin."""
    files = {}
    for rel in tree_files(root):
        if rel == MANIFEST:
            continue
        origin = origin_of(rel, origins)
        if origin is None:
            raise ValueError(f"{rel}: no origin recorded for it")
        path = root / rel
        files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size, "origin": origin}
    return {"format": FORMAT, **provenance, "layout": dict(LAYOUT), "files": files}


def write_manifest(root: Path, manifest: dict) -> Path:
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path


def read_manifest(path: Path) -> dict:
    manifest = json.loads(Path(path).read_text())
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "files" not in manifest:
        raise ValueError(f"{path}: not a staging manifest of format {FORMAT}")
    return manifest


def _tarinfo(name: str, size: int, executable: bool) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o755 if executable else 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_tarball(root: Path, out: Path, preset: Optional[int] = None) -> Path:
    """`root` (which holds manifest.json) as one tar.xz under TOP/: sorted, no dates, no owners."""
    preset = XZ_PRESET if preset is None else preset
    files = tree_files(root)
    if MANIFEST not in files:
        raise ValueError(f"{root} has no {MANIFEST}: write it first")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with lzma.open(partial, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=preset) as xz:
        with tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in files:
                path = root / rel
                executable = bool(path.stat().st_mode & stat.S_IXUSR)
                with open(path, "rb") as handle:
                    tar.addfile(_tarinfo(f"{TOP}/{rel}", path.stat().st_size, executable), handle)
    partial.replace(out)
    return out


def _safe_relative(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != TOP or len(path.parts) < 2:
        raise ValueError(f"unexpected member {name!r}: every member lies under {TOP}/")
    return PurePosixPath(*path.parts[1:]).as_posix()


def unpack(tarball: Path, dest: Path) -> list[str]:
    """Unpack the tarball's files into `dest` (created; a previous install there is replaced)."""
    if dest.exists():
        if not (dest / MANIFEST).is_file():
            raise ValueError(f"{dest} exists and is not a staging install: choose an empty folder")
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    written = []
    with tarfile.open(tarball, mode="r:xz") as tar:
        for member in tar:
            rel = _safe_relative(member.name)
            if member.isdir():
                continue
            if not member.isfile():
                raise ValueError(f"unexpected member {member.name!r}: only plain files are staged")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with open(target, "wb") as handle:
                shutil.copyfileobj(source, handle, 1 << 20)
            os.chmod(target, 0o755 if member.mode & 0o100 else 0o644)
            written.append(rel)
    return written


def verify_tree(root: Path, manifest: dict) -> None:
    """Raise ValueError unless the tree holds exactly the manifest's files, each with its hash."""
    present = set(tree_files(root)) - {MANIFEST}
    listed = set(manifest["files"])
    if present - listed:
        raise ValueError(f"{len(present - listed)} files not in the manifest, e.g. {sorted(present - listed)[:3]}")
    if listed - present:
        raise ValueError(f"{len(listed - present)} files of the manifest missing, e.g. {sorted(listed - present)[:3]}")
    for rel, entry in sorted(manifest["files"].items()):
        if sha256_file(root / rel) != entry["sha256"]:
            raise ValueError(f"{rel} does not match its manifest hash")


def torch_mismatch(built: dict, version: Optional[str], git_version: Optional[str]) -> Optional[str]:
    """One line saying why this torch cannot load the extension, or None when it is the one built against."""
    if git_version == built.get("torch_git_version"):
        return None
    return (f"transformer_engine_torch was built against torch {built.get('torch')} "
            f"(git {built.get('torch_git_version')}), but this torch is {version} (git {git_version}): "
            f"rebuild it with `tools/stage_megatron.py build-te-torch` against this torch's wheel")


def exports(dest: Path, manifest: dict, lib_dirs: tuple[Path, ...] = ()) -> list[str]:
    """Shell lines that put the install on the paths.

    Transformer Engine (site/) and the megatron-core release (mcore/) go on PYTHONPATH; the Megatron-LM tree
    is not put there: `--megatron-src $ADALN_BENCH_MEGATRON_LM` puts it ahead of the release. `lib_dirs`
    (torch's NVIDIA libraries) follow TE's on LD_LIBRARY_PATH: TE's core library needs libnccl.so.2 and
    cuDNN, which torch loads when it is imported first, and the dynamic loader finds there otherwise.
    """
    layout = manifest.get("layout", LAYOUT)
    site, mcore = dest / layout["site"], dest / layout["megatron_core"]
    lib = ":".join(str(p) for p in (site / "transformer_engine" / "wheel_lib", *lib_dirs))
    return [
        f"export PYTHONPATH={site}:{mcore}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export LD_LIBRARY_PATH={lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
        f"export ADALN_BENCH_STAGING_MANIFEST={dest / MANIFEST}",
        f"export ADALN_BENCH_MEGATRON_LM={dest / layout['megatron_lm']}",
    ]


def provenance_summary(manifest: dict) -> dict:
    """What a report records of the staging: versions, the core libraries' hashes and how made, the commit.

    `pack` stores it in the manifest as "provenance"; the Megatron modes copy it into their notes.
    """
    libraries = {}
    for member, lib in sorted(manifest.get("core_libraries", {}).items()):
        libraries[member] = {key: lib.get(key) for key in
                             ("wheel", "record_sha256", "reduced_sha256", "keep", "kept", "zeroed", "method")}
    te_torch = manifest.get("transformer_engine_torch", {})
    return {
        "packages": {name: p.get("version") for name, p in sorted(manifest.get("packages", {}).items())},
        "transformer_engine_torch": {key: te_torch.get(key) for key in ("wheel_sha256", "sdist_sha256")}
        | {"built_against": te_torch.get("built_against")},
        "core_libraries": libraries,
        "megatron_lm": {key: manifest.get("megatron_lm", {}).get(key)
                        for key in ("repo", "ref", "commit", "tree_sha")},
    }

