"""The kernel toolchain (adaln_bench/kernels/toolchain) that every bundled library builds with, checked with fake
nvcc scripts: the order in which nvcc is found, the architecture rule, the cache key, the parallel compile and
link, the staged headers, the cache's atomic steps and the prebuild command. Quick: nothing is really compiled
here (the libraries' own build tests do that)."""
from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from adaln_bench.kernels import toolchain as T
from adaln_bench.kernels.toolchain import nvcc as N
from adaln_bench.kernels.toolchain.cache import build_atomically, cached_meta

# A stand-in for nvcc: logs each call, answers --version, writes its -o file (or fails when FAIL_NVCC is set,
# after writing half of it). `ls` of each -I folder goes to the log, to show what a build could include.
FAKE_NVCC = """#!/bin/sh
PATH=/usr/bin:/bin
echo "CALL $*" >> "{log}"
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.9, V99.9.1"; exit 0; fi
out=""; prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in -I*) echo "INCLUDE ${{a#-I}}: $(ls "${{a#-I}}" | tr '\\n' ' ')" >> "{log}" ;; esac
  prev="$a"
done
if [ -n "$FAIL_NVCC" ]; then echo half > "$out"; echo "error: $FAIL_NVCC" >&2; exit 1; fi
echo "built from $*" > "$out"
"""


def _fake_nvcc(folder: Path, log: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nvcc = folder / "nvcc"
    nvcc.write_text(FAKE_NVCC.format(log=log))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


@pytest.fixture
def no_nvcc_env(monkeypatch, tmp_path):
    """No nvcc anywhere the toolchain looks, until a test puts one there."""
    for var in ("ADALN_BENCH_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(N, "DEFAULT_NVCC", tmp_path / "no-default" / "nvcc")


# --- finding nvcc ---------------------------------------------------------------------------------------------

def test_nvcc_is_found_in_the_documented_order(tmp_path, monkeypatch, no_nvcc_env):
    log = tmp_path / "log"
    names = ("chosen", "home", "cuda_path", "path", "dflt")
    places = {name: _fake_nvcc(tmp_path / name / "bin", log) for name in names}
    assert T.find_nvcc() is None and "nvcc not found" in T.missing(_recipe(tmp_path))
    monkeypatch.setattr(N, "DEFAULT_NVCC", places["dflt"])
    assert T.find_nvcc() == str(places["dflt"])
    monkeypatch.setenv("PATH", str(places["path"].parent))
    assert T.find_nvcc() == str(places["path"])
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda_path"))
    assert T.find_nvcc() == str(places["cuda_path"])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    assert T.find_nvcc() == str(places["home"])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-such-toolkit"))  # a CUDA_HOME without nvcc is passed over
    assert T.find_nvcc() == str(places["cuda_path"])
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(places["chosen"]))
    assert T.find_nvcc() == str(places["chosen"])


def test_a_chosen_nvcc_that_is_not_there_is_reported_not_replaced(tmp_path, monkeypatch, no_nvcc_env):
    monkeypatch.setenv("PATH", str(_fake_nvcc(tmp_path / "path", tmp_path / "log").parent))
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(tmp_path / "nowhere" / "nvcc"))
    assert T.find_nvcc() is None
    assert T.missing(_recipe(tmp_path)) == f"ADALN_BENCH_NVCC={tmp_path / 'nowhere' / 'nvcc'} is not an executable file"


def test_nvcc_version_is_its_release_line(tmp_path):
    nvcc = _fake_nvcc(tmp_path / "bin", tmp_path / "log")
    assert T.nvcc_version(str(nvcc)) == "Cuda compilation tools, release 99.9, V99.9.1"
    assert T.nvcc_version(str(tmp_path / "absent")).startswith("unknown (")


# --- the architecture rule ------------------------------------------------------------------------------------

@pytest.mark.parametrize("major, minor, arch", [(9, 0, "sm_90a"), (10, 0, "sm_100a"), (10, 3, "sm_103a"),
                                                (12, 0, "sm_120a"), (8, 0, "sm_80"), (8, 9, "sm_89")])
def test_arch_for_capability(major, minor, arch):
    assert T.arch_for_capability(major, minor, min_cc=80) == arch
    assert T.parse_arch(arch) == 10 * major + minor
    assert T.gencode(arch) == f"-gencode=arch=compute_{arch[3:]},code={arch}"


