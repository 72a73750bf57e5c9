"""The project's bundled CUDA kernel for the AdaLN modulation projection (design: docs/kernels.md).

`candidate` registers it with the harness; `build` compiles, caches and loads the shared library.
"""
