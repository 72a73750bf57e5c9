"""Slimmed installs of real vLLM 0.33.0 and SGLang 0.5.23 for the GPU machine (no network, 64 MiB a call).

    python3 tools/slim_frameworks.py build [--out .carry/frameworks] [--wheels build/frameworks-wheels]
    python3 tools/slim_frameworks.py sizes [--out .carry/frameworks]
    python3 tools/slim_frameworks.py trace vllm|sglang --deps PATH[:PATH...]   # regenerate a file list
    python3 tools/slim_frameworks.py check-report REPORT.json --wheels DIR
    python3 tools/slim_frameworks.py kernels build [--out .carry/sglang-kernels]  # SGLang's two AdaLN kernels
  on the GPU machine:
    python3 tools/slim_frameworks.py kernels verify --site /tmp/site   # after pip install of its whl/
  and for vLLM's library, on the GPU machine:
    python3 tools/slim_frameworks.py stage --carried .carry/frameworks/stage1 --to $HOME/stage   # call 1
    python3 tools/slim_frameworks.py join --staged $HOME/stage --carried .carry/frameworks/stage2 --site /tmp/site

`build` downloads the wheels pinned in tools/slim/requirements.lock, keeps of each framework the files
its switch's import loads (tools/slim/<name>-<version>.files, written by `trace`) and its whole
.dist-info, and cuts vLLM's compiled library into two xz parts: stage1/ holds part 1 (the first call),
stage2/ part 2 and every wheel (the second call). docs/compat.md says what is left out and why.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from slim import pins, sglang_kernels
from slim.library_parts import join_library, split_library, stage_part
from slim.record import dist_info_dir, parse_record
from slim.report_check import check_report, find_wheel
from slim.slim_wheel import read_manifest, write_slim_wheel

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20


class UserError(Exception):
    """Bad input: one line on stderr, exit 2."""


def _lock_names() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in pins.LOCK.read_text().splitlines())
    return [line.split("==", 1)[0] for line in lines if line]


def download(wheels: Path) -> None:
    """Every pinned wheel into `wheels`; pip checks each file's SHA-256 against the lock."""
    wheels.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--require-hashes",
            "--python-version", pins.PYTHON_VERSION, "--implementation", "cp", "-d", str(wheels), "-r", str(pins.LOCK)]
    for platform in pins.PLATFORMS:
        argv += ["--platform", platform]
    subprocess.run(argv, check=True)


def wheel_of(wheels: Path, name: str, version: str | None = None) -> Path:
    if version is None:
        for line in pins.LOCK.read_text().splitlines():
            if line.split("==", 1)[0] == name:
                version = line.split("==", 1)[1].split()[0]
    found = find_wheel(wheels, name, version or "")
    if found is None:
        raise UserError(f"no wheel of {name} {version} in {wheels}: run `download` (or `build`) first")
    return found


def slim_name(full: Path) -> str:
    """The registry wheel's name with build tag 0slim: pip installs it the same, a reader sees it is cut."""
    name, version, *tags = full.name[:-len(".whl")].split("-")
    return "-".join([name, version, "0slim", *tags[-3:]]) + ".whl"


def build(out: Path, wheels: Path) -> int:
    download(wheels)
    stage1, stage2 = out / "stage1", out / "stage2"
    for folder in (stage1, stage2):
        if folder.exists():
            shutil.rmtree(folder)
    whl = stage2 / "whl"
    whl.mkdir(parents=True)
    for framework in pins.FRAMEWORKS.values():
        full = wheel_of(wheels, framework.name, framework.version)
        files = read_manifest(framework.manifest)
        leave_out = [framework.library] if framework.library else []
        kept, size = write_slim_wheel(full, whl / slim_name(full), files, framework.keep_whole, leave_out)
        print(f"{framework.name} {framework.version}: kept {kept} files, {size / MiB:.2f} MiB uncompressed")
        if framework.library:
            with zipfile.ZipFile(full) as archive:
                names = archive.namelist()
                folder = dist_info_dir(names)
                record = parse_record(archive.read(folder + "RECORD").decode())
                data = archive.read(framework.library)
            parts = split_library(data, framework.library, full.name, folder.rstrip("/"), record[framework.library],
                                  (stage1, stage2))
            print(f"{framework.library}: {parts.size / MiB:.1f} MiB, xz -9e {parts.xz_size / MiB:.1f} MiB, "
                  f"parts {' + '.join(f'{p.size / MiB:.1f}' for p in parts.parts)} MiB, SHA-256 {parts.sha256}")
    needed = dict.fromkeys(n for f in pins.FRAMEWORKS.values() for n in f.needs)
    for name in [*needed, *pins.EXTRAS]:
        shutil.copy2(wheel_of(wheels, name), whl)
    return sizes(out)


