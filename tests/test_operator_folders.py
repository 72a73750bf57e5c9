"""The operator is the unit: operators are found from their folders (no list names them), listed in their declared
pipeline position, and one added from outside the package, as docs/adding-an-operator.md says, goes through
`ops`, `run --op`, `report`, `diff`, `publish` and the generic pin and salt tests with no other file touched."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import forked
from conftest import ROOT, run_cli_forked

from adaln_bench.ops.registry import PATH_VARIABLE, all_operators, builtin_packages, operator_package
from adaln_bench.ops.spec import Normal
from test_operator_salts import collisions

BUILTIN_PREFIX = "adaln_bench.ops."


def test_every_folder_under_ops_that_declares_an_operator_is_one_and_nothing_else_is():
    found = {name: operator_package(name) for name in all_operators()}
    builtin = {name: package for name, package in found.items() if package.startswith(BUILTIN_PREFIX)}
    assert sorted(builtin.values()) == sorted(builtin_packages())  # each folder under ops/ is an operator
    assert all(package == BUILTIN_PREFIX + name for name, package in builtin.items())  # named as its folder
    positions = [op.pipeline_position for op in all_operators().values()]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)  # no tie falls back to names


def test_the_spec_describes_every_built_in_operator_in_pipeline_order():
    spec = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    sections = re.findall(r"^### 10\.\d+ (\w+)$", spec, flags=re.M)
    assert sections == [n for n in all_operators() if operator_package(n).startswith(BUILTIN_PREFIX)]


def test_a_reused_salt_is_named_with_both_owners():
    ops = list(all_operators().values())
    mlp = ops[1]
    x = dataclasses.replace(mlp.tensors[0], draw=Normal(7))  # the projection's temb salt
    clash = dataclasses.replace(mlp, name="clash", tensors=(x,))
    assert collisions([*ops, clash]) == {7: ["adaln_projection.temb", "clash.x"]}


# --- a throwaway operator, from outside the package ----------------------------------------------------------

TOY_INIT = '''\
"""toy_scale: x (n, D) fp32 times a per-column scale s (D,)."""
import torch

from adaln_bench.ops.plan import TIMESTEP
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Cost, Modes, Normal, Operator, OutputSpec, TensorSpec


def replay(x, s):
    return x * s


def cost(sizes, n):
    return Cost(fwd_bytes=8.0 * n * sizes.dim + 4 * sizes.dim, step_bytes=20.0 * n * sizes.dim)


OPERATOR = register(Operator(
    name="toy_scale",
    description="x * s, (T, D) fp32",
    tensors=(TensorSpec("x", "row", ("n", "D"), torch.float32, Normal(901)),
             TensorSpec("s", "param", ("D",), torch.float32, Normal(902, 0.1))),
    outputs=(OutputSpec("y", ("n", "D"), torch.float32),),
    grads=("x", "s"),
    family=TIMESTEP,
    size_names=("dim",),
    reference=replay,
    stock=replay,
    stock_what="x * s (+ its autograd backward)",
    cost=cost,
    modes=Modes(("plain",), "elementwise: no mode replaces it"),
    pipeline_position=35,
))
'''

TOY_CANDIDATES = '''\
import torch

from adaln_bench.ops.candidates import Candidate, Implementation, register
from adaln_bench.ops.stock_candidate import register_replay
from toy_scale import replay

register_replay("toy_scale", replay, "x * s")
register(Candidate(name="mul", description="torch.mul", default_modes=None, availability=lambda: None,
                   build=lambda ctx: Implementation(source="torch.mul", has_backward=True, forward=torch.mul),
                   op="toy_scale"))
'''

TOY_PINS = '''\
FAMILY = "T"
INPUT_SHA256 = {
    "upstream_sha256": "bc11e1735b8a1419",
    "permutation_sha256": "cdee1eacd630bc7c",
    "x_sha256": "b50003ab109e5950",
    "s_sha256": "8bfd6f829e2d592f",
}
'''


PINS_AND_SALTS = '''\
import test_operator_pins, test_operator_salts

assert "toy_scale" in test_operator_pins.PINNED
test_operator_pins.test_every_operators_seeded_inputs_are_pinned()
test_operator_pins.test_probe_counts_of_each_family_are_those_of_ops_md()
test_operator_salts.test_every_salt_is_used_once()
test_operator_salts.test_every_salt_stays_inside_its_seed()
print("checked toy_scale")
'''


def _write_toy(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, text in (("__init__.py", TOY_INIT), ("candidates.py", TOY_CANDIDATES), ("pins.py", TOY_PINS)):
        (folder / name).write_text(text)


def _tree_state() -> str:
    """What git sees changed in the checkout (empty outside a git checkout)."""
    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True)
    return proc.stdout if proc.returncode == 0 else ""


def test_an_operator_from_outside_the_package_needs_only_its_folder(tmp_path):
    folder = tmp_path / "operators" / "toy_scale"
    _write_toy(folder)
    env = {PATH_VARIABLE: str(folder.parent)}
    before = _tree_state()

    def cli(*args):
        proc = run_cli_forked(*args, env=env, timeout=240)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    rows = json.loads(cli("ops", "--json"))
    names = [r["op"] for r in rows]
    assert names.index("adaln_projection") < names.index("toy_scale") < names.index("adaln_row_gather")
    assert rows[names.index("toy_scale")]["candidates"] == ["diffusers", "mul"]

    report = tmp_path / "runs" / "toy_scale.json"
    cli("run", "--op", "toy_scale", "--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start",
        "--mode", "plain", "--out", str(report))
    data = json.loads(report.read_text())
    assert data["op"] == "toy_scale" and not data["incomplete"]
    assert set(data["results"]["plain"]) == {"diffusers", "mul"}
    assert all(r["batch_invariance"]["batch_invariant"] for r in data["results"]["plain"].values())

    assert cli("report", str(report)).startswith("toy_scale on CPU")
    assert "→ exit 0" in cli("diff", str(report), str(report))
    cli("publish", str(report.parent), "--out", str(tmp_path / "site"))
    assert (tmp_path / "site" / "op" / "toy_scale.html").is_file()

    # The generic pins and salts of every operator found cover it too.
    check = tmp_path / "pins_and_salts.py"
    check.write_text(PINS_AND_SALTS)
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    proc = forked.run("script", str(check), [], env={**os.environ, **env, "PYTHONPATH": path}, cwd=ROOT, timeout=240)
    assert proc.returncode == 0 and proc.stdout == "checked toy_scale\n", proc.stderr[-2000:]
    assert _tree_state() == before  # no file of the checkout touched



def test_an_installed_package_names_its_operator_by_entry_point(tmp_path):
    site = tmp_path / "site-packages"
    _write_toy(site / "toy_scale")
    dist = site / "toy_scale-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-scale\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[adaln_bench.operators]\ntoy_scale = toy_scale\n")
    proc = run_cli_forked("ops", "--json", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    rows = {r["op"]: r for r in json.loads(proc.stdout)}
    assert rows["toy_scale"]["candidates"] == ["diffusers", "mul"]


def test_a_broken_operator_folder_is_one_line_naming_it(tmp_path):
    folder = tmp_path / "operators" / "broken_op"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise RuntimeError('half written')\n")
    proc = run_cli_forked("ops", env={PATH_VARIABLE: str(folder.parent)})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "adaln-bench: operator package 'broken_op': RuntimeError: half written"]


def test_a_folder_that_another_module_shadows_is_refused(tmp_path):
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text("")
    proc = run_cli_forked("ops", env={PATH_VARIABLE: str(tmp_path)})
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    shadowed = tmp_path.resolve() / "json"
    assert line.startswith(f"adaln-bench: {PATH_VARIABLE}: {shadowed} is shadowed by the module 'json' of ")
