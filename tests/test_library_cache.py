"""The shared cache steps of the bundled libraries: whole or absent, a lost race accepted, failures cleaned up."""
import json

import pytest

from adaln_bench.kernels.library_cache import build_atomically, cached_meta

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