def _tree_bytes() -> int:
    """What the device tool sends besides the carry: tracked files and untracked ones git does not ignore."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, capture_output=True, check=True).stdout
    paths = (REPO / p for p in listing.decode().split("\0") if p)
    return sum(p.stat().st_size for p in paths if p.is_file())


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def sizes(out: Path) -> int:
    """Each call's carry plus the working tree, against the 64 MiB limit; 1 when a call would not fit."""
    tree = _tree_bytes()
    worst = 0
    print(f"working tree: {tree / MiB:.2f} MiB")
    for stage in ("stage1", "stage2"):
        folder = out / stage
        if not folder.is_dir():
            raise UserError(f"{folder} does not exist: run `build` first")
        carried = _folder_bytes(folder)
        total = carried + tree
        worst = max(worst, total)
        print(f"{stage}: {carried / MiB:.2f} MiB carried, {total / MiB:.2f} MiB with the tree "
              f"(limit {pins.CARRY_LIMIT / MiB:.0f} MiB)")
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                print(f"  {path.relative_to(folder)}  {path.stat().st_size / MiB:.2f} MiB")
    if worst > pins.CARRY_LIMIT:
        print("over the limit: a call would be refused", file=sys.stderr)
        return 1
    return 0


def trace(name: str, wheels: Path, deps: str) -> int:
    """Install the full wheel in a scratch folder, import the switch under the tracer, write the file list."""
    framework = pins.FRAMEWORKS[name]
    full = wheel_of(wheels, framework.name, framework.version)
    with tempfile.TemporaryDirectory(prefix=f"trace-{name}-") as scratch:
        with zipfile.ZipFile(full) as archive:
            archive.extractall(scratch)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([scratch, *filter(None, deps.split(os.pathsep))])}
        tracer = Path(__file__).resolve().parent / "slim" / "trace_imports.py"
        proc = subprocess.run([sys.executable, str(tracer), framework.trace, scratch], env=env,
                              capture_output=True, text=True, cwd=scratch)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            return proc.returncode
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    keep = [f for f in found["files"] if not f.endswith("/") and ".dist-info/" not in f
            and not f.startswith(tuple(framework.keep_whole))]
    header = [f"# {framework.name} {framework.version}: the files its switch's import loads (.dist-info is kept whole).",
              f"# Written by `tools/slim_frameworks.py trace {name}`; {len(keep)} files.",
              "# Third-party distributions the import loaded on the tracing machine (pins.py lists what the GPU image lacks): " + ", ".join(found["distributions"])]
    framework.manifest.write_text("\n".join(header + keep) + "\n")
    print(f"{framework.manifest}: {len(keep)} files")
    return 0


def report_check(report: Path, wheels: Path) -> int:
    if not report.is_file():
        raise UserError(f"{report}: no such report")
    checks = check_report(report, wheels)
    if not checks:
        raise UserError(f"{report}: no framework mode names a library")
    for c in checks:
        print(f"{c.mode:14} {c.library} {c.version}: {c.verdict}"
              + (f" ({c.member}, {c.observed})" if c.member else ""))
    ran = [c for c in checks if c.verdict != "unavailable"]
    return 0 if ran and all(c.ok for c in ran) else 1


