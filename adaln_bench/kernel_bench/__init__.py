"""`adaln-bench kernel-bench`, the measuring side: run.py (the command's one function), process.py (the spec
and the child processes), child.py (one process's measurements), subjects.py (the bundled projection libraries
as subjects), entry_points.py (their C entry points alone), bits.py (bits across sizes, errors against FP64),
floors.py (bytes, FLOPs and the floor at each size). The output's data, combining and Markdown are in
adaln_bench/reports/kernel_bench/.
"""
