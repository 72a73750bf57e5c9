"""tools/stage_megatron.py: the fatbin reducer, the manifest and tarball, install's checks, check-report.

Everything runs on small inputs made here: an ELF file with a .nv_fatbin section built byte by byte, wheels
with their RECORD, a fake Megatron-LM tree. Nothing is downloaded or compiled.
"""
from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from slim import fatbin, megatron_pins, staging  # noqa: E402
import stage_megatron  # noqa: E402

# --- a synthetic ELF with a .nv_fatbin section -----------------------------------------------------------


def entry(kind: int, arch: int, payload: bytes, flags: int = 0x11, header_size: int = 64) -> bytes:
    head = bytearray(header_size)
    struct.pack_into("<HHIQ", head, 0, kind, 0x0101, header_size, len(payload))
    struct.pack_into("<I", head, 16, len(payload))
    struct.pack_into("<I", head, fatbin.ENTRY_ARCH_OFFSET, arch)
    struct.pack_into("<Q", head, fatbin.ENTRY_FLAGS_OFFSET, flags)
    return bytes(head) + payload


def fat(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A 64-bit little-endian ELF file holding `sections` (plus the null section and .shstrtab)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    out = bytearray(64)
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for name, data in [*sections.items(), (".shstrtab", names)]:
        offset = len(out)
        out += data + bytes(-len(data) % 8)
        headers.append(struct.pack("<IIQQQQIIQQ", names.index(name.encode() + b"\0"), 1, 2, 0, offset, len(data),
                                   0, 0, 8, 0))
    shoff = len(out)
    out += b"".join(headers)
    out[:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", out, 16, 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers),
                     len(headers) - 1)
    return bytes(out)


P75, P90, P90A, P100, PTX = (bytes([i + 1]) * (40 + 8 * i) for i in range(5))
HOST = b"host code " * 50


def library() -> bytes:
    section = fat(entry(2, 75, P75), entry(2, 90, P90), entry(2, 100, P100, header_size=112)) + bytes(8) + \
        fat(entry(2, 90, P90A, flags=0x1008011), entry(1, 80, PTX))
    return elf({".text": HOST, ".nv_fatbin": section, ".rodata": b"after"})


def test_the_reducer_zeroes_other_architectures_and_keeps_every_header_and_sm90_byte():
    original = library()
    reduced, r = fatbin.reduce_to_arches(original, (90,))
    assert len(reduced) == len(original)
    assert (r.fatbins, r.entries, r.kept, r.zeroed) == (2, 5, 3, 2)
    assert r.kinds == {"cubin": 4, "ptx": 1}
    assert r.arches == {"cubin sm_100": 1, "cubin sm_75": 1, "cubin sm_90": 2, "ptx sm_80": 1}
    assert r.zeroed_bytes == len(P75) + len(P100)
    for kept in (P90, P90A, PTX, HOST, b"after"):
        assert reduced.count(kept) == 1  # the sm_90 and sm_90a cubins, the PTX and the host bytes, unchanged
    assert P75 not in reduced and P100 not in reduced
    assert r.kept_payloads_sha256 == hashlib.sha256(P90 + P90A + PTX).hexdigest()
    assert r.kept_payload_sha256 == [hashlib.sha256(p).hexdigest() for p in (P90, P90A, PTX)]
    # every header is still there: the reduced file parses to the same entries
    assert fatbin.fatbin_entries(reduced) == fatbin.fatbin_entries(original)
    fatbin.check_reduction(original, reduced, (90,))
    assert fatbin.reduce_to_arches(original, (90,))[0] == reduced  # deterministic


def test_check_reduction_catches_any_other_change():
    original = library()
    reduced = bytearray(fatbin.reduce_to_arches(original, (90,))[0])
    reduced[reduced.index(b"host")] ^= 1
    with pytest.raises(ValueError, match="outside the zeroed payloads"):
        fatbin.check_reduction(original, bytes(reduced), (90,))
    reduced = bytearray(fatbin.reduce_to_arches(original, (90,))[0])
    reduced[reduced.index(P90)] ^= 1
    with pytest.raises(ValueError, match="differ"):
        fatbin.check_reduction(original, bytes(reduced), (90,))


def test_the_reducer_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="no cubin for sm_90"):
        fatbin.reduce_to_arches(elf({".nv_fatbin": fat(entry(2, 80, P75))}), (90,))
    with pytest.raises(ValueError, match="no fatbin magic"):
        fatbin.reduce_to_arches(elf({".nv_fatbin": b"\x01" * 32}), (90,))
    with pytest.raises(ValueError, match="no .nv_fatbin section"):
        fatbin.reduce_to_arches(elf({".text": HOST}), (90,))
    with pytest.raises(ValueError, match="not an ELF"):
        fatbin.reduce_to_arches(b"MZ" + bytes(100), (90,))
    cubin = entry(2, 90, P90)
    broken = struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(cubin) - 8) + cubin[:-8]  # runs past its fatbin
    with pytest.raises(ValueError, match="runs past"):
        fatbin.fatbin_entries(elf({".nv_fatbin": broken}))


