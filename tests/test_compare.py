"""`adaln-bench compare`: the nightly's choice of baselines and its per-operator diffs, against a small git
repository holding copies of committed reports (found by file name, wherever results/ keeps them)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_main

from adaln_bench.ops.registry import all_operators
from adaln_bench.reports.compare import worst

ROOT = Path(__file__).resolve().parents[1]

PLAIN = "norm_modulate.h200.7a100a7.h3.plain.json"  # plain mode, started 2026-12-02
VLLM = "norm_modulate.h200.fd00ad3.h3.vllm+sglang.json"  # the vLLM and SGLang modes, started 2026-12-01
DRAWS = "norm_modulate.h200.fd00ad3.h3.accuracy.draws-b200.plain.json"  # accuracy only, the B200's draws
GATE = "gate_residual.h200.f51093c.h3.plain.json"
GATE_PRIOR_ART = "gate_residual.b200.prior-art.json"  # RL-Kernel's, on the B200
SINUSOID = "timestep_sinusoid.h200.f51093c.h3.plain.json"

OPS = list(all_operators())  # every operator gets a line in the baselines file, in the model's order


def committed(name: str) -> dict:
    return json.loads(next((ROOT / "results").rglob(name)).read_text(encoding="utf-8"))


class Repo:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        for key, value in (("user.email", "t@example.com"), ("user.name", "t"), ("commit.gpgsign", "false")):
            self.git("config", key, value)

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout

    def add(self, rel: str, doc: dict, commit: bool = True) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc), encoding="utf-8")
        self.git("add", rel)
        if commit:
            self.git("commit", "-q", "-m", f"add {rel}")


def variant(name: str, **changes) -> dict:
    """A committed report with some of its top-level fields changed (when it started, whether complete)."""
    return {**committed(name), **changes}


def tonight(root: Path, reports: dict[str, list[tuple[str, dict]]]) -> Path:
    """Tonight's run folder: <op>/<file> per report, and a run index beside them."""
    night = root / "tonight" / "h200"
    for op, files in reports.items():
        (night / op).mkdir(parents=True, exist_ok=True)
        for file, doc in files:
            (night / op / file).write_text(json.dumps(doc), encoding="utf-8")
    (night / "runs").mkdir(parents=True, exist_ok=True)
    (night / "runs" / "run.h200.abc.h3.json").write_text('{"kind": "adaln_bench_run_index"}')
    return night


def compare(repo: Repo, night: Path, capsys, monkeypatch, *options: str) -> tuple[int, dict, str, str]:
    """The command from the repository's root: its exit code, the baselines file ({op: ref or None}), stdout
    and stderr."""
    monkeypatch.chdir(repo.root)
    out = repo.root.parent / "diffs"
    code, stdout, stderr = run_main(["compare", str(night), "--out", str(out), *options], capsys)
    baselines = {}
    if (out / "baselines.txt").is_file():
        for line in (out / "baselines.txt").read_text(encoding="utf-8").splitlines():
            op, _, ref = line.partition(" ")
            baselines[op] = ref or None
        said = stdout.splitlines()[:len(baselines)]  # the log says each operator's baseline first
        assert said == [f"{op}: {ref or 'no baseline'}" for op, ref in baselines.items()]
    return code, baselines, stdout, stderr


@pytest.fixture
def repo(tmp_path) -> Repo:
    r = Repo(tmp_path / "repo")
    r.add("README", {})
    return r


NM = "results/h200/norm_modulate"