def kernels(action: str, out: Path, wheels: Path, site: Path | None) -> int:
    """`build`: the sglang-kernels set (tools/slim/sglang_kernels.py); `verify`: its installed kernel files."""
    if action == "verify":
        if site is None:
            raise UserError("kernels verify needs --site (the folder the wheels were installed into)")
        problems = sglang_kernels.verify(site)
        for problem in problems:
            print(problem, file=sys.stderr)
        count = len(sglang_kernels.read_kernel_files())
        print(f"{count - len(problems)} of {count} kernel files match their pinned SHA-256 under {site}")
        return 1 if problems else 0
    download(wheels)
    summary = sglang_kernels.build(out, lambda name, version=None: wheel_of(wheels, name, version))
    slim = summary["slim_wheel"]
    print(f"{slim['name']}: kept {slim['members']} files, {slim['bytes_unpacked'] / MiB:.2f} MiB uncompressed")
    for name, size in summary["wheels"].items():
        print(f"  whl/{name}  {size / MiB:.2f} MiB")
    tree = _tree_bytes()
    total = summary["bytes"] + tree
    print(f"{out}: {summary['bytes'] / MiB:.2f} MiB carried, {total / MiB:.2f} MiB with the working tree "
          f"(limit {pins.CARRY_LIMIT / MiB:.0f} MiB)")
    return 1 if total > pins.CARRY_LIMIT else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    default_out, default_wheels = REPO / ".carry" / "frameworks", REPO / "build" / "frameworks-wheels"
    p = sub.add_parser("download", help="the pinned wheels, hash-checked")
    p.add_argument("--wheels", type=Path, default=default_wheels)
    p = sub.add_parser("build", help="both slimmed installs and vLLM's library in two parts")
    p.add_argument("--out", type=Path, default=default_out)
    p.add_argument("--wheels", type=Path, default=default_wheels)
    p = sub.add_parser("sizes", help="each call's carry against the 64 MiB limit")
    p.add_argument("--out", type=Path, default=default_out)
    p = sub.add_parser("trace", help="rewrite a framework's file list from a traced import")
    p.add_argument("framework", choices=sorted(pins.FRAMEWORKS))
    p.add_argument("--wheels", type=Path, default=default_wheels)
    p.add_argument("--deps", default="", help="folders with the framework's third-party dependencies")
    p = sub.add_parser("stage", help="GPU machine, call 1: copy part 1 out of the working tree")
    p.add_argument("--carried", type=Path, required=True)
    p.add_argument("--to", type=Path, required=True)
    p = sub.add_parser("join", help="GPU machine, call 2: join, check and install vLLM's library")
    p.add_argument("--staged", type=Path, required=True)
    p.add_argument("--carried", type=Path, required=True)
    p.add_argument("--site", type=Path, required=True)
    p = sub.add_parser("check-report", help="module_sha256 of each framework row against the wheel's RECORD")
    p.add_argument("report", type=Path)
    p.add_argument("--wheels", type=Path, default=default_wheels)
    p = sub.add_parser("kernels", help="SGLang with its two AdaLN kernels: build the carry, or verify an install")
    p.add_argument("action", choices=("build", "verify"))
    p.add_argument("--out", type=Path, default=REPO / ".carry" / "sglang-kernels")
    p.add_argument("--wheels", type=Path, default=default_wheels)
    p.add_argument("--site", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "download":
            download(args.wheels)
            return 0
        if args.command == "build":
            return build(args.out, args.wheels)
        if args.command == "sizes":
            return sizes(args.out)
        if args.command == "trace":
            return trace(args.framework, args.wheels, args.deps)
        if args.command == "kernels":
            return kernels(args.action, args.out, args.wheels, args.site)
        if args.command == "stage":
            print(f"staged {stage_part(args.carried, args.to)}")
            return 0
        if args.command == "join":
            target = join_library((args.staged, args.carried), args.site)
            print(f"joined and checked {target}")
            return 0
        return report_check(args.report, args.wheels)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, zipfile.BadZipFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if args.command in ("check-report", "sizes") else 1


if __name__ == "__main__":
    sys.exit(main())
