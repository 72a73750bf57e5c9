"""What the slimmed installs are made of: pinned wheels, the files kept from each framework, the carry limit.

Every wheel is pinned by version and SHA-256 in requirements.lock beside this file, so a rebuild gets the
same bytes from the registry. The framework files kept are the ones its switch's import loads, listed by
`slim_frameworks.py trace` in `<name>-<version>.files`, plus the folders named in KEEP_WHOLE.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "requirements.lock"

# The GPU machine: CPython 3.12 on x86-64 (KINDS.md). pip matches manylinux tags exactly, so list those the
# pinned wheels use.
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

# The device tool carries at most 64 MiB a call, the working tree included.
CARRY_LIMIT = 64 << 20


@dataclass(frozen=True)
class Framework:
    name: str  # the distribution, as pip names it
    version: str
    trace: str  # what the tracer imports: "vllm" or "sglang" (trace_imports.py)
    # Folders kept whole, with the reason: files the import does not open but whose presence it checks.
    keep_whole: dict[str, str] = field(default_factory=dict)
    # The one compiled library the switch needs, carried beside the wheel in two parts (too large for one call).
    library: str | None = None
    # Third-party wheels it needs that the GPU machine's image lacks (names as in requirements.lock).
    needs: tuple[str, ...] = ()

    @property
    def manifest(self) -> Path:
        return HERE / f"{self.name}-{self.version}.files"


VLLM = Framework(
    name="vllm",
    version="0.33.0",
    trace="vllm",
    library="vllm/_C_stable_libtorch.abi3.so",
    needs=("pyzmq",),
)

SGLANG = Framework(
    name="sglang",
    version="0.5.23",
    trace="sglang",
    keep_whole={
        "sglang/kernels/jit/include/": "sglang.kernels.jit.utils.compile.paths raises at import unless "
                                      "include/ and csrc/ both exist; include/ is its default JIT header path",
        "sglang/kernels/jit/csrc/": "checked for existence at import (see include/); no file in it is read",
    },
    needs=("apache-tvm-ffi", "pyzmq", "ipython", "traitlets", "msgspec", "dill", "orjson", "pybase64", "starlette"),
)

FRAMEWORKS = {f.name: f for f in (VLLM, SGLANG)}

# Carried beside the frameworks: pydantic, which the harness needs and SGLang imports too (sglang/utils.py,
# srt/utils/msgspec_utils.py) and the image's package list lacks; diffusers, so that `--candidate diffusers`
# runs the real module, as in the earlier H200 reports.
EXTRAS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "diffusers", "importlib-metadata")
