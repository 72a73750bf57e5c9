"""Real Megatron (megatron-core 0.19.2 and Megatron-LM main) and Transformer Engine 2.20.2 for the GPU machine.

The GPU machine has no network and one call of the device tool carries 64 MiB, working tree included, so
everything travels as one tarball of at most about 45 MB. On a machine with PyPI, from the repository root:

    python3 tools/stage_megatron.py download                 # pinned wheels and sdist, hash-checked
    python3 tools/stage_megatron.py build-te-torch            # transformer_engine_torch against torch 2.11.0+cu130
    python3 tools/stage_megatron.py reduce-core               # TE's core libraries, sm_90 code only
    python3 tools/stage_megatron.py fetch-megatron-lm --repo GITDIR [--commit REV]  # megatron/ at REV
    python3 tools/stage_megatron.py pack [--out .carry/megatron]   # one tar.xz + manifest.json
  on the GPU machine:
    eval "$(python3 tools/stage_megatron.py install --tarball .carry/megatron/megatron-stage.tar.xz \
        --dest /tmp/megatron-stage)"
    python3 tools/stage_megatron.py check-report REPORT.json --manifest /tmp/megatron-stage/manifest.json

The registry's files are used byte for byte, except the two core libraries, whose GPU code for other
architectures is zeroed in place (tools/slim/fatbin.py). manifest.json records every file's origin and
hash, the versions, the torch the extension was built against, the libraries' RECORD and reduced hashes and
the Megatron-LM commit; the Megatron modes read it through ADALN_BENCH_STAGING_MANIFEST.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

from slim import megatron_pins as pins
from slim import staging
from slim.fatbin import check_reduction, reduce_to_arches
from slim.record import dist_info_dir, file_sha256_hex, parse_record, sha256_hex
from slim.report_check import find_wheel

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build"
MiB = 1 << 20
DEFAULTS = {
    "wheels": BUILD / "megatron-wheels",  # carried wheels and the sdist
    "build_wheels": BUILD / "megatron-build-wheels",  # the build environment's wheels
    "venv": BUILD / "te-venv",
    "src": BUILD / "te-torch-src",
    "te_wheel": BUILD / "te-torch-wheel",
    "core": BUILD / "megatron-core-libs",
    "megatron_lm": BUILD / "megatron-lm",
    "tree": BUILD / "megatron-stage",
    "out": REPO / ".carry" / "megatron",
}
BUILD_RECORD = "build.json"
REDUCE_RECORD = "reduce.json"
FETCH_RECORD = "megatron-lm.json"


class UserError(Exception):
    """Bad input: one line on stderr, exit 2."""


def _pip_download(python: str, lock: Path, dest: Path, binary: bool, extra: tuple[str, ...] = ()) -> None:
    argv = [python, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", "-d", str(dest), "-r", str(lock)]
    if binary:
        argv += ["--only-binary=:all:", "--python-version", pins.PYTHON_VERSION, "--implementation", "cp"]
        for platform in pins.PLATFORMS:
            argv += ["--platform", platform]
    subprocess.run(argv + list(extra), check=True)


def download(wheels: Path, build_wheels: Path, sdist_python: str | None) -> int:
    """The carried wheels and the build environment's; the sdist when a Python with torch 2.11 is given.

    pip prepares an sdist's metadata even with --no-deps, and TE's setup.py imports torch for it, so the
    sdist is downloaded by the build environment's pip (build-te-torch does it when it is missing).
    """
    wheels.mkdir(parents=True, exist_ok=True)
    build_wheels.mkdir(parents=True, exist_ok=True)
    _pip_download(sys.executable, pins.LOCK, wheels, binary=True)
    _pip_download(sys.executable, pins.BUILD_LOCK, build_wheels, binary=True)
    if sdist_python:
        _download_sdist(sdist_python, wheels)
    return 0


def _download_sdist(python: str, wheels: Path) -> Path:
    name, version = pins.TE_TORCH
    _pip_download(python, pins.SDIST_LOCK, wheels, binary=False,
                  extra=("--no-binary", name, "--no-build-isolation"))
    return _sdist(wheels)


def _sdist(wheels: Path) -> Path:
    name, version = pins.TE_TORCH
    path = wheels / f"{name.replace('-', '_')}-{version}.tar.gz"
    if not path.is_file():
        raise UserError(f"no {path.name} in {wheels}: run `build-te-torch` (it downloads it) "
                        "or `download --sdist-python`")
    expected = pins.lock_pins(pins.SDIST_LOCK)[name][1]
    if file_sha256_hex(path) != expected:
        raise UserError(f"{path} does not match its pinned SHA-256 in {pins.SDIST_LOCK.name}")
    return path


def wheel_of(wheels: Path, name: str, lock: Path | None = None) -> Path:
    lock = lock or pins.LOCK
    version, digest = pins.lock_pins(lock).get(name, ("", ""))
    found = find_wheel(wheels, name, version)
    if found is None:
        raise UserError(f"no wheel of {name} {version} in {wheels}: run `download` first")
    if digest and file_sha256_hex(found) != digest:
        raise UserError(f"{found} does not match its pinned SHA-256 in {lock.name}")
    return found


# --- build-te-torch -----------------------------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def make_build_env(python: str, venv: Path, build_wheels: Path) -> Path:
    """A Python 3.12 virtual environment with the build lock installed from its hash-checked wheels."""
    if not _venv_python(venv).exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(_venv_python(venv)), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--require-hashes", "--find-links", str(build_wheels), "-r", str(pins.BUILD_LOCK)],
                       check=True)
    return _venv_python(venv)


def torch_identity(python: Path | str) -> dict:
    """The torch an interpreter imports: version, git version, CUDA version, and its Python."""
    code = ("import json, sys, torch; print(json.dumps({'torch': torch.__version__, "
            "'torch_git_version': torch.version.git_version, 'cuda': torch.version.cuda, "
            "'python': sys.version.split()[0]}))")
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"{python} cannot import torch: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def te_torch_command(python: Path | str, out: Path) -> list[str]:
    return ["nice", "-n", "19", str(python), "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
            "--no-index", "-w", str(out), "."]


def build_te_torch(python: str, venv: Path, build_wheels: Path, wheels: Path, src: Path, out: Path, jobs: int,
                   reuse: bool, note: str | None = None) -> int:
    """Compile transformer_engine_torch (about 17 minutes on two cores) and record what it was built against."""
    venv_python = make_build_env(python, venv, build_wheels)
    torch_wheel = wheel_of(build_wheels, pins.TORCH[0], pins.BUILD_LOCK)
    identity = torch_identity(venv_python)
    name, version = pins.TE_TORCH
    sdist = _sdist(wheels) if (wheels / f"{name.replace('-', '_')}-{version}.tar.gz").exists() \
        else _download_sdist(str(venv_python), wheels)
    folder = src / f"{name.replace('-', '_')}-{version}"
    env = {**os.environ, **pins.TE_TORCH_BUILD_ENV, "MAX_JOBS": str(jobs)}
    command = te_torch_command(venv_python, out)
    log = out.parent / "te-torch-build.log"
    built = sorted(out.glob(f"{name.replace('-', '_')}-{version}-*.whl")) if out.is_dir() else []
    started = time.time()
    if reuse and built:
        seconds = None
        print(f"reusing {built[-1]} (built by: cd {folder} && {' '.join(command)})")
    else:
        for folder_ in (src, out):
            if folder_.exists():
                shutil.rmtree(folder_)
        src.mkdir(parents=True)
        out.mkdir(parents=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(src)
        with open(log, "w") as handle:
            proc = subprocess.run(command, cwd=folder, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
        seconds = round(time.time() - started, 1)
        if proc.returncode != 0:
            print(f"build failed (exit {proc.returncode}); see {log}", file=sys.stderr)
            return 1
        built = sorted(out.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if len(built) != 1:
        raise UserError(f"expected one built wheel in {out}, found {[p.name for p in built]}")
    wheel = built[0]
    if wheel.name.split("-")[1] != version:
        raise UserError(f"{wheel.name}: version is not {version} (a local version breaks TE's import check)")
    compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    record = {
        "name": name, "version": version,
        "sdist": sdist.name, "sdist_sha256": file_sha256_hex(sdist),
        "wheel": wheel.name, "wheel_sha256": file_sha256_hex(wheel),
        "built_against": {**identity, "torch_wheel": torch_wheel.name,
                          "torch_wheel_sha256": file_sha256_hex(torch_wheel)},
        "build_lock": pins.BUILD_LOCK.name, "build_lock_sha256": file_sha256_hex(pins.BUILD_LOCK),
        "command": f"cd {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder} && "
                   + " ".join(str(c) for c in command),
        "env": {**pins.TE_TORCH_BUILD_ENV, "MAX_JOBS": str(jobs)},
        "compiler": compiler, "seconds": seconds,
    }
    if note:
        record["note"] = note
    (out / BUILD_RECORD).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{wheel.name}: {wheel.stat().st_size / MiB:.1f} MiB, SHA-256 {record['wheel_sha256']}, built against "
          f"torch {identity['torch']} (git {identity['torch_git_version']})")
    return 0


# --- reduce-core ---------------------------------------------------------------------------------------


def reduce_core(wheels: Path, out: Path) -> int:
    """Each core library of the transformer-engine-cu13 wheel with only its sm_90 cubins left; deterministic."""
    wheel = wheel_of(wheels, pins.TE_CORE[0])
    out.mkdir(parents=True, exist_ok=True)
    records = {}
    with zipfile.ZipFile(wheel) as archive:
        record = parse_record(archive.read(dist_info_dir(archive.namelist()) + "RECORD").decode())
        for member in pins.CORE_LIBRARIES:
            data = archive.read(member)
            if sha256_hex(data) != record.get(member):
                raise ValueError(f"{wheel.name}: {member} does not match its RECORD hash")
            reduced, reduction = reduce_to_arches(data, pins.KEEP_ARCHES)
            check_reduction(data, reduced, pins.KEEP_ARCHES)
            target = out / Path(member).name
            target.write_bytes(reduced)
            records[member] = {"wheel": wheel.name, "record_sha256": record[member], "size": len(data),
                               "reduced_sha256": sha256_hex(reduced), **asdict(reduction)}
            print(f"{member}: {len(data) / MiB:.1f} MiB, {reduction.entries} cubins in {reduction.fatbins} fatbins; "
                  f"kept {reduction.kept} (sm_{', sm_'.join(map(str, pins.KEEP_ARCHES))}), zeroed {reduction.zeroed} "
                  f"({reduction.zeroed_bytes / MiB:.1f} MiB); RECORD {record[member][:12]}…, "
                  f"reduced {records[member]['reduced_sha256'][:12]}…")
    (out / REDUCE_RECORD).write_text(json.dumps(records, indent=1) + "\n")
    return 0


# --- fetch-megatron-lm ---------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"git {' '.join(args)} in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").is_dir() else repo


def fetch_megatron_lm(repo: Path, commit: str, ref: str, out: Path) -> int:
    """Megatron-LM's megatron/ tree at `commit` into `out`/megatron, and what it is (a staged tree has no .git)."""
    git_dir = _git_dir(repo)
    full = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}")
    ref_head = _git(git_dir, "rev-parse", "--verify", f"{ref}^{{commit}}")
    on_ref = subprocess.run(["git", f"--git-dir={git_dir}", "merge-base", "--is-ancestor", full, ref_head],
                            check=False).returncode == 0
    if not on_ref:
        raise UserError(f"{full} is not on {ref} ({ref_head}) in {repo}")
    tree = _git(git_dir, "rev-parse", f"{full}:megatron")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "--format=tar", full, "megatron"],
                             capture_output=True, check=True).stdout
    count = 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.issym() or member.islnk():
                raise UserError(f"{member.name} is a link: only plain files are staged")
            if member.isfile():
                target = out / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
                os.chmod(target, 0o755 if member.mode & 0o100 else 0o644)
                count += 1
    date, subject = _git(git_dir, "show", "-s", "--format=%cI%x00%s", full).split("\0", 1)
    record = {"repo": pins.MEGATRON_LM_REPO, "ref": ref, "ref_head": ref_head, "commit": full, "tree": "megatron",
              "tree_sha": tree, "files": count, "commit_date": date, "subject": subject}
    (out / FETCH_RECORD).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{pins.MEGATRON_LM_REPO} {full} ({date}, on {ref}): megatron/ {count} files, tree {tree}")
    return 0


