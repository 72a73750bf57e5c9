"""The project's bundled CUDA kernel for the AdaLN modulation projection (see NOTES.md one folder up).

`candidate` registers it with the harness; `build` compiles, caches and loads the shared library.
"""
