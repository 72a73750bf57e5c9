"""Run one framework's switch import under a tracer and print, as JSON, the files of the package it touched.

    python3 trace_imports.py vllm|sglang PACKAGE_ROOT

Run by `slim_frameworks.py trace` in a fresh process whose sys.path holds the full wheel's files under
PACKAGE_ROOT and the framework's third-party dependencies. Recorded: every module loaded from under
PACKAGE_ROOT (sys.modules at the end), and every file under it that was opened or listed (audit events),
which catches data files such as SGLang's JIT headers.

On a machine without a GPU the CUDA-only steps cannot run. The tracer simulates only what sits outside the
framework's Python code, so that its CUDA import path is taken: NVML reports one GPU, vLLM's compiled
library is a placeholder module, and a call that needs a device is caught once the imports are done. Those
simulations are the tracer's, never part of what is shipped.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
import types
from pathlib import Path

ROOT = Path(sys.argv[2]).resolve()
_touched: set[str] = set()


def _audit(event: str, args: tuple) -> None:
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.startswith(str(ROOT)):
            _touched.add(path)


def _fake_nvml_with_one_gpu() -> None:
    """vLLM asks NVML whether a GPU is there before it picks its CUDA platform."""
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 1
    sys.modules["pynvml"] = nvml


def _torchvision_without_its_extension() -> None:
    """torchvision's CUDA build cannot load its _C here; declare the two ops its import registers fakes for."""
    import torch

    try:
        torch.ops.torchvision.nms
        return
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_without_its_extension.keep = lib  # type: ignore[attr-defined]


def _vllm_nvml_reports_one_gpu() -> None:
    """vLLM asks its own copy of NVML's bindings whether a GPU is there before it picks its CUDA platform."""
    import vllm.third_party.pynvml as nvml

    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 1


def trace_vllm() -> None:
    _torch_reports_an_sm90_gpu()
    _vllm_nvml_reports_one_gpu()
    sys.modules["vllm._C_stable_libtorch"] = types.ModuleType("vllm._C_stable_libtorch")
    import importlib.metadata

    importlib.metadata.version("vllm")  # vLLM reads it to choose its platform: METADATA must be shipped
    import vllm.model_executor.determinism.batch_invariant as bi
    from vllm.platforms import current_platform

    print(f"trace: platform {type(current_platform).__name__}", file=sys.stderr)
    import vllm._custom_ops  # noqa: F401  # reached on the GPU from _resolve_block_sizes()

    try:
        bi.enable_batch_invariant_mode()
    except Exception:  # needs the device; the imports it makes come before
        print("trace: enable_batch_invariant_mode() stopped where it needs the GPU:", file=sys.stderr)
        traceback.print_exc(limit=3)


def _torch_reports_an_sm90_gpu() -> None:
    """SGLang decides at import, from torch, whether it runs on CUDA and on which SM: say Hopper."""
    import torch

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.get_device_name = lambda device=None: "NVIDIA H200"
    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  total_memory=143771 << 20, L2_cache_size=60 << 20, warp_size=32)
    torch.cuda.get_device_properties = lambda device=None: props
    torch.cuda.current_device = lambda: 0
    torch.version.cuda = torch.version.cuda or "13.0"


def trace_sglang() -> None:
    _torchvision_without_its_extension()
    _fake_nvml_with_one_gpu()
    _torch_reports_an_sm90_gpu()
    import sglang.srt.batch_invariant_ops as bi
    import sglang.version  # noqa: F401  # the harness reads the version from here

    try:
        bi.enable_batch_invariant_mode()
        bi.disable_batch_invariant_mode()
    except Exception:
        print("trace: enable_batch_invariant_mode() stopped where it needs the GPU:", file=sys.stderr)
        traceback.print_exc(limit=3)


def _third_party_distributions() -> list[str]:
    """The installed distributions (other than the framework) whose modules the import loaded."""
    import importlib.metadata

    owners = importlib.metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    names = set()
    for name in list(sys.modules):
        top = name.split(".")[0]
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None) or ""
        if top in stdlib or top.startswith("_") or str(Path(file).resolve()).startswith(str(ROOT)):
            continue
        names.update(owners.get(top, [f"?{top}"]))
    return sorted(names, key=str.lower)


def main() -> None:
    framework = sys.argv[1]
    sys.addaudithook(_audit)
    {"vllm": trace_vllm, "sglang": trace_sglang}[framework]()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and str(Path(file).resolve()).startswith(str(ROOT)):
            _touched.add(str(Path(file).resolve()))
    files = set()
    for path in _touched:
        p = Path(path)
        if p.is_file():
            files.add(p.relative_to(ROOT).as_posix())
        elif p.is_dir():
            files.add(p.relative_to(ROOT).as_posix() + "/")
    print(json.dumps({"files": sorted(files), "distributions": _third_party_distributions()}))


if __name__ == "__main__":
    main()