def test_below_a_librarys_floor_and_bad_names():
    with pytest.raises(T.BuildError, match=r"^compute capability 7.5 is not supported \(needs 8.0 or later: "
                                           r"mma.sync bf16\)$"):
        T.arch_for_capability(7, 5, min_cc=80, needs="mma.sync bf16")
    assert T.arch_for_capability(7, 5) == "sm_75"  # no floor: the draws
    for bad in ("90a", "sm90", "sm_", "sm_x0", "compute_90a"):
        with pytest.raises(ValueError, match="arch must look like sm_90a"):
            T.gencode(bad)


# --- the cache key --------------------------------------------------------------------------------------------

def _recipe(tmp_path: Path, **changes) -> T.Recipe:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, text in (("big.cu", "// big\n"), ("small.cu", "// small\n"), ("common.cuh", "// header\n")):
        if not (src / name).exists():
            (src / name).write_text(text)
    base = T.Recipe(name="demo", lib_name="libdemo.so", abi=1, arch="sm_90a", folder=src,
                    sources=("big.cu", "small.cu"), headers=("common.cuh",), flags=("-O3",),
                    defines=("DEMO_CC=90",))
    return replace(base, **changes)


def test_cache_key_follows_what_decides_the_code_and_nothing_else(tmp_path, monkeypatch, no_nvcc_env):
    r = _recipe(tmp_path)
    key = T.cache_key(r)
    assert len(key) == 20 and T.cache_key(_recipe(tmp_path)) == key
    changed = [_recipe(tmp_path, name="other"), _recipe(tmp_path, abi=2), _recipe(tmp_path, arch="sm_100a"),
               _recipe(tmp_path, flags=("-O2",)), _recipe(tmp_path, defines=("DEMO_CC=90", "X=1")),
               _recipe(tmp_path, extra_flags=("-lineinfo",)), _recipe(tmp_path, sources=("big.cu",))]
    keys = [T.cache_key(c) for c in changed]
    assert key not in keys and len(set(keys)) == len(keys)
    for name in ("small.cu", "common.cuh"):  # a source or a header edited
        before = (r.folder / name).read_text()
        (r.folder / name).write_text(before + "// edited\n")
        assert T.cache_key(r) != key
        (r.folder / name).write_text(before)
    assert T.cache_key(r) == key
    # nothing of the machine: another nvcc, headers found or not, another checkout with the same files
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(_fake_nvcc(tmp_path / "bin", tmp_path / "log")))
    assert T.cache_key(replace(r, header_sets=())) == T.cache_key(r) == key
    copy = tmp_path / "checkout2"
    copy.mkdir()
    for f in r.folder.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert T.cache_key(replace(r, folder=copy)) == key
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path / "cache"))
    assert T.library_dir(r) == tmp_path / "cache" / f"demo-sm_90a-{key}"


# --- compiling ------------------------------------------------------------------------------------------------

def _calls(log: Path) -> list[str]:
    return [line[5:] for line in log.read_text().splitlines() if line.startswith("CALL ") and "--version" not in line]


def test_several_sources_compile_to_objects_then_link(tmp_path, monkeypatch, no_nvcc_env):
    log = tmp_path / "log"
    nvcc = _fake_nvcc(tmp_path / "bin", log)
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(nvcc))
    r, out = _recipe(tmp_path), tmp_path / "out"
    meta = T.compile_library(r, out, jobs=2)
    flags = f"-O3 -gencode=arch=compute_90a,code=sm_90a -DDEMO_CC=90 -I{r.folder}"
    assert sorted(_calls(log)) == sorted([
        f"{flags} -c {r.folder}/big.cu -o {out}/big.o", f"{flags} -c {r.folder}/small.cu -o {out}/small.o",
        f"-shared -gencode=arch=compute_90a,code=sm_90a -o {out}/libdemo.so {out}/big.o {out}/small.o"])
    assert _calls(log)[-1].startswith("-shared ")  # the link after every compile
    assert sorted(p.name for p in out.iterdir()) == ["libdemo.so", "meta.json"]  # objects removed
    assert json.loads((out / "meta.json").read_text()) == meta
    assert (meta["name"], meta["abi"], meta["arch"], meta["key"]) == ("demo", 1, "sm_90a", T.cache_key(r))
    assert meta["flags"] == "-O3 -gencode=arch=compute_90a,code=sm_90a -DDEMO_CC=90"
    assert meta["nvcc"] == "Cuda compilation tools, release 99.9, V99.9.1" and meta["nvcc_path"] == str(nvcc)
    assert sorted(meta["compile_seconds"]) == ["big.cu", "small.cu"]