def test_the_baseline_is_the_newest_comparable_committed_report(repo, tmp_path, capsys, monkeypatch):
    repo.add(f"{NM}/{PLAIN}", committed(PLAIN))
    repo.add(f"{NM}/{VLLM}", committed(VLLM))
    repo.add(f"{NM}/{DRAWS}", committed(DRAWS))
    repo.add(f"{NM}/norm_modulate.h200.bbb.h3.plain.json", variant(PLAIN, started_at="2026-12-03T00:00:00+00:00"))
    # Newer, and never a baseline: an interrupted run's (by its name, or marked), a quick one, one of another
    # shape, one kept as history, one not committed, one deleted since.
    repo.add(f"{NM}/norm_modulate.h200.ccc.h3.plain.incomplete.json",
             variant(PLAIN, started_at="2026-12-04T00:00:00+00:00"))
    repo.add(f"{NM}/norm_modulate.h200.ddd.h3.plain.json",
             variant(PLAIN, started_at="2026-12-05T00:00:00+00:00", incomplete=True))
    repo.add(f"{NM}/norm_modulate.h200.eee.h3.plain.json", variant(PLAIN, started_at="2026-12-06T00:00:00+00:00",
                                                                 quick=True))
    repo.add(f"{NM}/norm_modulate.h200.fff.flux.json", variant(PLAIN, started_at="2026-12-06T00:00:00+00:00",
                                                               shape={**committed(PLAIN)["shape"], "preset": "flux"}))
    repo.add("results/h200/history/norm_modulate/norm_modulate.h200.ggg.h3.plain.json",
             variant(PLAIN, started_at="2026-12-07T00:00:00+00:00"))
    repo.add(f"{NM}/norm_modulate.h200.hhh.h3.plain.json", variant(PLAIN, started_at="2026-12-08T00:00:00+00:00"))
    repo.git("rm", "-q", f"{NM}/norm_modulate.h200.hhh.h3.plain.json")
    repo.git("commit", "-q", "-m", "drop it")
    repo.add(f"{NM}/norm_modulate.h200.iii.h3.plain.json", variant(PLAIN, started_at="2026-12-09T00:00:00+00:00"),
             commit=False)
    repo.git("reset", "-q")

    night = tonight(tmp_path, {"norm_modulate": [("tonight.json", committed(PLAIN))]})
    code, found, _, _ = compare(repo, night, capsys, monkeypatch)  # --results: results/<tonight's GPU>
    assert code == 0
    assert found == {op: None for op in OPS} | {"norm_modulate": f"HEAD:{NM}/norm_modulate.h200.bbb.h3.plain.json"}

    # A run of other modes: the report that measured them, although an older one.
    night = tonight(tmp_path / "modes", {"norm_modulate": [("tonight.json", committed(VLLM))]})
    assert compare(repo, night, capsys, monkeypatch)[1]["norm_modulate"] == f"HEAD:{NM}/{VLLM}"
    # An accuracy run with the B200's draws: the accuracy report made with them.
    night = tonight(tmp_path / "draws", {"norm_modulate": [("tonight.json", committed(DRAWS))]})
    assert compare(repo, night, capsys, monkeypatch)[1]["norm_modulate"] == f"HEAD:{NM}/{DRAWS}"
    # No report of the operator tonight: its newest full report with native draws, whatever it measured.
    night = tonight(tmp_path / "other", {"timestep_sinusoid": [("tonight.json", committed(SINUSOID))]})
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/h200")
    assert code == 0 and found["norm_modulate"] == f"HEAD:{NM}/norm_modulate.h200.bbb.h3.plain.json"

    # Read from git at the revision: a checkout of a commit before any report still finds them at main.
    first = repo.git("rev-list", "--max-parents=0", "HEAD").strip()
    repo.git("checkout", "-q", first)
    assert not (repo.root / NM / PLAIN).exists()
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--rev", "main", "--results", "results/h200")
    assert found["norm_modulate"] == f"main:{NM}/norm_modulate.h200.bbb.h3.plain.json"
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/h200")
    assert found["norm_modulate"] is None  # HEAD is that commit now