# --- pack ----------------------------------------------------------------------------------------------


def _unpack_wheel(wheel: Path, dest: Path, origins: dict[str, str], prefix: str, skip: tuple[str, ...] = ()) -> None:
    """Every member of `wheel` into `dest`, checked against its RECORD; a member already there must be equal."""
    with zipfile.ZipFile(wheel) as archive:
        names = [i.filename for i in archive.infolist() if not i.is_dir()]
        record = parse_record(archive.read(dist_info_dir(names) + "RECORD").decode())
        for name in names:
            if name in skip:
                continue
            data = archive.read(name)
            if name in record and sha256_hex(data) != record[name]:
                raise ValueError(f"{wheel.name}: {name} does not match its RECORD hash")
            target = dest / name
            rel = f"{prefix}/{name}"
            if target.exists():
                if target.read_bytes() != data:
                    raise ValueError(f"{rel}: {wheel.name} and {origins[rel]} hold different files")
                origins[rel] = f"{origins[rel]}; identical in {wheel.name}"
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            mode = (archive.getinfo(name).external_attr >> 16) & 0o777
            os.chmod(target, 0o755 if mode & 0o100 else 0o644)
            origins[rel] = wheel.name


def _read_record(path: Path, step: str) -> dict:
    if not path.is_file():
        raise UserError(f"no {path}: run `{step}` first")
    return json.loads(path.read_text())