def test_one_source_is_one_call_and_staged_headers_come_alone(tmp_path, monkeypatch, no_nvcc_env):
    log = tmp_path / "log"
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(_fake_nvcc(tmp_path / "bin", log)))
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for name in ("rng_a.h", "rng_b.h", "cuda_runtime.h"):  # the last must not shadow nvcc's own
        (vendor / name).write_text(name)
    rng = T.HeaderSet("rng", lambda nvcc: vendor, "rng headers not found", staged="rng*.h", version=lambda: "7")
    r, out = _recipe(tmp_path, sources=("small.cu",), header_sets=(rng,)), tmp_path / "out"
    meta = T.compile_library(r, out)
    (call,) = _calls(log)
    assert call.startswith(f"-O3 -gencode=arch=compute_90a,code=sm_90a -DDEMO_CC=90 -I{r.folder} -I")
    assert call.endswith(f" -shared {r.folder}/small.cu -o {out}/libdemo.so")
    staged = [line for line in log.read_text().splitlines() if line.startswith("INCLUDE ") and "/rng:" in line]
    assert len(staged) == 1 and staged[0].split(": ", 1)[1].split() == ["rng_a.h", "rng_b.h"]
    assert meta["rng_include"] == str(vendor) and meta["rng_version"] == "7"
    missing = replace(r, header_sets=(replace(rng, find=lambda nvcc: None),))
    assert T.missing(missing) == "rng headers not found"
    with pytest.raises(T.BuildError, match="rng headers not found"):
        T.compile_library(missing, tmp_path / "out2")


def test_a_failing_compile_leaves_nothing_in_the_cache(tmp_path, monkeypatch, no_nvcc_env):
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(_fake_nvcc(tmp_path / "bin", tmp_path / "log")))
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAIL_NVCC", "boom in small.cu")
    r = _recipe(tmp_path)
    with pytest.raises(T.BuildError, match=r"(?s)nvcc (big|small)\.cu for sm_90a failed \(exit 1\).*error: boom"):
        T.ensure_library(r)
    assert list((tmp_path / "cache").iterdir()) == []  # no half-written library, no temporary folder


def test_ensure_builds_once_then_uses_the_cache_without_nvcc(tmp_path, monkeypatch, no_nvcc_env):
    log = tmp_path / "log"
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(_fake_nvcc(tmp_path / "bin", log)))
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path / "cache"))
    r = _recipe(tmp_path)
    lib, meta = T.ensure_library(r)
    assert lib == T.library_dir(r) / "libdemo.so" and lib.exists() and meta["prebuilt_or_cached"] is False
    assert T.unavailable(r) is None
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(tmp_path / "gone"))  # carried to a machine without nvcc
    calls = len(_calls(log))
    again, meta2 = T.ensure_library(r)
    assert again == lib and meta2["prebuilt_or_cached"] is True and meta2["key"] == meta["key"]
    assert len(_calls(log)) == calls and T.unavailable(r) is None
    other = _recipe(tmp_path, arch="sm_100a")
    assert T.unavailable(other) == (f"no prebuilt demo library for sm_100a in {tmp_path / 'cache'} and "
                                    f"ADALN_BENCH_NVCC={tmp_path / 'gone'} is not an executable file")
    with pytest.raises(T.BuildError, match="no cached library at .* and cannot build one: ADALN_BENCH_NVCC="):
        T.ensure_library(other)


# --- the prebuild command -------------------------------------------------------------------------------------