def test_outputs_are_what_diff_writes_for_each_operator(repo, tmp_path, capsys, monkeypatch):
    repo.add(f"{NM}/{PLAIN}", committed(PLAIN))
    # Tonight: norm_modulate ten times less accurate under one candidate (a regression); timestep_sinusoid with
    # no baseline (which fails nothing).
    worse = committed(PLAIN)
    for point in worse["results"]["plain"]["torch_rms_norm"]["accuracy_latency"].values():
        point["fwd_rel_err"] *= 10
    night = tonight(tmp_path, {"norm_modulate": [("nm.json", worse)],
                               "timestep_sinusoid": [("s.json", committed(SINUSOID))]})
    summary = tmp_path / "summary.md"
    summary.write_text("# before\n")
    code, found, stdout, _ = compare(repo, night, capsys, monkeypatch, "--summary", str(summary))
    assert code == 1
    assert found["norm_modulate"] == f"HEAD:{NM}/{PLAIN}" and found["timestep_sinusoid"] is None

    diffs = tmp_path / "diffs"
    new = str(night / "norm_modulate" / "nm.json")
    assert run_main(["diff", f"HEAD:{NM}/{PLAIN}", new], capsys)[0] == 1
    _, md, _ = run_main(["diff", f"HEAD:{NM}/{PLAIN}", new, "--markdown"], capsys)
    _, as_json, _ = run_main(["diff", f"HEAD:{NM}/{PLAIN}", new, "--json"], capsys)
    assert (diffs / "norm_modulate.md").read_text() == md and "WORSE" in md  # exactly what diff writes
    assert json.loads((diffs / "norm_modulate.json").read_text()) == json.loads(as_json)
    assert (diffs / "timestep_sinusoid.md").read_text() == \
        "No baseline for timestep_sinusoid: tonight's report is not diffed.\n"
    assert json.loads((diffs / "timestep_sinusoid.json").read_text()) == {"operator": "timestep_sinusoid",
                                                                          "baseline": None}
    text = summary.read_text()
    # Appended to what was there, one section per operator of tonight in the model's order; the run index is
    # no operator.
    assert text == f"# before\n## timestep_sinusoid\n\n{(diffs / 'timestep_sinusoid.md').read_text()}\n" \
                   f"## norm_modulate\n\n{md}\n"
    assert f"norm_modulate: exit 1 against HEAD:{NM}/{PLAIN}" in stdout
    assert sorted(p.name for p in diffs.iterdir()) == ["baselines.txt", "norm_modulate.json", "norm_modulate.md",
                                                     "timestep_sinusoid.json", "timestep_sinusoid.md"]


def test_rl_kernels_report_is_the_fallback_and_the_worst_code_wins(repo, tmp_path, capsys, monkeypatch):
    repo.add(f"results/b200/gate_residual/{GATE_PRIOR_ART}", committed(GATE_PRIOR_ART))
    # An interrupted run of tonight's kind is never the baseline: RL-Kernel's report is.
    repo.add("results/b200/gate_residual/gate_residual.h200.abc.h3.plain.incomplete.json", committed(GATE))
    night = tonight(tmp_path, {"gate_residual": [("g.json", committed(GATE))]})
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/b200",
                                "--baselines", str(tmp_path / "chosen.txt"))
    assert found == {}  # written where --baselines says
    lines = (tmp_path / "chosen.txt").read_text().splitlines()
    assert lines == [op if op != "gate_residual" else f"{op} HEAD:results/b200/{op}/{GATE_PRIOR_ART}" for op in OPS]
    assert code == 3  # the B200's report against tonight's H200 one: not comparable
    assert json.loads((tmp_path / "diffs" / "gate_residual.json").read_text())["exit_code"] == 3

    # Two reports of another operator (2) win over gate_residual's 3, whatever the order.
    night = tonight(tmp_path / "two", {"gate_residual": [("g.json", committed(GATE))],
                                       "adaln_row_gather": [("a.json", {}), ("b.json", {})]})
    code, _, stdout, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/b200")
    assert code == 2
    assert "adaln_row_gather: exit 2 against no baseline" in stdout and "gate_residual: exit 3 against" in stdout


@pytest.mark.parametrize("codes, expected", [
    ([0, 0, 0], 0), ([0, 1, 0], 1), ([1, 3, 0], 3), ([3, 1, 0], 3), ([3, 2, 1], 2), ([2, 3, 1], 2),
    ([0, 139, 3], 2),  # a code diff never gives: unreadable
    ([], 0),
])
def test_the_worst_exit_code_is_2_then_3_then_1(codes, expected):
    assert worst(codes) == expected


def test_bad_tonight_is_unreadable_input(repo, tmp_path, capsys, monkeypatch):
    repo.add(f"{NM}/{PLAIN}", committed(PLAIN))
    night = tonight(tmp_path / "two", {"norm_modulate": [("a.json", committed(PLAIN)), ("b.json", committed(PLAIN))]})
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/h200")
    md = (tmp_path / "diffs" / "norm_modulate.md").read_text()
    assert code == 2 and md.startswith("**2 reports of norm_modulate tonight, expected one**")
    assert json.loads((tmp_path / "diffs" / "norm_modulate.json").read_text())["exit_code"] == 2

    night = tonight(tmp_path / "none", {})
    code, found, stdout, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/h200")
    assert code == 2 and "No report tonight" in (tmp_path / "diffs" / "none.md").read_text()
    assert found["norm_modulate"] == f"HEAD:{NM}/{PLAIN}"  # the baselines are still listed

    # A named baseline that cannot be read: that operator's diff says so, exit 2.
    night = tonight(tmp_path / "named", {"adaln_projection": [("p.json", {})]})
    code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--results", "results/h200", "--baseline",
                                "HEAD:nowhere.json")
    assert found["adaln_projection"] == "HEAD:nowhere.json" and code == 2
    assert "could not read its input (exit 2)" in (tmp_path / "diffs" / "adaln_projection.md").read_text()


