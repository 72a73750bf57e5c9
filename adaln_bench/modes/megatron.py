"""The Megatron modes: `megatron.core.transformer.custom_layers.batch_invariant_kernels`, one mode per backend.

Megatron main takes `enable_batch_invariant_mode(backend=...)` ("te_native", "triton", ...); the
megatron-core releases that have the module (0.16 on) take no argument and are Triton only, so
megatron_te_native is unavailable there. `--megatron-src PATH` imports a Megatron-LM checkout instead of
the installed package. See docs/compat.md for what each release's switch does.

When the libraries come from the staging that `tools/stage_megatron.py install` unpacks, the variable
ADALN_BENCH_STAGING_MANIFEST names its manifest.json: the switch's notes then carry the staging's
provenance (package versions, the core libraries' RECORD and reduced hashes and how they were reduced, the
torch the extension was built against), whether the switch's file is the staged one, and, for the staged
Megatron-LM tree, which has no .git, the commit the manifest records as megatron_source_commit.
"""
from __future__ import annotations

import inspect
import json
import os
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.modes._import import (
    defining_file,
    describe_call,
    file_sha256,
    git_commit,
    import_first,
    library_version,
    module_file,
    prepend_source,
)
from adaln_bench.modes.registry import Mode, ModeOptions, Switch, register

MODULE_PATHS = ("megatron.core.transformer.custom_layers.batch_invariant_kernels",)
LIBRARY = "megatron-core"


STAGING_MANIFEST_ENV = "ADALN_BENCH_STAGING_MANIFEST"


def read_staging_manifest() -> Optional[tuple[Path, dict]]:
    """The staging manifest named by $ADALN_BENCH_STAGING_MANIFEST, or None when the variable is unset.

    A variable that names no readable manifest raises: a report must not lose its provenance silently.
    """
    value = os.environ.get(STAGING_MANIFEST_ENV)
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{STAGING_MANIFEST_ENV}={value}: no readable staging manifest ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{STAGING_MANIFEST_ENV}={value}: not a staging manifest (no files)")
    return path, manifest


def staging_notes(staged: tuple[Path, dict], source: Optional[Path],
                  switch_file: Optional[str]) -> dict[str, Optional[str]]:
    """The switch's notes from the staging: its provenance, the switch file's check and the source's commit."""
    path, manifest = staged
    root = path.parent
    notes: dict[str, Optional[str]] = {
        "staging_manifest": str(path),
        "staging": json.dumps(manifest.get("provenance"), sort_keys=True),
    }
    if switch_file:
        try:
            rel = Path(switch_file).resolve().relative_to(root).as_posix()
        except ValueError:
            rel = None
        entry = manifest["files"].get(rel) if rel else None
        if entry is None:
            notes["staging_module"] = f"not staged: {switch_file}"
        else:
            same = file_sha256(switch_file) == entry.get("sha256")
            verdict = "matches" if same else "DIFFERS from"
            notes["staging_module"] = f"{rel} {verdict} the manifest ({entry.get('origin')})"
    tree = (manifest.get("megatron_lm") or {}).get("path")
    if source is not None and tree and source == (root / tree).resolve() and git_commit(source) is None:
        notes["megatron_source_commit"] = (manifest.get("megatron_lm") or {}).get("commit")
    return notes


class BackendUnsupported(RuntimeError):
    """The Megatron found cannot run the mode's backend."""


def _switch_on_call(module, backend: str, version: Optional[str]) -> tuple[Callable[[], None], str]:
    """The call that switches `backend` on in this Megatron, and how the report names it."""
    enable_fn = module.enable_batch_invariant_mode
    try:
        takes_backend = "backend" in inspect.signature(enable_fn).parameters
    except (TypeError, ValueError):  # no signature to read: assume the current API
        takes_backend = True
    if takes_backend:
        kwargs = {"backend": backend}
        return partial(enable_fn, **kwargs), describe_call(module, "enable_batch_invariant_mode", kwargs)
    if backend == "triton":
        return enable_fn, describe_call(module, "enable_batch_invariant_mode")
    raise BackendUnsupported(
        f"{LIBRARY} {version or '(unknown version)'} from {module_file(module)}: "
        f"enable_batch_invariant_mode() takes no backend argument (Triton only); "
        f"backend {backend!r} needs Megatron main (--megatron-src PATH)"
    )


def enable_backend(backend: str, options: ModeOptions) -> Switch:
    notes: dict[str, Optional[str]] = {}
    staged = read_staging_manifest()  # before anything is imported: a bad variable is the reason given
    source = None
    if options.megatron_src:
        source = prepend_source(options.megatron_src)
        notes["megatron_source"] = str(source)
        notes["megatron_source_commit"] = git_commit(source)
    module = import_first(LIBRARY, "megatron.core", MODULE_PATHS)
    if source is not None and source not in Path(module_file(module)).resolve().parents:
        raise ModuleNotFoundError(
            f"--megatron-src {source} has no {module.__name__}; it was imported from {module_file(module)}",
            name=module.__name__,
        )
    version = library_version(LIBRARY, "megatron.core", "megatron.core.package_info")
    switch_on, call = _switch_on_call(module, backend, version)
    switch_on()
    notes["module_file"] = module_file(module)
    notes["backend"] = backend
    switch_file = defining_file(module.enable_batch_invariant_mode)
    if staged is not None:
        notes.update(staging_notes(staged, source, switch_file))
    return Switch(
        path=call,
        library=LIBRARY,
        library_version=version,
        off=module.disable_batch_invariant_mode,
        on=switch_on,
        notes=notes,  # type: ignore[arg-type]  # megatron_source_commit is None outside a git checkout
        module_file=switch_file,
    )


def _mode(name: str, backend: str, env: dict[str, str], description: str) -> Mode:
    return register(
        Mode(
            name=name,
            description=description,
            kind="framework",
            framework="megatron",
            env=env,
            enable=partial(enable_backend, backend),
        )
    )


MEGATRON_TE_NATIVE = _mode(
    "megatron_te_native",
    "te_native",
    {"CUBLASLT_WORKSPACE_SIZE": "0"},
    "Megatron main enable_batch_invariant_mode(backend='te_native'), CUBLASLT_WORKSPACE_SIZE=0",
)
MEGATRON_TRITON = _mode(
    "megatron_triton",
    "triton",
    {},
    "Megatron enable_batch_invariant_mode(backend='triton') (no argument in megatron-core 0.16): Triton mm/addmm",
)
MEGATRON_TRITON_IEEE = _mode(
    "megatron_triton_ieee",
    "triton",
    {"TRITON_F32_DEFAULT": "ieee"},
    "as megatron_triton, with TRITON_F32_DEFAULT=ieee",
)
