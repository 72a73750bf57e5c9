"""Building one framework's environment: uv (`uv venv` + `uv pip install`), or `venv` + pip without uv.

An environment is a folder `<dir>/<framework>` holding a virtual environment with this checkout installed
editable with the framework's extra, plus any pinned requirements. A stamp file in it records the recipe
(framework, extras, pins, checkout, a hash of pyproject.toml, base interpreter, options); the next
`envs create` with the same recipe reuses the folder instead of rebuilding it, and uv's own cache makes a
rebuild fast when one is needed.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal, Optional

from adaln_bench.modes.frameworks import Framework
from adaln_bench.errors import UserError
from adaln_bench.datamodel.io import write_text_atomic

STAMP = "adaln-bench-env.json"
Installer = Literal["uv", "pip"]
FAILURE_TAIL_LINES = 15


def env_python(path: Path) -> Path:
    """The interpreter of a virtual environment (kept unresolved: the link's path is what selects the venv)."""
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def choose_installer(requested: str) -> Installer:
    if requested not in ("auto", "uv", "pip"):
        raise UserError(f"--installer must be auto, uv or pip, not {requested!r}")
    if requested == "pip":
        return "pip"
    if shutil.which("uv"):
        return "uv"
    if requested == "uv":
        raise UserError("--installer uv: uv is not on PATH (pip install uv, or --installer pip)")
    return "pip"


def source_checkout() -> Path:
    """The checkout this adaln_bench runs from: its extras are what an environment is built from."""
    from adaln_bench.harness.measurement.environment import tool_root

    root = tool_root()
    if not (root / "pyproject.toml").is_file():
        raise UserError(f"envs create needs a source checkout of adaln-bench; {root} has no pyproject.toml "
                        "(this adaln_bench is an installed copy)")
    return root


@dataclass(frozen=True)
class EnvPlan:
    framework: Framework
    path: Path
    requirements: list[str]
    extras: list[str]
    checkout: Path
    installer: Installer
    base_python: str
    system_site_packages: bool = False
    install_args: list[str] = field(default_factory=list)

    @property
    def python(self) -> Path:
        return env_python(self.path)

    def recipe(self) -> dict:
        """What decides the environment's content: equal recipes give the same environment."""
        pyproject = (self.checkout / "pyproject.toml").read_bytes()
        return {"framework": self.framework.name, "extras": list(self.extras), "requirements": list(self.requirements),
                "checkout": str(self.checkout), "pyproject_sha256": hashlib.sha256(pyproject).hexdigest(),
                "base_python": self.base_python, "system_site_packages": self.system_site_packages,
                "install_args": list(self.install_args)}

    def commands(self) -> list[list[str]]:
        target = f"{self.checkout}[{','.join(self.extras)}]"
        site = ["--system-site-packages"] if self.system_site_packages else []
        if self.installer == "uv":
            return [["uv", "venv", "--python", self.base_python, *site, str(self.path)],
                    ["uv", "pip", "install", "--python", str(self.python), "-e", target, *self.requirements,
                     *self.install_args]]
        # Without a pip of its own, as uv makes them: the base interpreter's pip (22.3 or later) installs
        # into it, so the venv's bundled, older setuptools never shadows the one a build would use.
        return [[self.base_python, "-m", "venv", "--without-pip", *site, str(self.path)],
                [self.base_python, "-m", "pip", "--python", str(self.python), "install",
                 "--disable-pip-version-check", "-e", target, *self.requirements, *self.install_args]]


@dataclass(frozen=True)
class BuildResult:
    framework: str
    status: Literal["created", "reused", "failed"]
    python: Path
    reason: Optional[str] = None


def read_stamp(path: Path) -> Optional[dict]:
    try:
        return json.loads((path / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _run_logged(cmd: list[str], log: Callable[[str], None], verbose: bool) -> tuple[int, list[str]]:
    """Run one installer command; its output goes to `log` when verbose, and its tail comes back."""
    tail: deque[str] = deque(maxlen=FAILURE_TAIL_LINES)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, errors="replace")
    except OSError as exc:
        return 127, [f"cannot start {cmd[0]}: {exc.strerror or exc}"]
    assert proc.stdout is not None
    for line in proc.stdout:
        tail.append(line.rstrip())
        if verbose:
            log(line.rstrip())
    return proc.wait(), list(tail)


def build_env(plan: EnvPlan, log: Callable[[str], None], force: bool = False, verbose: bool = False) -> BuildResult:
    """Create the environment, or reuse it when its stamp records the same recipe."""
    recipe = plan.recipe()
    stamp = read_stamp(plan.path)
    if not force and stamp is not None and stamp.get("recipe") == recipe and plan.python.exists():
        return BuildResult(plan.framework.name, "reused", plan.python)
    if plan.path.exists():
        if stamp is None and plan.path.is_dir() and any(plan.path.iterdir()):
            raise UserError(f"{plan.path} exists and was not made by `adaln-bench envs create`: "
                            "remove it or choose another --dir")
        if plan.path.is_dir():
            shutil.rmtree(plan.path)
        else:
            plan.path.unlink()
    for step, cmd in enumerate(plan.commands()):
        log("$ " + " ".join(cmd))
        code, tail = _run_logged(cmd, log, verbose)
        if code != 0:
            if not verbose:
                for line in tail:
                    log("  " + line)
            shutil.rmtree(plan.path, ignore_errors=True)  # half an environment must never be reused
            last = tail[-1] if tail else ""
            what = "creating the environment" if step == 0 else "installing into it"
            return BuildResult(plan.framework.name, "failed", plan.python,
                               f"{what} failed (exit {code}): {last}".rstrip(": "))
        if step == 0 and plan.system_site_packages:
            problem = see_base_venv_packages(plan.base_python, plan.python, log)
            if problem is not None:
                shutil.rmtree(plan.path, ignore_errors=True)
                return BuildResult(plan.framework.name, "failed", plan.python,
                                   f"creating the environment failed: {problem}")
    stamp = {"recipe": recipe, "installer": plan.installer,
             "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    write_text_atomic(json.dumps(stamp, indent=1) + "\n", plan.path / STAMP)
    return BuildResult(plan.framework.name, "created", plan.python)


_SITE_PROBE = """
import json, site, sys, sysconfig
dirs = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()]
print(json.dumps({"venv": sys.prefix != sys.base_prefix, "dirs": list(dict.fromkeys(dirs)),
                  "purelib": sysconfig.get_path("purelib")}))
"""
BASE_SITE_PTH = "adaln-bench-base-site.pth"


def _site_probe(python: str) -> dict:
    proc = subprocess.run([python, "-c", _SITE_PROBE], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise OSError(lines[-1] if lines else f"{python} exited {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def see_base_venv_packages(base_python: str, python: Path, log: Callable[[str], None]) -> Optional[str]:
    """With --system-site-packages, let the new environment see what the base interpreter sees.

    `venv --system-site-packages` (and uv's) links the new environment to the base interpreter's *base*
    when that interpreter is itself a venv's, so the packages installed into that venv (torch, typer, the
    build's setuptools) would be missing. A .pth file in the new environment adds the base venv's
    site-packages after its own, processing their .pth files too. Returns a reason when it cannot.
    """
    try:
        base = _site_probe(base_python)
        if not base["venv"]:
            return None
        new = _site_probe(str(python))
        lines = [f"import site; site.addsitedir({d!r})" for d in base["dirs"] if Path(d).is_dir()]
        Path(new["purelib"]).mkdir(parents=True, exist_ok=True)
        (Path(new["purelib"]) / BASE_SITE_PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        return f"cannot add the base venv's site-packages: {exc}"
    log(f"  the base interpreter is a venv's: its site-packages added ({BASE_SITE_PTH})")
    return None


def existing_envs(root: Path) -> list[tuple[Path, dict]]:
    """The environments under `root` that `envs create` made, with their stamps."""
    if not root.is_dir():
        return []
    found = []
    for child in sorted(root.iterdir()):
        stamp = read_stamp(child) if child.is_dir() else None
        if stamp is not None:
            found.append((child, stamp))
    return found


_VERSIONS_PROBE = """
import json, platform, sys
from importlib import metadata
names = json.loads(sys.argv[1])
found = {}
for name in names:
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = None
print(json.dumps({"python": platform.python_version(), "versions": found}))
"""


def installed_versions(python: Path, names: list[str]) -> dict:
    """Python's version and the installed versions of `names` in an environment, without importing them."""
    try:
        proc = subprocess.run([str(python), "-c", _VERSIONS_PROBE, json.dumps(names)], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"cannot run {python}: {exc}"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit code {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def default_base_python() -> str:
    return sys.executable


