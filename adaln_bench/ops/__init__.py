"""The operators of the model, as data the harness reads: one folder per operator (docs/spec.md#2-the-operators).

This package sits at the bottom of the import graph: it imports torch and the implementation libraries
under adaln_bench/kernels (those only when a candidate is built), never the harness, the reports or the
commands.
"""