def pack(wheels: Path, te_wheel_dir: Path, core: Path, megatron_lm: Path, tree: Path, out: Path) -> int:
    """Lay the staging out, write its manifest and pack it into one tarball under `out`."""
    built = _read_record(te_wheel_dir / BUILD_RECORD, "build-te-torch")
    reduced = _read_record(core / REDUCE_RECORD, "reduce-core")
    fetched = _read_record(megatron_lm / FETCH_RECORD, "fetch-megatron-lm")
    if tree.exists():
        shutil.rmtree(tree)
    site, mcore, lm = (tree / staging.LAYOUT[k] for k in ("site", "megatron_core", "megatron_lm"))
    for folder in (site, mcore, lm):
        folder.mkdir(parents=True)
    origins: dict[str, str] = {}
    packages = {}
    pinned = pins.lock_pins(pins.LOCK)
    for name in (pins.TE[0], pins.TE_CORE[0], *pins.SITE_EXTRAS):
        wheel = wheel_of(wheels, name)
        skip = pins.CORE_LIBRARIES if name == pins.TE_CORE[0] else ()
        _unpack_wheel(wheel, site, origins, staging.LAYOUT["site"], skip)
        packages[name] = {"version": pinned[name][0], "file": wheel.name, "sha256": pinned[name][1],
                          "source": "registry wheel"}
    for member, lib in reduced.items():
        source = core / Path(member).name
        if file_sha256_hex(source) != lib["reduced_sha256"]:
            raise ValueError(f"{source} is not the file reduce-core wrote")
        rel = f"{staging.LAYOUT['site']}/{member}"
        target = tree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, 0o755)
        origins[rel] = f"{lib['wheel']}: {member} reduced to sm_{', sm_'.join(map(str, lib['keep']))} (core_libraries)"
    te_wheel = te_wheel_dir / built["wheel"]
    if file_sha256_hex(te_wheel) != built["wheel_sha256"]:
        raise ValueError(f"{te_wheel} is not the wheel build-te-torch recorded")
    _unpack_wheel(te_wheel, site, origins, staging.LAYOUT["site"])
    packages[pins.TE_TORCH[0]] = {"version": built["version"], "file": built["sdist"], "sha256": built["sdist_sha256"],
                                  "source": "registry sdist, built here (transformer_engine_torch)"}
    core_wheel = wheel_of(wheels, pins.MEGATRON_CORE[0])
    _unpack_wheel(core_wheel, mcore, origins, staging.LAYOUT["megatron_core"])
    packages[pins.MEGATRON_CORE[0]] = {"version": pinned[pins.MEGATRON_CORE[0]][0], "file": core_wheel.name,
                                       "sha256": pinned[pins.MEGATRON_CORE[0]][1], "source": "registry wheel"}
    shutil.copytree(megatron_lm / "megatron", lm / "megatron")
    origins[f"{staging.LAYOUT['megatron_lm']}/megatron"] = f"{fetched['repo']} {fetched['commit']}:megatron"
    provenance = {
        "created_by": "tools/stage_megatron.py pack",
        "python": pins.PYTHON_VERSION,
        "packages": packages,
        "transformer_engine_torch": built,
        "core_libraries": reduced,
        "megatron_lm": {**fetched, "path": staging.LAYOUT["megatron_lm"]},
    }
    provenance["provenance"] = staging.provenance_summary(provenance)
    manifest = staging.build_manifest(tree, origins, provenance)
    staging.write_manifest(tree, manifest)
    tarball = staging.write_tarball(tree, out / staging.TARBALL)
    shutil.copyfile(tree / staging.MANIFEST, out / staging.MANIFEST)
    digest = file_sha256_hex(tarball)
    (out / f"{staging.TARBALL}.sha256").write_text(f"{digest}  {staging.TARBALL}\n")
    size = tarball.stat().st_size
    unpacked = sum(e["size"] for e in manifest["files"].values())
    print(f"{tarball}: {size} bytes ({size / MiB:.2f} MiB), SHA-256 {digest}; {len(manifest['files'])} files, "
          f"{unpacked / MiB:.1f} MiB unpacked; budget {pins.TARBALL_BUDGET / MiB:.0f} MiB")
    return 0 if size <= pins.TARBALL_BUDGET else 1


