"""`adaln-bench kernel-bench`: run.py (the command's one function), process.py (the typed spec and the child
processes), child.py (one process's measurements), subjects.py (the bundled projection libraries as subjects),
entry_points.py (their C entry points alone), checks.py (the checking process: the harness's prefix probe and
errors against FP64), floors.py (bytes, FLOPs and the floor at each size), targets.py, combine.py (the processes
into the output) and render.py (its Markdown). The output's schema is adaln_bench/datamodel/kernel_bench.py.
"""
