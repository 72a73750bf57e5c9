"""Progress a user sees: plain lines in a log, a moving clock and an ETA on a terminal."""
import io
import re
from types import SimpleNamespace

from conftest import run_cli_forked

from adaln_bench.commands.progress import RunProgress


def test_a_log_gets_one_plain_line_per_phase_per_mode_with_the_elapsed_time(tmp_path):
    proc = run_cli_forked("run", "--device", "cpu", "--preset", "tiny", "--quick", "--mode", "plain", "--mode", "vllm",
                   "--candidate", "diffusers", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    # Heartbeat lines ("still running", after 30 s without a line) come only on a slow machine.
    lines = [l for l in proc.stderr.splitlines() if l.startswith("[") and "still running" not in l]
    stamp = r"^\[\d+:\d\d:\d\d\] "
    assert all(re.match(stamp, l) for l in lines), lines
    texts = [re.sub(stamp, "", l) for l in lines]
    # On a CPU the two modes' children run side by side (one torch thread each): each mode's lines in order.
    plain = [t for t in texts if t.startswith("plain")]
    vllm = [t for t in texts if t.startswith("vllm")]
    assert plain[:8] == ["plain: started",
                         "plain · diffusers[plain] · fingerprint",
                         "plain · diffusers[plain] · batch invariance",
                         "plain · diffusers[plain] · accuracy, T=1",
                         "plain · diffusers[plain] · accuracy, T=3",
                         "plain · diffusers[plain] · latency, T=1",
                         "plain · diffusers[plain] · latency, T=3",
                         "plain · diffusers[plain] · cold start"]
    assert re.fullmatch(r"plain: ok after \d+:\d\d:\d\d", plain[8]) and len(plain) == 9
    assert vllm[0] == "vllm: started" and re.fullmatch(
        r"vllm: unavailable after \d+:\d\d:\d\d: ModuleNotFoundError: vllm is not installed .*", vllm[1])
    assert len(texts) == 11
    # No bar, no terminal control codes in a log.
    assert "\x1b" not in proc.stderr and "━" not in proc.stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _rendered(progress) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(progress._progress.make_tasks_table(progress._progress.tasks))
    return console.file.getvalue()


def test_on_a_terminal_the_clock_moves_in_every_phase_and_the_probes_have_an_eta():
    now = [100.0]
    job = SimpleNamespace(mode=SimpleNamespace(name="plain"), key="plain")
    progress = RunProgress([job], disabled=False, stream=_Terminal(), now=lambda: now[0])
    assert progress.live and not progress.lines
    state = progress._states["plain"]
    progress.update("plain", {"phase": "starting", "candidate": None, "done": 0, "total": None})
    progress.update("plain", {"phase": "batch invariance", "candidate": "diffusers[plain]", "done": 0, "total": 1000})
    now[0] += 10
    progress.update("plain", {"phase": None, "candidate": "diffusers[plain]", "done": 250, "total": 1000})
    assert state.elapsed() == 10 and state.eta() == 30  # 250 runs in 10 s, 750 to go
    assert "0:00:10" in _rendered(progress) and "ETA 0:00:30" in _rendered(progress)
    # Probes done: accuracy and latency have no count, but the clock keeps going.
    progress.update("plain", {"phase": "accuracy and latency, T=3", "candidate": "diffusers[plain]",
                              "done": 1000, "total": 1000})
    now[0] += 5
    assert state.elapsed() == 15 and state.eta() is None
    now[0] += 5
    assert state.elapsed() == 20 and "0:00:20" in _rendered(progress) and "ETA" not in _rendered(progress)
    progress.finish("plain", "ok")
    now[0] += 5
    assert state.elapsed() == 20  # stopped with the mode