# --- manifest, tarball, install ----------------------------------------------------------------------


def make_tree(root: Path) -> dict[str, str]:
    files = {"site/te/__init__.py": b"x = 1\n", "site/te/lib.so": b"\x7fELF" + bytes(64),
             "megatron-lm/megatron/core/__init__.py": b"", "mcore/megatron/core/__init__.py": b"#\n"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "site/te/lib.so").chmod(0o755)
    return {"site/te": "te.whl", "site/te/lib.so": "core.whl reduced", "megatron-lm/megatron": "Megatron-LM abc",
            "mcore": "megatron_core.whl"}


def built_against(git: str = "70d99e998b4955e0049d13a98d77ae1b14db1f45") -> dict:
    return {"torch": "2.11.0+cu130", "torch_git_version": git, "cuda": "13.0"}


def staged(tmp_path: Path, git: str | None = None) -> tuple[Path, dict]:
    tree = tmp_path / "tree"
    origins = make_tree(tree)
    provenance = {"transformer_engine_torch": {"built_against": built_against(git or "70d99e99")},
                  "megatron_lm": {"commit": "d98e8a64" + "0" * 32, "path": "megatron-lm"}}
    manifest = staging.build_manifest(tree, origins, provenance)
    staging.write_manifest(tree, manifest)
    return tree, manifest


def test_the_manifest_names_every_file_with_its_hash_and_origin(tmp_path):
    tree, manifest = staged(tmp_path)
    assert sorted(manifest["files"]) == ["mcore/megatron/core/__init__.py", "megatron-lm/megatron/core/__init__.py",
                                         "site/te/__init__.py", "site/te/lib.so"]
    assert manifest["files"]["site/te/lib.so"]["origin"] == "core.whl reduced"  # the longest prefix wins
    assert manifest["files"]["site/te/__init__.py"] == {
        "sha256": hashlib.sha256(b"x = 1\n").hexdigest(), "size": 6, "origin": "te.whl"}
    assert manifest["layout"] == staging.LAYOUT and manifest["format"] == staging.FORMAT
    (tree / "stray.txt").write_text("?")
    with pytest.raises(ValueError, match="stray.txt: no origin"):
        staging.build_manifest(tree, make_tree(tree), {})


def test_the_tarball_is_deterministic_and_installs_checked(tmp_path):
    tree, manifest = staged(tmp_path)
    one = staging.write_tarball(tree, tmp_path / "1" / staging.TARBALL, preset=1)
    two = staging.write_tarball(tree, tmp_path / "2" / staging.TARBALL, preset=1)
    assert one.read_bytes() == two.read_bytes()
    with tarfile.open(one) as tar:
        members = tar.getmembers()
    assert all(m.name.startswith(staging.TOP + "/") and m.mtime == 0 and m.uid == 0 for m in members)
    dest = tmp_path / "dest"
    staging.unpack(one, dest)
    staging.verify_tree(dest, staging.read_manifest(dest / staging.MANIFEST))
    assert (dest / "site/te/lib.so").stat().st_mode & 0o111
    staging.unpack(one, dest)  # a second install replaces the first

    (dest / "site/te/__init__.py").write_text("x = 2\n")
    with pytest.raises(ValueError, match="site/te/__init__.py does not match"):
        staging.verify_tree(dest, manifest)
    (dest / "site/te/__init__.py").write_text("x = 1\n")
    (dest / "site/extra.py").write_text("")
    with pytest.raises(ValueError, match="not in the manifest"):
        staging.verify_tree(dest, manifest)


