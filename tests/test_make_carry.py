"""tools/make_carry.sh: every carried folder the device wrappers name is made by one of its steps, its pins are
the lock's, and a bad step is one line and exit 2 before anything is made."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "make_carry.sh"


def _named_by_wrappers() -> set[str]:
    names = set()
    for path in [*(REPO / "tools" / "device").glob("*.sh"), *(REPO / "tools").glob("*.py")]:
        names |= set(re.findall(r"\.carry/([a-z0-9-]+)", path.read_text()))
    return names


def test_every_folder_the_wrappers_carry_has_a_step():
    help_text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, check=True).stdout
    made = set(re.findall(r"\.carry/([a-z0-9-]+)", help_text))
    named = _named_by_wrappers()
    assert {"frameworks", "whl", "night", "kernel-cache", "megatron", "solo"} <= named
    assert named <= made, f"named by a wrapper, made by no step: {sorted(named - made)}"


def test_the_extras_are_pinned_by_hash():
    lines = [line for line in (REPO / "tools" / "slim" / "carry-extras.lock").read_text().splitlines()
             if line and not line.startswith("#")]
    assert {line.split("==")[0] for line in lines} == {"nvidia-cutlass", "liger-kernel"}
    assert all(re.search(r"==[\w.]+ --hash=sha256:[0-9a-f]{64}$", line) for line in lines)


def test_a_bad_step_is_one_line_and_exit_2_before_any_step_runs(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "whl", "bogus"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no step bogus" in proc.stderr
    assert "== whl" not in proc.stdout  # the valid step before it did not run
