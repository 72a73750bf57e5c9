"""What the Megatron / Transformer Engine staging is made of: pinned inputs, the reduced libraries, the layout.

Three lock files beside this one pin every input by version and SHA-256:
- megatron-requirements.lock: the registry wheels unpacked into the staging (megatron-core, Transformer
  Engine's Python package and its prebuilt core, pydantic for TE's import);
- megatron-sdist.lock: transformer-engine-torch's source distribution (33 C++ files, built here);
- megatron-build.lock: the build environment the extension is compiled in (Python 3.12): torch 2.11.0+cu130,
  the NVIDIA wheels whose headers and libraries it needs, and the build tools. None of it is carried.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "megatron-requirements.lock"
SDIST_LOCK = HERE / "megatron-sdist.lock"
BUILD_LOCK = HERE / "megatron-build.lock"

# The GPU machine: CPython 3.12 on x86-64; megatron-core 0.17 on need Python >= 3.12 (pip on 3.11 hides them).
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_26_x86_64", "manylinux_2_25_x86_64", "manylinux_2_24_x86_64", "manylinux_2_18_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64",
             "linux_x86_64")

MEGATRON_CORE = ("megatron-core", "0.19.2")
TE = ("transformer-engine", "2.20.2")
TE_CORE = ("transformer-engine-cu13", "2.20.2")
TE_TORCH = ("transformer-engine-torch", "2.20.2")
TORCH = ("torch", "2.11.0")  # the GPU machine's torch: 2.11.0+cu130, git 70d99e99...
# Unpacked into site/ beside Transformer Engine: `import transformer_engine.pytorch` needs pydantic, which
# the GPU image lacks (it has onnx, onnxscript and einops).
SITE_EXTRAS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection")

# The core libraries in the transformer-engine-cu13 wheel whose GPU code is reduced to the GPU's architecture.
# libtransformer_engine.so is loaded at import; libnccl_ep.so is opened by it by name (expert parallelism).
CORE_LIBRARIES = ("transformer_engine/wheel_lib/libtransformer_engine.so", "transformer_engine/wheel_lib/libnccl_ep.so")
KEEP_ARCHES = (90,)  # H200: sm_90 (sm_90a cubins carry the same architecture number)

# How the extension is built: TE's setup.py without its download of a prebuilt wheel, headers from the
# NVIDIA wheels of the build environment, two compile jobs at the lowest priority (the machine is shared).
# NVTE_NO_LOCAL_VERSION: without it TE's setup.py appends `git rev-parse --short HEAD` of whatever repository
# it sits in (this one) to the version, and TE's import then refuses transformer-engine-torch 2.20.2+<commit>
# beside transformer-engine 2.20.2.
TE_TORCH_BUILD_ENV = {
    "NVTE_PYTORCH_FORCE_BUILD": "TRUE",
    "NVTE_BUILD_USE_NVIDIA_WHEELS": "1",
    "NVTE_NO_LOCAL_VERSION": "1",
    "PIP_NO_INDEX": "1",
    "SOURCE_DATE_EPOCH": "0",
}

MEGATRON_LM_REPO = "NVIDIA/Megatron-LM"

# One call of the device tool carries 64 MiB with the working tree (about 15 MB): the tarball's budget.
TARBALL_BUDGET = 45 << 20


def lock_pins(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (version, sha256) of every line `name==version --hash=sha256:...` of a lock file."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, _, rest = line.partition(" ")
        name, _, version = requirement.partition("==")
        digest = rest.split("--hash=sha256:", 1)[1].split()[0] if "--hash=sha256:" in rest else ""
        pins[name.lower()] = (version, digest)
    return pins
