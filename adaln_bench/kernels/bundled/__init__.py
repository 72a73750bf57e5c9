"""The project's bundled CUDA kernel for the AdaLN modulation projection (design: docs/kernels.md).

`candidate` registers it with the harness; `build` declares its recipe for the kernel toolchain (which compiles and
caches the shared library) and loads it.
"""