def test_a_baseline_folder_of_another_revision(repo, tmp_path, capsys, monkeypatch):
    repo.add(f"old/h200/norm_modulate/{PLAIN}", committed(PLAIN))
    repo.git("tag", "v1")
    repo.add("old/h200/norm_modulate/norm_modulate.h200.bbb.h3.plain.json",
             variant(PLAIN, started_at="2026-12-03T00:00:00+00:00"))  # after v1: not in it
    night = tonight(tmp_path, {"norm_modulate": [("tonight.json", committed(PLAIN))]})
    for requested in ("v1:old/h200", "v1:old/h200/"):
        code, found, _, _ = compare(repo, night, capsys, monkeypatch, "--baseline", requested)
        assert code == 0 and found["norm_modulate"] == f"v1:old/h200/norm_modulate/{PLAIN}"
    found = compare(repo, night, capsys, monkeypatch, "--baseline", "main:old/h200")[1]
    assert found["norm_modulate"] == "main:old/h200/norm_modulate/norm_modulate.h200.bbb.h3.plain.json"
    # --results as a path from the current directory, in a subfolder or absolute: the same git folder.
    (repo.root / "old" / "h200").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(repo.root / "old")
    code, out, _ = run_main(["compare", str(night), "--out", str(tmp_path / "sub"), "--results", "h200"], capsys)
    assert "norm_modulate: HEAD:old/h200/norm_modulate/norm_modulate.h200.bbb.h3.plain.json" in out
    found = compare(repo, night, capsys, monkeypatch, "--results", str(repo.root / "old" / "h200"))[1]
    assert found["norm_modulate"] == "HEAD:old/h200/norm_modulate/norm_modulate.h200.bbb.h3.plain.json"


@pytest.mark.parametrize("options, message", [
    (["--rev", "nosuchrev"], "nosuchrev: not a revision"),
    (["--rev", "--all"], "not a revision"),
    (["--results", "../elsewhere"], "outside the repository"),
])
def test_bad_arguments_are_one_line_and_write_nothing(repo, tmp_path, capsys, monkeypatch, options, message):
    night = tonight(tmp_path, {"norm_modulate": [("tonight.json", {})]})
    code, found, stdout, stderr = compare(repo, night, capsys, monkeypatch, *options)
    assert code == 2 and message in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "diffs").exists()


def test_outside_a_git_repository_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    code, _, err = run_main(["compare", "tonight", "--out", "diffs"], capsys)
    assert code == 2 and "run it inside the repository" in err and not (tmp_path / "here" / "diffs").exists()


def test_a_diff_that_crashes_is_unreadable_input_and_the_others_still_run(repo, tmp_path, capsys, monkeypatch):
    import adaln_bench.reports.compare as compare_module

    repo.add(f"{NM}/{PLAIN}", committed(PLAIN))
    repo.add(f"results/h200/gate_residual/{GATE}", committed(GATE))
    real = compare_module.diff_reports

    def crash_on_norm_modulate(old, new, *args):
        if new.op == "norm_modulate":
            raise RuntimeError("boom")
        return real(old, new, *args)

    monkeypatch.setattr(compare_module, "diff_reports", crash_on_norm_modulate)
    night = tonight(tmp_path, {"norm_modulate": [("nm.json", committed(PLAIN))],
                               "gate_residual": [("g.json", committed(GATE))]})
    code, _, stdout, stderr = compare(repo, night, capsys, monkeypatch)
    assert code == 2 and "RuntimeError: boom" in stderr  # a bug keeps its traceback, in the log
    assert (tmp_path / "diffs" / "norm_modulate.md").read_text().startswith(
        "**adaln-bench diff failed (RuntimeError: boom)**")
    assert "gate_residual: exit 0 against" in stdout
    assert json.loads((tmp_path / "diffs" / "gate_residual.json").read_text())["exit_code"] == 0
