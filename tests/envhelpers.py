"""Making small Python environments for tests: a venv (no pip, so it takes a second) and what goes in it.

Nothing is downloaded: a stand-in framework goes in through a .pth file or a local, offline install.
"""
from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ROOT / "tests" / "standins"


def this_interpreters_site_dirs() -> list[str]:
    """The site-packages folders this interpreter imports from (a venv's own, not only its base's)."""
    dirs = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()]
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def make_venv(path: Path, system_site_packages: bool = True) -> Path:
    """A venv made from this interpreter; returns its python (the link inside the venv, not its target).

    With `system_site_packages`, it sees what this interpreter sees. `venv --system-site-packages` alone
    would not do that when this interpreter is itself a venv's: the new venv's base is the base
    interpreter, whose site-packages lack what was installed into this venv (torch, typer, ...). So a .pth
    file adds this interpreter's site-packages, processing their .pth files too (editable installs).
    """
    args = [sys.executable, "-m", "venv", "--without-pip", str(path)]
    if system_site_packages:
        args.insert(4, "--system-site-packages")
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    if system_site_packages and sys.prefix != sys.base_prefix:
        add_pth(path, "aab_parent_site", [f"import site; site.addsitedir({d!r})" for d in this_interpreters_site_dirs()])
    return path / "bin" / "python"


def site_packages(venv: Path) -> Path:
    rel = Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    return venv / rel


def add_pth(venv: Path, name: str, lines: list[str]) -> None:
    """A .pth file in the venv's site-packages: each line a folder for sys.path, or `import …` code."""
    (site_packages(venv) / f"{name}.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")


def different_copy(dest: Path, edit: str = "\n# a deliberate difference\n") -> Path:
    """A copy of this checkout's adaln_bench package with one file changed; returns the folder holding it."""
    shutil.copytree(ROOT / "adaln_bench", dest / "adaln_bench", ignore=shutil.ignore_patterns("__pycache__"))
    target = dest / "adaln_bench" / "harness" / "measurement" / "plan.py"
    target.write_text(target.read_text(encoding="utf-8") + edit, encoding="utf-8")
    return dest


def put_first(venv: Path, folder: Path) -> None:
    """Make `folder` win over PYTHONPATH in that venv (a .pth line that runs code before sys.path is used)."""
    add_pth(venv, "aaa_first", [f"import sys; sys.path.insert(0, {str(folder)!r})"])


def vllm_standin_package(dest: Path) -> Path:
    """The vLLM 0.33 stand-in as an installable project (name `vllm`), with the support module it imports."""
    dest.mkdir(parents=True)
    shutil.copytree(STANDINS / "vllm_new" / "vllm", dest / "vllm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(STANDINS / "support" / "adaln_standin.py", dest / "adaln_standin.py")
    (dest / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "vllm"\nversion = "0.33.0"\n\n'
        '[tool.setuptools]\npackages = ["vllm", "vllm.model_executor", "vllm.model_executor.determinism"]\n'
        'py-modules = ["adaln_standin"]\n', encoding="utf-8")
    return dest