# --- install (GPU machine) and check-report ------------------------------------------------------------


def install(tarball: Path, dest: Path) -> int:
    """Unpack, check every file, check the running torch; print the shell lines to export."""
    if not tarball.is_file():
        raise UserError(f"{tarball}: no such tarball (carry .carry/megatron)")
    staging.unpack(tarball, dest)
    manifest = staging.read_manifest(dest / staging.MANIFEST)
    staging.verify_tree(dest, manifest)
    import torch

    problem = staging.torch_mismatch(manifest["transformer_engine_torch"]["built_against"], torch.__version__,
                                     torch.version.git_version)
    if problem:
        raise UserError(problem)
    nvidia = Path(torch.__file__).resolve().parent.parent / "nvidia"
    lib_dirs = tuple(sorted(p for p in nvidia.glob("*/lib") if p.is_dir()))
    for line in staging.exports(dest, manifest, lib_dirs):
        print(line)
    print(f"# staged {len(manifest['files'])} files, checked; Megatron-LM {manifest['megatron_lm']['commit']}, "
          f"torch {torch.__version__} is the one transformer_engine_torch was built against", file=sys.stderr)
    return 0


def check_report(report: Path, manifest_path: Path) -> int:
    """Each Megatron mode's observed.module_sha256 against the staged file it names (wheel or source tree)."""
    if not report.is_file():
        raise UserError(f"{report}: no such report")
    manifest = staging.read_manifest(manifest_path)
    data = json.loads(report.read_text())
    verdicts = []
    for mode, run in sorted((data.get("modes") or {}).items()):
        observed = (run or {}).get("observed") or {}
        if observed.get("library") != pins.MEGATRON_CORE[0]:
            continue
        file, digest = observed.get("module_file") or "", observed.get("module_sha256") or ""
        rel = next((r for r in manifest["files"] if file.endswith("/" + r)), None)
        if run.get("status") != "ok":
            verdict = "unavailable"
        elif rel is None:
            verdict = "not staged"
        elif not digest:
            verdict = "no hash"
        else:
            verdict = "matches" if manifest["files"][rel]["sha256"] == digest else "differs"
        origin = manifest["files"][rel]["origin"] if rel else ""
        verdicts.append(verdict)
        print(f"{mode:22} {verdict}" + (f" ({rel}, {origin})" if rel else f" ({file})"))
    if not verdicts:
        raise UserError(f"{report}: no Megatron mode")
    ran = [v for v in verdicts if v != "unavailable"]
    return 0 if ran and all(v == "matches" for v in ran) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("download", help="the pinned wheels (and the sdist, given a Python with torch 2.11)")
    p.add_argument("--wheels", type=Path, default=DEFAULTS["wheels"])
    p.add_argument("--build-wheels", type=Path, default=DEFAULTS["build_wheels"])
    p.add_argument("--sdist-python", help="an interpreter with the build lock installed (build-te-torch's venv)")
    p = sub.add_parser("build-te-torch", help="compile transformer_engine_torch against the pinned torch")
    p.add_argument("--python", default="python3.12", help="a CPython 3.12 to make the build environment with")
    p.add_argument("--venv", type=Path, default=DEFAULTS["venv"])
    p.add_argument("--build-wheels", type=Path, default=DEFAULTS["build_wheels"])
    p.add_argument("--wheels", type=Path, default=DEFAULTS["wheels"])
    p.add_argument("--src", type=Path, default=DEFAULTS["src"])
    p.add_argument("--out", type=Path, default=DEFAULTS["te_wheel"])
    p.add_argument("--jobs", type=int, default=2, help="MAX_JOBS (compile jobs)")
    p.add_argument("--reuse", action="store_true", help="record a wheel already built in --out by this command")
    p.add_argument("--note", help="a line kept in build.json (how the wheel was made, when --reuse)")
    p = sub.add_parser("reduce-core", help="TE's core libraries with only their sm_90 cubins")
    p.add_argument("--wheels", type=Path, default=DEFAULTS["wheels"])
    p.add_argument("--out", type=Path, default=DEFAULTS["core"])
    p = sub.add_parser("fetch-megatron-lm", help="Megatron-LM's megatron/ tree at one commit")
    p.add_argument("--repo", type=Path, required=True, help="a clone (or bare git directory) of NVIDIA/Megatron-LM")
    p.add_argument("--commit", default="main")
    p.add_argument("--ref", default="main", help="the branch the commit must be on")
    p.add_argument("--out", type=Path, default=DEFAULTS["megatron_lm"])
    p = sub.add_parser("pack", help="one tarball and its manifest")
    p.add_argument("--wheels", type=Path, default=DEFAULTS["wheels"])
    p.add_argument("--te-wheel", type=Path, default=DEFAULTS["te_wheel"])
    p.add_argument("--core", type=Path, default=DEFAULTS["core"])
    p.add_argument("--megatron-lm", type=Path, default=DEFAULTS["megatron_lm"])
    p.add_argument("--tree", type=Path, default=DEFAULTS["tree"])
    p.add_argument("--out", type=Path, default=DEFAULTS["out"])
    p = sub.add_parser("install", help="GPU machine: unpack, check, print the exports")
    p.add_argument("--tarball", type=Path, default=DEFAULTS["out"] / staging.TARBALL)
    p.add_argument("--dest", type=Path, default=Path("/tmp/megatron-stage"))
    p = sub.add_parser("check-report", help="Megatron modes' module_sha256 against the staged files")
    p.add_argument("report", type=Path)
    p.add_argument("--manifest", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "download":
            return download(args.wheels, args.build_wheels, args.sdist_python)
        if args.command == "build-te-torch":
            return build_te_torch(args.python, args.venv, args.build_wheels, args.wheels, args.src, args.out,
                                  args.jobs, args.reuse, args.note)
        if args.command == "reduce-core":
            return reduce_core(args.wheels, args.out)
        if args.command == "fetch-megatron-lm":
            return fetch_megatron_lm(args.repo, args.commit, args.ref, args.out)
        if args.command == "pack":
            return pack(args.wheels, args.te_wheel, args.core, args.megatron_lm, args.tree, args.out)
        if args.command == "install":
            return install(args.tarball, args.dest)
        return check_report(args.report, args.manifest)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, zipfile.BadZipFile, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