def test_unpack_refuses_foreign_folders_and_members(tmp_path):
    tree, _ = staged(tmp_path)
    tarball = staging.write_tarball(tree, tmp_path / staging.TARBALL, preset=1)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a staging install"):
        staging.unpack(tarball, precious)
    assert (precious / "keep.txt").read_text() == "mine"
    evil = tmp_path / "evil.tar.xz"
    with tarfile.open(evil, "w:xz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        tar.addfile(info)
    with pytest.raises(ValueError, match="unexpected member"):
        staging.unpack(evil, tmp_path / "dest")


def test_torch_mismatch_is_one_clear_line():
    assert staging.torch_mismatch(built_against(), "2.11.0+cu130", "70d99e998b4955e0049d13a98d77ae1b14db1f45") is None
    message = staging.torch_mismatch(built_against(), "2.13.0+cpu", "abc123")
    assert "\n" not in message
    assert "built against torch 2.11.0+cu130 (git 70d99e998b4955e0049d13a98d77ae1b14db1f45)" in message
    assert "this torch is 2.13.0+cpu (git abc123)" in message


def test_install_checks_torch_and_prints_the_exports(tmp_path, capsys):
    import torch

    tree, _ = staged(tmp_path, git=torch.version.git_version)
    tarball = staging.write_tarball(tree, tmp_path / staging.TARBALL, preset=1)
    dest = tmp_path / "stage"
    assert stage_megatron.main(["install", "--tarball", str(tarball), "--dest", str(dest)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"export PYTHONPATH={dest}/site:{dest}/mcore${{PYTHONPATH:+:$PYTHONPATH}}"
    assert f"export ADALN_BENCH_STAGING_MANIFEST={dest}/manifest.json" in out
    assert f"export ADALN_BENCH_MEGATRON_LM={dest}/megatron-lm" in out

    tree, _ = staged(tmp_path / "other", git="0" * 40)
    tarball = staging.write_tarball(tree, tmp_path / "other" / staging.TARBALL, preset=1)
    assert stage_megatron.main(["install", "--tarball", str(tarball), "--dest", str(dest)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("error: transformer_engine_torch was built against torch 2.11.0+cu130 (git 0000")
    assert stage_megatron.main(["install", "--tarball", str(tmp_path / "none.tar.xz"), "--dest", str(dest)]) == 2


def report(path: Path, module_file: str, digest: str, status: str = "ok") -> Path:
    observed = {"library": "megatron-core", "module_file": module_file, "module_sha256": digest}
    path.write_text(json.dumps({"modes": {"plain": {"status": "ok", "observed": {}},
                                          "megatron_triton": {"status": status, "observed": observed}}}))
    return path


def test_check_report_compares_the_switch_file_with_the_staged_one(tmp_path, capsys):
    tree, manifest = staged(tmp_path)
    rel = "megatron-lm/megatron/core/__init__.py"
    staged_hash = manifest["files"][rel]["sha256"]
    good = report(tmp_path / "good.json", f"/tmp/megatron-stage/{rel}", staged_hash)
    assert stage_megatron.main(["check-report", str(good), "--manifest", str(tree / staging.MANIFEST)]) == 0
    assert capsys.readouterr().out.split()[:2] == ["megatron_triton", "matches"]
    bad = report(tmp_path / "bad.json", f"/tmp/megatron-stage/{rel}", "ab" * 32)
    assert stage_megatron.main(["check-report", str(bad), "--manifest", str(tree / staging.MANIFEST)]) == 1
    standin = report(tmp_path / "s.json", "/repo/tests/standins/megatron_main/megatron/x.py", staged_hash)
    assert stage_megatron.main(["check-report", str(standin), "--manifest", str(tree / staging.MANIFEST)]) == 1
    assert "not staged" in capsys.readouterr().out


# --- reduce-core and pack, end to end on fake wheels -----------------------------------------------------


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    members = {**members, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()}
    record = "\n".join([record_line(n, d) for n, d in members.items()] + [f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        archive.writestr(f"{info}/RECORD", record)
    return path


def test_reduce_core_and_pack_make_a_checked_staging(tmp_path, monkeypatch, capsys):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    te_py = {"transformer_engine/__init__.py": b"# te\n"}
    libs = {member: library() for member in megatron_pins.CORE_LIBRARIES}
    made = [make_wheel(wheels, "transformer-engine", "2.20.2", te_py),
            make_wheel(wheels, "transformer-engine-cu13", "2.20.2", {**te_py, **libs}),
            make_wheel(wheels, "megatron-core", "0.19.2", {"megatron/core/__init__.py": b"# 0.19.2\n"})]
    made += [make_wheel(wheels, name, "1.0", {f"{name.replace('-', '_')}/__init__.py": b""})
             for name in megatron_pins.SITE_EXTRAS]
    lock = tmp_path / "lock"
    lock.write_text("".join(f"{p.name.split('-')[0].replace('_', '-')}=={p.name.split('-')[1]} "
                            f"--hash=sha256:{hashlib.sha256(p.read_bytes()).hexdigest()}\n" for p in made))
    monkeypatch.setattr(megatron_pins, "LOCK", lock)

    core = tmp_path / "core"
    assert stage_megatron.main(["reduce-core", "--wheels", str(wheels), "--out", str(core)]) == 0
    reduced = json.loads((core / stage_megatron.REDUCE_RECORD).read_text())
    member = megatron_pins.CORE_LIBRARIES[0]
    assert reduced[member]["record_sha256"] == hashlib.sha256(libs[member]).hexdigest()
    assert reduced[member]["reduced_sha256"] == hashlib.sha256((core / Path(member).name).read_bytes()).hexdigest()
    assert (reduced[member]["kept"], reduced[member]["zeroed"]) == (3, 2)

    te_wheel = tmp_path / "te-wheel"
    te_wheel.mkdir()
    built = make_wheel(te_wheel, "transformer-engine-torch", "2.20.2", {"transformer_engine_torch.so": b"\x7fELF"})
    (te_wheel / stage_megatron.BUILD_RECORD).write_text(json.dumps({
        "version": "2.20.2", "wheel": built.name, "wheel_sha256": hashlib.sha256(built.read_bytes()).hexdigest(),
        "sdist": "transformer_engine_torch-2.20.2.tar.gz", "sdist_sha256": "cd" * 32,
        "built_against": built_against()}))
    lm = tmp_path / "lm"
    (lm / "megatron" / "core").mkdir(parents=True)
    (lm / "megatron" / "core" / "__init__.py").write_text("# main\n")
    (lm / stage_megatron.FETCH_RECORD).write_text(json.dumps({"repo": "NVIDIA/Megatron-LM", "ref": "main",
                                                              "commit": "d98e8a64" + "0" * 32, "tree_sha": "t"}))
    out = tmp_path / "carry"
    monkeypatch.setattr(staging, "XZ_PRESET", 1)
    args = ["pack", "--wheels", str(wheels), "--te-wheel", str(te_wheel), "--core", str(core), "--megatron-lm", str(lm),
            "--tree", str(tmp_path / "tree"), "--out", str(out)]
    assert stage_megatron.main(args) == 0
    manifest = json.loads((out / staging.MANIFEST).read_text())
    files = manifest["files"]
    lib = files[f"site/{member}"]
    assert lib["sha256"] == reduced[member]["reduced_sha256"] and "reduced to sm_90" in lib["origin"]
    assert files["site/transformer_engine/__init__.py"]["origin"] == (
        "transformer_engine-2.20.2-py3-none-any.whl; identical in transformer_engine_cu13-2.20.2-py3-none-any.whl")
    assert files["mcore/megatron/core/__init__.py"]["origin"] == "megatron_core-0.19.2-py3-none-any.whl"
    assert files["megatron-lm/megatron/core/__init__.py"]["origin"] == f"NVIDIA/Megatron-LM d98e8a64{'0' * 32}:megatron"
    assert "site/transformer_engine_torch.so" in files
    prov = manifest["provenance"]
    assert prov["packages"]["megatron-core"] == "0.19.2" and prov["packages"]["transformer-engine-torch"] == "2.20.2"
    assert prov["core_libraries"][member]["record_sha256"] == reduced[member]["record_sha256"]
    assert prov["core_libraries"][member]["method"] == fatbin.METHOD
    assert prov["megatron_lm"]["commit"] == "d98e8a64" + "0" * 32
    assert prov["transformer_engine_torch"]["built_against"]["torch_git_version"].startswith("70d99e99")
    digest = hashlib.sha256((out / staging.TARBALL).read_bytes()).hexdigest()
    assert (out / f"{staging.TARBALL}.sha256").read_text() == f"{digest}  {staging.TARBALL}\n"
    first = (out / staging.TARBALL).read_bytes()
    assert stage_megatron.main(args) == 0
    assert (out / staging.TARBALL).read_bytes() == first  # two packs, the same bytes
    dest = tmp_path / "installed"
    staging.unpack(out / staging.TARBALL, dest)
    staging.verify_tree(dest, staging.read_manifest(dest / staging.MANIFEST))


def test_the_committed_locks_pin_every_input_by_hash():
    carried = megatron_pins.lock_pins(megatron_pins.LOCK)
    assert carried["megatron-core"][0] == "0.19.2"
    assert carried["transformer-engine"][0] == carried["transformer-engine-cu13"][0] == "2.20.2"
    assert set(megatron_pins.SITE_EXTRAS) <= set(carried)
    assert megatron_pins.lock_pins(megatron_pins.SDIST_LOCK)["transformer-engine-torch"][0] == "2.20.2"
    build = megatron_pins.lock_pins(megatron_pins.BUILD_LOCK)
    assert build["torch"][0] == "2.11.0"
    assert {"nvidia-cuda-crt", "nvidia-cuda-cccl", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= set(build)
    for lock in (carried, build):
        assert all(len(digest) == 64 for _, digest in lock.values())
