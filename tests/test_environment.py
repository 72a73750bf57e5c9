"""What a report records about the machine and the tools."""
import json
import subprocess
import sys
from pathlib import Path

from adaln_bench.harness.measurement import environment as E


def test_library_keys_are_the_reference_reports(reference_path):
    ref = json.loads(reference_path.read_text())
    assert list(E.library_versions()) == list(ref["environment"]["libraries"])
    assert E.library_versions()["torch"] is not None


def test_gpu_directory_names():
    assert E.slug_of("NVIDIA H200") == "h200"
    assert E.slug_of("NVIDIA B200") == "b200"
    assert E.slug_of("NVIDIA H100 80GB HBM3") == "h100"
    assert E.slug_of("Some Accelerator") == "gpu"


def test_rl_kernel_commit_comes_from_its_checkout(tmp_path, monkeypatch):
    (tmp_path / "rl_engine").mkdir()
    (tmp_path / "rl_engine" / "__init__.py").write_text("")
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    head = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("rl_engine", None)
    assert E.rl_kernel_commit() == head


def test_commit_can_be_named_for_a_tree_without_git(monkeypatch, tmp_path):
    monkeypatch.setattr(E, "tool_root", lambda: tmp_path)
    monkeypatch.setenv("ADALN_BENCH_COMMIT", "abc123")
    monkeypatch.setenv("ADALN_BENCH_DIRTY", "1")
    assert E.tool_git_state() == ("abc123", True)


def test_a_named_commit_wins_over_a_stale_git(monkeypatch, tmp_path):
    subprocess.run(["git", "-C", str(tmp_path), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "old"], check=True)
    monkeypatch.setattr(E, "tool_root", lambda: tmp_path)
    monkeypatch.delenv("ADALN_BENCH_COMMIT", raising=False)
    assert E.tool_git_state()[0] not in (None, "abc123")
    monkeypatch.setenv("ADALN_BENCH_COMMIT", "abc123")
    monkeypatch.setenv("ADALN_BENCH_DIRTY", "0")
    assert E.tool_git_state() == ("abc123", False)


def test_the_tool_root_is_the_checkout_that_holds_the_package():
    # Found from the package, not from this module's depth: a move of the module must not change it.
    import adaln_bench

    assert E.tool_root() / "adaln_bench" == Path(adaln_bench.__file__).resolve().parent
    assert (E.tool_root() / "pyproject.toml").is_file()