def test_prebuild_command(tmp_path, monkeypatch, capsys, no_nvcc_env):
    monkeypatch.setenv("ADALN_BENCH_NVCC", str(_fake_nvcc(tmp_path / "bin", tmp_path / "log")))
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path / "cache"))

    def recipe_for(arch, args):
        return _recipe(tmp_path, arch=arch)

    assert T.prebuild_main("demo", recipe_for, ["--arch", "sm_90a", "--define", "X=1"]) == 0
    with_x = _recipe(tmp_path, defines=("DEMO_CC=90", "X=1"))
    assert capsys.readouterr().out.endswith(f"demo sm_90a DEMO_CC=90 X=1: {T.library_dir(with_x)}/libdemo.so (built)\n")
    assert T.prebuild_main("demo", recipe_for, ["--arch", "sm_90a", "--define", "X=1"]) == 0
    assert capsys.readouterr().out.endswith("(cached)\n")
    assert T.prebuild_main("demo", recipe_for, ["--arch", "sm_100a", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / T.library_dir(_recipe(tmp_path, arch="sm_100a")).name / "libdemo.so").exists()
    capsys.readouterr()
    assert T.prebuild_main("demo", recipe_for, ["--arch", "90a"]) == 2
    assert capsys.readouterr().err == "error: arch must look like sm_90a, got '90a'\n"
    monkeypatch.setenv("FAIL_NVCC", "boom")
    assert T.prebuild_main("demo", recipe_for, ["--arch", "sm_120a"]) == 1
    assert capsys.readouterr().err.startswith("error: nvcc ")


# --- calling a library's C interface ------------------------------------------------------------------------

def test_a_failing_call_raises_with_its_status_and_message():
    import threading

    from adaln_bench.kernels.toolchain.c_calls import call_checked, error_buffer

    def entry(a, b, buf, size):  # a C entry point: status, and a message for a failure
        assert size == len(buf) == 1024
        if a < 0:
            buf.value = b"a must be >= 0"
        return 1 if a < 0 else (2 if b else 0)

    names = {1: "bad_argument", 2: "launch"}.get
    call_checked(entry, (1, 0), names, "demo kernel f")
    with pytest.raises(RuntimeError, match=r"^demo kernel f failed \(bad_argument, status 1\): a must be >= 0$"):
        call_checked(entry, (-1, 0), names, "demo kernel f")
    with pytest.raises(RuntimeError, match=r"^demo kernel f failed \(launch, status 2\): no message$"):
        call_checked(entry, (1, 1), names, "demo kernel f")  # the earlier message is not repeated
    other = []
    thread = threading.Thread(target=lambda: other.append(error_buffer()))
    thread.start()
    thread.join()
    assert error_buffer() is error_buffer() and other[0] is not error_buffer()


# --- the cache's atomic steps ---------------------------------------------------------------------------------

LIB = "libx.so"


def _compile(tmp):
    (tmp / LIB).write_bytes(b"lib")
    (tmp / "meta.json").write_text(json.dumps({"built": 1}))
    return {"built": 1}


def test_a_build_appears_whole_and_is_then_cached(tmp_path):
    final = tmp_path / "cache" / "lib-key"
    assert cached_meta(final, LIB) is None
    assert build_atomically(final, LIB, _compile) == {"built": 1}
    assert (final / LIB).read_bytes() == b"lib"
    assert cached_meta(final, LIB) == {"built": 1, "prebuilt_or_cached": True}
    assert [p.name for p in final.parent.iterdir()] == ["lib-key"]  # no temporary folder left


def test_a_concurrent_build_that_won_is_accepted(tmp_path):
    final = tmp_path / "lib-key"

    def compile_while_another_finishes(tmp):
        final.mkdir()
        (final / LIB).write_bytes(b"theirs")  # the other process renamed its folder first
        return _compile(tmp)

    build_atomically(final, LIB, compile_while_another_finishes)
    assert (final / LIB).read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib-key"]


def test_a_failed_build_leaves_nothing(tmp_path):
    final = tmp_path / "lib-key"

    def broken(tmp):
        (tmp / "half.o").write_bytes(b"")
        raise RuntimeError("nvcc failed")

    with pytest.raises(RuntimeError, match="nvcc failed"):
        build_atomically(final, LIB, broken)
    assert list(tmp_path.iterdir()) == []


def test_a_rename_onto_a_folder_without_the_library_is_an_error(tmp_path):
    final = tmp_path / "lib-key"

    def compile_beside_junk(tmp):
        final.mkdir()
        (final / "junk").write_bytes(b"")  # a folder in the way that holds no library
        return _compile(tmp)

    with pytest.raises(OSError):
        build_atomically(final, LIB, compile_beside_junk)
